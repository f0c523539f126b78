"""Ranking of the commits between two nightlies, and the commit section of the report."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.builds import main_sha_of_nightly
from bot.core.suspects import (
    Clues,
    Commit,
    CommitRange,
    compare_url,
    github_repo,
    operators_in,
    operators_in_diff,
    rank,
    ranking,
    render_range_markdown,
)

MAIN = "a" * 40


@pytest.mark.parametrize(("message", "expected"), [
    (f"2026-05-21 nightly release ({MAIN})", MAIN),
    (f"2026-05-21 nightly release ({MAIN})\n\nbody", MAIN),
    ("2026-05-21 nightly release (abc1234)", "abc1234"),
    (f"[inductor] fix cumsum ({MAIN})", None),
    ("2026-05-21 nightly release", None),
    ("", None),
])
def test_main_sha_from_nightly_subject(message: str, expected: str | None) -> None:
    assert main_sha_of_nightly(message) == expected


@pytest.mark.parametrize(("script", "expected"), [
    ("y = torch.cumulative_trapezoid(y, x)", ("cumulative_trapezoid",)),
    ("out = x.cumsum(-1)\nF.softmax(out, -1)", ("cumsum", "softmax")),
    ("torch.nn.functional.gelu(x); torch.special.erf(x)", ("gelu", "erf")),
    ("x = torch.randn(3); f = torch.compile(fn); x.backward(); x.to('cuda')", ()),
    ("torch.cumsum(x); torch.cumsum(y)", ("cumsum",)),
    # Chained calls count; container and module methods do not.
    ("y = x.exp().log()\nz = model(x).sum(dim=0)\nouts.append(y)", ("exp", "log", "sum")),
    ("m = Linear(3, 3).eval(); d = {}.items(); a[0].abs()", ("abs",)),
])
def test_operators_in_reproducer(script: str, expected: tuple[str, ...]) -> None:
    assert operators_in(script) == expected


def commit(sha: str, title: str, *files: str) -> Commit:
    return Commit(sha=sha, title=title, files=files)


RANGE = (
    commit("1", "[dynamo] support generators", "torch/_dynamo/symbolic_convert.py"),
    commit("2", "[inductor] faster scan codegen", "torch/_inductor/codegen/simd.py"),
    commit("3", "Add bf16 support to cumulative_trapezoid",
           "aten/src/ATen/native/Integration.cpp"),
    commit("4", "Update docs", "docs/source/torch.rst"),
    commit("5", "[inductor] keep bf16 upcast in lowering", "torch/_inductor/lowering.py"),
    commit("6", "test only: cumulative_trapezoid", "test/test_ops.py"),
)


@pytest.mark.parametrize(("clues", "expected_order"), [
    (Clues(operators=("cumulative_trapezoid",)), ["3", "6"]),
    (Clues(subsystem="Inductor"), ["5", "2"]),
    (Clues(subsystem="Inductor", precision=True), ["5", "2", "3"]),
    (Clues(subsystem="Inductor", bisector_subsystem="lowerings"), ["5", "2"]),
    (Clues(subsystem="Dynamo"), ["1"]),
    (Clues(), []),
    (Clues(operators=("cumulative_trapezoid",), subsystem="Inductor", precision=True),
     ["3", "5", "6", "2"]),  # ties: the newer commit first
])
def test_rank_orders_by_clues(clues: Clues, expected_order: list[str]) -> None:
    assert [s.commit.sha for s in rank(RANGE, clues)] == expected_order


def test_an_operator_touches_a_path_as_a_word_not_as_letters() -> None:
    """`exp` is not in torch/export/, `all` not in install, `log` not in _logging."""
    noise = (commit("1", "Refactor", "torch/export/_trace.py", "tools/install.py",
                    "torch/_logging/_internal.py"),
             commit("2", "Speed up kernels", "aten/src/ATen/native/cpu/exp_kernel.cpp"))
    ranked = rank(noise, Clues(operators=("exp", "all", "log")))
    assert [(s.commit.sha, s.reasons) for s in ranked] == [
        ("2", ("touches aten/src/ATen/native/cpu/exp_kernel.cpp",))]


def test_rank_gives_reasons_in_words() -> None:
    top = rank(RANGE, Clues(operators=("cumulative_trapezoid",)))[0]
    assert "title mentions `cumulative_trapezoid`" in top.reasons


@given(st.lists(st.tuples(st.sampled_from(["[inductor] x", "fix cumsum", "docs", "y"]),
                          st.sampled_from(["torch/_inductor/a.py", "docs/a.rst", "b.cpp"])),
                max_size=30),
       st.integers(min_value=1, max_value=10))
def test_rank_is_a_sorted_subset_of_positive_scores(rows: list[tuple[str, str]], top: int) -> None:
    commits = [commit(str(i), title, path) for i, (title, path) in enumerate(rows)]
    ranked = rank(commits, Clues(operators=("cumsum",), subsystem="Inductor"), top)
    scores = [s.score for s in ranked]
    assert scores == sorted(scores, reverse=True)
    assert len(ranked) <= top and all(score > 0 for score in scores)
    assert {s.commit.sha for s in ranked} <= {c.sha for c in commits}


def test_range_without_main_shas_links_the_nightly_commits() -> None:
    text = render_range_markdown(CommitRange("g" * 40, "b" * 40, note="commits not looked up"))
    assert compare_url("g" * 40, "b" * 40) in text
    assert "(nightly branch)" in text and "commits not looked up" in text


def test_range_with_main_shas_links_main_and_lists_suspects() -> None:
    suspects = rank(RANGE, Clues(operators=("cumulative_trapezoid",)))
    text = render_range_markdown(CommitRange("g" * 40, "b" * 40, "1" * 40, "2" * 40, RANGE,
                                             suspects))
    assert "https://github.com/pytorch/pytorch/compare/" + "1" * 40 + "..." + "2" * 40 in text
    assert "(main)" in text and "(6 commits)" in text
    assert "Add bf16 support to cumulative_trapezoid" in text


def test_range_to_dict_keeps_the_link_and_suspects() -> None:
    data = CommitRange("g", "b", "m1", "m2", RANGE, rank(RANGE, Clues(subsystem="Dynamo")))
    assert data.to_dict()["compare_url"] == compare_url("m1", "m2")
    assert [s["sha"] for s in data.to_dict()["suspects"]] == ["1"]


def test_looking_for_the_fix_the_ends_and_the_ranked_commits_say_so() -> None:
    """Found by `--fix`, the older nightly is the last failing one and the ranked commits
    are candidates for the fix, not suspects of a regression."""
    suspects = rank(RANGE, Clues(operators=("cumulative_trapezoid",)))
    fixed = CommitRange("g" * 40, "b" * 40, "1" * 40, "2" * 40, RANGE, suspects, find_fix=True)
    text = render_range_markdown(fixed)
    assert f"- last bad: [`{'1' * 10}`]" in text and f"first good: [`{'2' * 10}`]" in text
    assert "| fix candidate | title | why |" in text
    assert "last good" not in text and "suspect" not in text
    assert fixed.to_dict()["find_fix"] is True
    regression = render_range_markdown(CommitRange("g" * 40, "b" * 40, "1" * 40, "2" * 40,
                                                   RANGE, suspects))
    assert "- last good: " in regression and "| suspect | title | why |" in regression


@pytest.mark.parametrize(("upstream", "repo"), [
    ("https://github.com/pytorch/pytorch.git", "https://github.com/pytorch/pytorch"),
    ("https://github.com/acme/pytorch-fork", "https://github.com/acme/pytorch-fork"),
    ("https://github.com/acme/torch.mirror.git/", "https://github.com/acme/torch.mirror"),
    ("https://github.com/acme", None),
    ("https://github.com/acme/pytorch/tree/main", None),
    ("git@github.com:acme/pytorch.git", None),  # only the https form is recognised
    ("https://gitlab.com/acme/pytorch.git", None),
    ("file:///srv/mirrors/pytorch.git", None),
    ("/srv/mirrors/pytorch", None),
])
def test_github_repo_of_an_upstream(upstream: str, repo: str | None) -> None:
    assert github_repo(upstream) == repo


@pytest.mark.parametrize(("title", "operator", "named"), [
    ("[inductor] Add config for max-autotune gemm backends (#151240)", "add", False),
    ("[inductor] Add config for max-autotune gemm backends (#151240)", "max", False),
    ("Support all dtypes in nonzero (#151244)", "all", False),
    ("[c10d] Add all_reduce timeout logging (#151250)", "all", False),
    ("[MPS] Fix max_pool2d for channels last (#151260)", "max", False),
    ("Log recompile reasons at INFO (#151261)", "log", False),
    ("Fix torch.max on bf16 NaNs (#151262)", "max", True),
    ("[decomp] Fix aten.index.Tensor with None indices (#151263)", "index", True),
    ("[inductor] Lower `add` with alpha (#151264)", "add", True),
    ("Make add_ on views keep strides (#151265)", "add", True),
    ("[inductor] Fix cumsum lowering for bool (#151266)", "cumsum", True),
])
def test_an_operator_named_like_a_word_counts_in_a_title_only_as_code(
        title: str, operator: str, named: bool) -> None:
    """A reproducer calling `x.add(y).max()` must not make every "Add ..." or "max-autotune"
    commit of the window its top suspect."""
    ranked = rank([commit("1", title)], Clues(operators=(operator,)))
    assert bool(ranked) == named


CULPRIT = "[inductor] Use libdevice exp2 in triton codegen (#151300)"


def revert_window(*extra: Commit) -> list[Commit]:
    """An Inductor window of pytorch/pytorch's shape: the change, unrelated Inductor work, and
    what `extra` adds after them."""
    return [commit("a1", CULPRIT, "torch/_inductor/codegen/triton.py"),
            commit("a2", "[inductor] Refactor scheduler fusion heuristics (#151241)",
                   "torch/_inductor/scheduler.py"),
            commit("a3", "[dynamo] Support itertools.islice (#151234)",
                   "torch/_dynamo/variables/builtin.py"),
            *extra]


def test_a_change_reverted_within_the_window_is_no_suspect() -> None:
    """pytorchmergebot's revert, `Revert "<title>"` with "This reverts commit <sha>." in its
    body, undoes the change before the first bad nightly: neither caused the regression."""
    revert = Commit("r1", f'Revert "{CULPRIT}"', files=("torch/_inductor/codegen/triton.py",),
                    reverts="a1")
    clues = Clues(operators=("exp2",), subsystem="Inductor")
    assert [s.commit.sha for s in rank(revert_window(revert), clues)] == ["a2"]
    # found by its title alone when its body is not at hand (a title-only window)
    by_title = Commit("r1", f'Revert "{CULPRIT}"')
    assert [s.commit.sha for s in rank(revert_window(by_title), clues)] == ["a2"]


def test_a_reland_after_its_revert_stays_a_suspect() -> None:
    """Landed, reverted and landed again (a reland, or a revert of the revert) in one window:
    the reland's change is what the bad nightly has."""
    revert = Commit("r1", f'Revert "{CULPRIT}"', reverts="a1")
    reland = commit("r2", f'Revert "Revert "{CULPRIT}""', "torch/_inductor/codegen/triton.py")
    ranked = rank(revert_window(revert, replace(reland, reverts="r1")),
                  Clues(operators=("exp2",), subsystem="Inductor"))
    assert [s.commit.sha for s in ranked] == ["r2", "a2"]
    relanded = commit("r2", "[reland][inductor] Use libdevice exp2 in triton codegen (#151400)",
                      "torch/_inductor/codegen/triton.py")
    ranked = rank(revert_window(revert, relanded), Clues(operators=("exp2",)))
    assert [s.commit.sha for s in ranked] == ["r2"]


