"""Path classification, name-status parsing and candidate planning of the commit tier."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core import commit_report, overlay
from bot.core.bisection import Bisection
from bot.core.builds import Build, WheelLink, main_sha_of_nightly
from bot.core.commit_report import CommitTier, commit_summary, render_commit_section
from bot.core.overlay import (
    BLOCKING,
    OVERLAYABLE,
    Commit,
    CommitChanges,
    FileChange,
    Kind,
    classify,
    parse_name_status,
    plan_candidates,
    site_path,
)
from bot.core.results import BisectResult, ProbeRecord
from bot.core.verdicts import Verdict


@pytest.mark.parametrize(("path", "kind"), [
    ("torch/_dynamo/eval_frame.py", Kind.PYTHON),
    ("torch/_inductor/lowering.py", Kind.PYTHON),
    ("torch/_decomp/decompositions.py", Kind.PYTHON),
    ("functorch/__init__.py", Kind.PYTHON),
    ("torchgen/model.py", Kind.BUILD),  # ships, but also generates code at build time
    ("torchgen/packaged/ATen/native/native_functions.yaml", Kind.COMPILED),
    (".ci/docker/ci_commit_pins/triton.txt", Kind.BUILD),  # the pytorch-triton pin
    (".ci/docker/triton_version.txt", Kind.BUILD),
    (".github/scripts/generate_binary_build_matrix.py", Kind.BUILD),  # nvidia-* pins
    (".github/scripts/lint_native_functions.py", Kind.NO_EFFECT),
    ("torch/_behaviour.json", Kind.DATA),
    ("torch/_inductor/kernel/flex/templates/flex_attention.py.jinja", Kind.DATA),
    ("torch/csrc/dynamo/eval_frame.c", Kind.COMPILED),
    ("torch/csrc/autograd/init.cpp", Kind.COMPILED),
    ("torch/csrc/utils/python_arg_parser.py", Kind.COMPILED),  # anything under csrc
    ("aten/src/ATen/native/native_functions.yaml", Kind.COMPILED),
    ("tools/autograd/derivatives.yaml", Kind.COMPILED),
    ("aten/src/ATen/native/cuda/Loops.cuh", Kind.COMPILED),
    ("c10/core/TensorImpl.h", Kind.COMPILED),
    ("caffe2/CMakeLists.txt", Kind.COMPILED),
    ("third_party/fbgemm", Kind.COMPILED),
    ("torch/_inductor/codegen/cpp_prefix.h", Kind.COMPILED),
    ("cmake/Dependencies.cmake", Kind.BUILD),
    ("tools/setup_helpers/cmake.py", Kind.BUILD),
    ("setup.py", Kind.BUILD),
    ("version.txt", Kind.BUILD),
    (".ci/manywheel/build.sh", Kind.BUILD),
    ("some_new_top_level_file", Kind.BUILD),  # unknown: assume it may change the build
    ("torch/version.py", Kind.GENERATED),
    ("torch/_C/__init__.pyi", Kind.GENERATED),
    ("torch/_C/_autograd.pyi", Kind.NO_EFFECT),  # checked in; read by type checkers only
    ("torch/_C/_VariableFunctions.pyi.in", Kind.GENERATED),
    ("torch/_VF.pyi", Kind.GENERATED),
    ("torch/nn/functional.pyi", Kind.GENERATED),
    ("torch/lib/libtorch_cpu.so", Kind.GENERATED),
    ("torch/fx/node.pyi", Kind.NO_EFFECT),
    ("test/inductor/test_torchinductor.py", Kind.NO_EFFECT),
    ("test/cpp/api/modules.cpp", Kind.NO_EFFECT),  # a C++ test: not in libtorch
    ("test/cpp_extensions/extension.cpp", Kind.NO_EFFECT),
    ("test/cpp/api/CMakeLists.txt", Kind.NO_EFFECT),
    ("benchmarks/static_runtime/test_static_runtime.cc", Kind.NO_EFFECT),
    ("aten/src/ATen/test/basic.cpp", Kind.COMPILED),  # under aten/: kept conservative
    (".github/workflows/pull.yml", Kind.NO_EFFECT),
    ("docs/source/index.rst", Kind.NO_EFFECT),
    ("benchmarks/dynamo/common.py", Kind.NO_EFFECT),
    (".ci/pytorch/test.sh", Kind.NO_EFFECT),
    ("functorch/examples/maml.py", Kind.NO_EFFECT),
    ("README.md", Kind.NO_EFFECT),
    (".lintrunner.toml", Kind.NO_EFFECT),
])
def test_classify(path: str, kind: Kind) -> None:
    assert classify(path) is kind


def test_site_path_maps_shipped_files_one_to_one_and_nothing_else() -> None:
    assert site_path("torch/_dynamo/utils.py") == "torch/_dynamo/utils.py"
    assert site_path("torch/csrc/Module.cpp") is None
    assert site_path("test/test_torch.py") is None
    assert site_path("torch/version.py") is None


def test_parse_name_status_with_renames_and_odd_names() -> None:
    text = "M\0torch/a.py\0A\0torch/b c.py\0D\0aten/x.cpp\0R087\0torch/old.py\0torch/new.py\0"
    assert parse_name_status(text) == (
        FileChange("M", "torch/a.py"), FileChange("A", "torch/b c.py"),
        FileChange("D", "aten/x.cpp"), FileChange("R", "torch/new.py", "torch/old.py"),
    )
    assert parse_name_status("") == ()


@pytest.mark.parametrize(("subject", "sha"), [
    ("2026-05-21 nightly release (0a1b2c3d4e5f60718293a4b5c6d7e8f901234567)",
     "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"),
    ("2026-05-21 nightly release (abc1234)", "abc1234"),
    ("[inductor] fix (#123)", None),
    ("2026-05-21 nightly release", None),
])
def test_main_sha_of_nightly(subject: str, sha: str | None) -> None:
    assert main_sha_of_nightly(subject) == sha


def test_commit_pr_number_and_link() -> None:
    commit = Commit("a" * 40, "[dynamo] Fix graph break (#170001)", "Ada")
    assert commit.pr_number == 170001
    assert commit.pr_url == "https://github.com/pytorch/pytorch/pull/170001"
    assert commit.title == "[dynamo] Fix graph break"
    assert Commit("b" * 40, "Revert something").pr_number is None


def _sha(number: int) -> str:
    return f"{number:02x}" * 20


def _history(spec: str) -> list[CommitChanges]:
    """One commit per letter: p Python, c C++, t test, g generated; changes accumulate."""
    paths = {"p": "torch/_dynamo/x{}.py", "c": "aten/src/ATen/x{}.cpp", "t": "test/t{}.py",
             "g": "torch/_C/_VariableFunctions.pyi"}
    history, since = [], []
    for number, letter in enumerate(spec):
        own = (FileChange("M", paths[letter].format(number)),)
        since = since + list(own)
        history.append(CommitChanges(Commit(_sha(number), f"c{number}"), own, tuple(since)))
    return history


@pytest.mark.parametrize(("spec", "testable"), [
    ("pppp", "YYYY"),
    ("ptpt", "YYYY"),
    ("ppcp", "YYNN"),
    ("cppp", "NNNN"),
    ("pptg", "YYYN"),
    ("", ""),
])
def test_plan_table(spec: str, testable: str) -> None:
    planned = plan_candidates(_history(spec))
    assert "".join("Y" if c.testable else "N" for c in planned) == testable


def test_untestable_reason_names_the_path_and_the_commit_that_brought_it() -> None:
    planned = plan_candidates(_history("ppcp"))
    assert planned[2].reason == "compiled change: aten/src/ATen/x2.cpp"
    assert planned[3].reason == f"compiled change: aten/src/ATen/x2.cpp (since {_sha(2)[:12]})"
    assert planned[3].cause == _sha(2)
    assert [c.path for c in planned[1].overlay] == ["torch/_dynamo/x0.py", "torch/_dynamo/x1.py"]
    assert planned[1].reason == "overlay of 2 file(s)"


def test_a_reverted_cpp_change_makes_later_commits_testable_again() -> None:
    # What counts is the tree difference to the base: once the C++ file is back, overlay works.
    base = Commit("0" * 40, "c0")
    cpp = FileChange("M", "aten/x.cpp")
    history = [CommitChanges(base, (cpp,), (cpp,)),
               CommitChanges(Commit("1" * 40, "revert"), (cpp,), ())]
    assert [c.testable for c in plan_candidates(history)] == [False, True]


_PATHS = st.sampled_from([
    "torch/a.py", "torch/_inductor/b.py", "functorch/c.py", "torch/d.json", "aten/e.cpp",
    "torch/csrc/f.cpp", "test/g.py", ".github/h.yml", "CMakeLists.txt", "torch/version.py",
    "docs/i.md", "tools/j.py",
])


@given(st.lists(st.lists(_PATHS, min_size=1, max_size=3), max_size=8))
def test_property_testable_until_the_first_blocking_change(commits: list[list[str]]) -> None:
    history, since = [], []
    for number, paths in enumerate(commits):
        own = tuple(FileChange("M", p) for p in paths)
        since = since + list(own)
        history.append(CommitChanges(Commit(_sha(number), "s"), own, tuple(since)))
    planned = plan_candidates(history)
    first_blocking = next((i for i, paths in enumerate(commits)
                           if any(classify(p) in BLOCKING for p in paths)), len(commits))
    assert [c.testable for c in planned] == [i < first_blocking for i in range(len(commits))]
    for candidate in planned:
        for change in candidate.overlay:
            assert classify(change.path) in OVERLAYABLE
            assert site_path(change.path) == change.path
        if not candidate.testable:
            assert candidate.cause == _sha(first_blocking)


def _tier(spec: str, verdicts: dict[int, Verdict]) -> CommitTier:
    planned = plan_candidates(_history(spec))
    link = WheelLink("torch-2.13.0.dev20260520+cpu-cp311-cp311-linux_x86_64.whl", "http://x")
    builds = tuple(Build(f"v{i}", None, "cpu", link) for i in range(len(spec) + 1))
    state = Bisection(len(builds), good_index=0)
    for index, verdict in verdicts.items():
        state = state.record(index, verdict)
    return CommitTier("a" * 40, "b" * 40, planned, BisectResult(builds, state, ()))


def test_report_names_the_culprit() -> None:
    tier = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.BAD, 2: Verdict.GOOD, 3: Verdict.BAD})
    text = render_commit_section(tier)
    assert text.startswith(f"### Culprit commit: [`{_sha(3 - 1)[:12]}`]")
    assert commit_summary(tier)["culprit"]["sha"] == _sha(2)


def test_terminal_headline_is_plain_text_and_the_markdown_one_keeps_its_links() -> None:
    tier = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.BAD, 2: Verdict.GOOD, 3: Verdict.BAD})
    sha = _sha(2)
    url = f"https://github.com/pytorch/pytorch/commit/{sha}"
    assert commit_report.headline(tier).startswith(f"Culprit commit: [`{sha[:12]}`]({url})")
    terminal = commit_report.headline(tier, markdown=False)
    assert terminal.startswith(f"Culprit commit: {sha[:12]} ({url}) ")
    assert "](" not in terminal and "`" not in terminal


def test_links_follow_a_github_fork() -> None:
    plain = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.BAD, 2: Verdict.GOOD, 3: Verdict.BAD})
    tier = replace(plain, candidates=tuple(  # subjects ending in a PR number: `c2 (#150002)`
        replace(c, commit=replace(c.commit, subject=f"{c.commit.subject} (#{150000 + i})"))
        for i, c in enumerate(plain.candidates)))
    sha = _sha(2)
    fork = replace(tier, repo="https://github.com/acme/pytorch")
    text = render_commit_section(fork)
    assert f"[`{sha[:12]}`](https://github.com/acme/pytorch/commit/{sha})" in text
    assert f"(https://github.com/acme/pytorch/compare/{'a' * 40}...{'b' * 40})" in text
    # A fork's `(#N)` may be its own pull request or pytorch's: a number, not a link.
    assert "(#\u200d150002)" in text and "/pull/" not in text and "pytorch/pytorch" not in text
    assert commit_summary(fork)["culprit"]["url"] is None
    assert f"{sha[:12]} (https://github.com/acme/pytorch/commit/{sha}) " in \
        commit_report.headline(fork, markdown=False)
    assert commit_report.headline(tier, markdown=False).startswith(  # pytorch/pytorch's
        f"Culprit commit: {sha[:12]} (https://github.com/pytorch/pytorch/commit/{sha}) c2 "
        "(#150002)")
    assert "https://github.com/pytorch/pytorch/pull/150002" in render_commit_section(tier)


def test_report_narrows_to_a_range_and_says_why() -> None:
    verdicts = {0: Verdict.GOOD, 1: Verdict.GOOD, 2: Verdict.GOOD, 3: Verdict.SKIP,
                4: Verdict.BAD}
    tier = _tier("ppcp", verdicts)
    text = render_commit_section(tier)
    assert "Narrowed to 2 commits" in text
    assert "compiled change: aten/src/ATen/x2.cpp" in text
    assert [c["sha"] for c in commit_summary(tier)["range"]] == [_sha(2), _sha(3)]
    assert commit_summary(tier)["culprit"] is None


def test_a_testable_commit_whose_run_was_skip_says_why() -> None:
    """An overlay that does not import, or a flaky run: the commit was testable, its run SKIP.
    The report used to show only "overlay of 1 file(s)" for it, and no reason anywhere."""
    tier = _tier("pppp", {0: Verdict.GOOD, 1: Verdict.GOOD, 4: Verdict.BAD})
    assert tier.result is not None
    skips = {2: "import torch failed: SyntaxError: invalid syntax (cuda.py, line 1)",
             3: "flaky: 2 bad, 1 good of 3 runs"}
    probes = tuple(ProbeRecord(i, f"v{i}", Verdict.SKIP, why, 1.0) for i, why in skips.items())
    state = tier.result.bisection.record(2, Verdict.SKIP).record(3, Verdict.SKIP)
    tier = replace(tier, result=replace(tier.result, bisection=state, probes=probes))
    text = render_commit_section(tier)
    assert "Narrowed to 3 commits" in text
    why = text[text.index("Why they could not be told apart"):text.index("<details>")]
    assert f"`{_sha(1)[:12]}`: overlay of 2 file(s), but import torch failed: SyntaxError" in why
    assert "flaky: 2 bad, 1 good of 3 runs" in why
    table = text[text.index("<details>"):]
    assert "import torch failed: SyntaxError: invalid syntax (cuda.py, line 1)" in table
    summary = commit_summary(tier)["commits"]
    assert [c["skip_reason"] for c in summary] == ["", skips[2], skips[3], ""]


def test_a_culprit_never_run_is_said_to_be_found_by_elimination() -> None:
    """The newest commit changes C++: it is bad only as the first bad nightly is, and every
    Python commit before it passes. It may be the cause, or the build settings may be."""
    tier = _tier("pppc", {0: Verdict.GOOD, 1: Verdict.GOOD, 2: Verdict.GOOD, 3: Verdict.GOOD,
                          4: Verdict.BAD})
    text = render_commit_section(tier)
    assert text.startswith("### Culprit by elimination (not run by overlay: compiled change")
    assert "or something outside the Python files" in text
    assert commit_summary(tier)["culprit_tested"] is False
    found = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.BAD, 2: Verdict.GOOD, 3: Verdict.BAD})
    assert commit_summary(found)["culprit_tested"] is True


def test_a_range_none_of_whose_commits_could_run_is_not_called_narrowed() -> None:
    tier = _tier("cpp", {0: Verdict.GOOD, 1: Verdict.SKIP, 2: Verdict.SKIP, 3: Verdict.BAD})
    assert "### Not narrowed: none of the 3 commits could be told apart" in \
        render_commit_section(tier)


def test_newest_commits_that_could_not_be_tested_are_not_called_not_reproduced() -> None:
    """The newest commit's overlay fails differently (SKIP) and the one before it passes: that
    says nothing about the newest one, which is the prime suspect, not "outside Python"."""
    tier = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.SKIP, 3: Verdict.GOOD})
    text = render_commit_section(tier)
    assert text.startswith("### Not narrowed: the newest 1 commit(s) could not be tested")
    assert "Not reproduced" not in text
    assert f"Not tested, newest last:\n\n- [`{_sha(3)[:12]}`]" in text
    summary = commit_summary(tier)
    assert [c["sha"] for c in summary["untested_newest"]] == [_sha(3)]
    assert summary["culprit"] is None and summary["status"] == "not-reproduced"
    passed = _tier("pppp", {0: Verdict.GOOD, 4: Verdict.GOOD})
    assert render_commit_section(passed).startswith("### Not reproduced by overlay: the first bad")
    assert commit_summary(passed)["untested_newest"] == []


def test_report_when_skipped() -> None:
    assert "not run: no commits" in render_commit_section(CommitTier(skipped="no commits"))


@pytest.mark.parametrize("module", [overlay, commit_report])
def test_core_modules_do_no_io(module: object) -> None:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not imported & {"os", "subprocess", "requests", "time", "pathlib", "socket", "shutil"}