def test_a_revert_of_a_change_before_the_window_is_ranked_as_any_commit() -> None:
    revert = Commit("r1", 'Revert "[inductor] Fuse exp2 into reductions (#150000)"',
                    reverts="0123456789")
    assert rank(revert_window(revert), Clues(operators=("exp2",)))[0].commit.sha == "r1"


def test_the_commit_section_keeps_both_notes_whole() -> None:
    """A wide window ranked by titles that also holds a change and its revert says both."""
    note = ("85 commits: ranked by their titles (their files are looked up for a window of "
            "up to 60, within 300 requests); 2 commits are changes reverted within the window "
            "and their reverts: not ranked")
    text = render_range_markdown(CommitRange("g" * 40, "b" * 40, "1" * 40, "2" * 40, note=note))
    assert f"- _{note}_" in text


def test_a_cut_inside_a_tie_says_how_many_equally_likely_commits_are_not_shown() -> None:
    """A wide window ranked by titles with the triage naming Inductor: every `[inductor]`
    commit scores the same, and five of them shown alone read as the five likeliest."""
    inductor = [commit(f"i{n}", title) for n, title in enumerate((
        "[inductor] Use libdevice exp2 in triton codegen (#151300)",
        "[inductor] Refactor scheduler fusion heuristics (#151241)",
        "[inductor][cpp] Vectorize masked load (#151242)",
        "[inductor] Fix max-autotune template precompile hang (#151251)",
        "[inductor] Improve cache key logging (#151254)",
        "[Inductor] Pad mm inputs for alignment (#151255)",
        "[inductor] Reuse buffers across cudagraph trees (#151256)"))]
    noise = [commit(f"n{n}", f"[dynamo] Graph break on unsupported op {n} (#15{n:04d})")
             for n in range(80)]
    found = ranking([*noise[:40], *inductor, *noise[40:]], Clues(subsystem="Inductor"))
    assert len(found[0]) == 5 and found[1] == 2
    text = render_range_markdown(CommitRange("g" * 40, "b" * 40, "1" * 40, "2" * 40,
                                             (), found[0], tied=found[1]))
    assert text.endswith("_2 more commits of the window score as much as the last one shown, "
                         "so may be as likely: the compare link lists them._")
    assert CommitRange("g", "b", tied=2).to_dict()["tied"] == 2
    # no line where the cut falls between scores
    assert ranking(inductor[:5], Clues(subsystem="Inductor"))[1] == 0
    assert "more commit" not in render_range_markdown(CommitRange("g", "b", "1", "2", (),
                                                                  found[0]))


@pytest.mark.parametrize(("subsystem", "title", "named"), [
    ("decompositions", "Add decomposition for aten.native_layer_norm_backward (#1)", True),
    ("decompositions", "[Decomp] Register decomps for cumsum (#1)", True),
    ("decompositions", "Move var_mean into torch._decomp (#1)", True),
    ("decompositions", "Decompose mean in place (#1)", False),  # a whole word, not its letters
    ("AOTAutograd", "[AOTAutograd] Fix input mutation of views (#2)", True),
    ("AOTAutograd", "[aotdispatch] Keep strides of outputs (#2)", True),
    ("AOTAutograd", "Fix functionalization of set_ (#2)", True),
    ("AOTAutograd", "Speed up torch._functorch.aot_autograd caching (#2)", True),
    ("Dynamo", "[TorchDynamo] Trace through generators (#3)", True),
    ("Dynamo", "Move helpers out of torch._dynamo.utils (#3)", True),
    ("Inductor", "[TorchInductor] Fuse more reductions (#4)", True),
    ("Inductor", "[dynamo] Graph break on unsupported op (#4)", False),
])
def test_a_title_names_the_triage_subsystem_in_any_of_its_words(subsystem: str, title: str,
                                                                 named: bool) -> None:
    ranked = rank([commit("1", title)], Clues(subsystem=subsystem))
    assert [s.reasons for s in ranked] == ([(f"{subsystem} in the title",)] if named else [])


REDUCE_OPS_DIFF = """\
Tensor& cumsum_out(const Tensor& self, int64_t dim, Tensor& result) {
  auto mask = self.max();
"""


def test_an_operator_named_in_the_changed_lines_ranks_a_commit_below_a_title_naming_it() -> None:
    """A fix to cumsum in aten/src/ATen/native/ReduceOps.cpp: no file is named after it."""
    diff = operators_in_diff(REDUCE_OPS_DIFF, ("cumsum", "max", "softmax"))
    assert diff == ("cumsum",)  # cumsum_out names it; `max` is in code of every kind
    in_code = Commit("1", "Fix an overflow in scans (#3)",
                     files=("aten/src/ATen/native/ReduceOps.cpp",), diff_operators=diff)
    titled = commit("2", "Speed up cumsum on CPU (#4)", "aten/src/ATen/native/cpu/scan.cpp")
    ranked = rank([titled, in_code], Clues(operators=("cumsum", "max")))
    assert [(s.commit.sha, s.reasons) for s in ranked] == [
        ("2", ("title mentions `cumsum`",)), ("1", ("its diff touches `cumsum`",))]
    assert ranked[0].score > ranked[1].score > 0
    # a file named after the operator says as much: its diff adds nothing to it
    named = Commit("3", "Refactor", files=("aten/src/ATen/native/cumsum.cpp",),
                   diff_operators=("cumsum",))
    assert rank([named], Clues(operators=("cumsum",)))[0].reasons == (
        "touches aten/src/ATen/native/cumsum.cpp",)
