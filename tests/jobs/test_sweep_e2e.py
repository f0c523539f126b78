"""Sweeps day by day over a local nightly mirror with a regression planted and later fixed."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.history import History
from bot.demo.index_server import IndexServer
from bot.demo.mirror import Mirror, build_mirror, fake_git_version
from bot.jobs import sweep_cli
from bot.jobs.cli import build_parser, main
from bot.jobs.sweep_text import LABELS
from tests.fakes.github_server import FakeGitHub
from tests.fakes.tracker import FakeTracker

SUITE = Path(__file__).resolve().parents[2] / "repro_suites" / "demo"
CASE = "demo/cumsum_compile"
BUG = {"subsystem": "inductor", "kind": "precision"}
BROKEN, FIXED = dt.date(2026, 5, 3), dt.date(2026, 5, 6)  # bad from the 3rd, fixed on the 6th
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Mirror:
    return build_mirror(tmp_path_factory.mktemp("mirror"), start=dt.date(2026, 5, 1), days=7,
                        missing=(), python_tags=(TAG,),
                        bug_for=lambda day: BUG if BROKEN <= day < FIXED else None)


@pytest.fixture(scope="module")
def server(mirror: Mirror) -> Iterator[IndexServer]:
    with IndexServer(mirror.root) as running:
        yield running


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")  # environments are shared by the tests, like a runner


def version(mirror: Mirror, day: int) -> str:
    return mirror.version_on(dt.date(2026, 5, day))


def sweep(server: IndexServer, mirror: Mirror, day: int, db: Path, cache: Path,
          tracker: FakeTracker | None, *extra: str) -> int:
    args = build_parser().parse_args([
        "sweep", str(SUITE), "--index", server.variant_url(mirror.variant),
        "--nightly", version(mirror, day), "--db", str(db), "--cache-dir", str(cache),
        "--no-default-packages", *(["--github-repo", "owner/repo"] if tracker else []), *extra])
    return int(args.handler(args) if tracker is None else
               sweep_cli.sweep_main(args, lambda repo: tracker))


def test_a_regression_is_bisected_filed_updated_and_seen_fixed(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    first_bad, last_good = version(mirror, 3), version(mirror, 2)
    assert sweep(server, mirror, 1, db, cache_dir, tracker) == 0
    assert tracker.issues == {}

    sweep(server, mirror, 4, db, cache_dir, tracker)  # the sweep missed the 2nd and 3rd
    [issue] = tracker.filed_by_bot()
    assert issue.title == f"[sweep] {CASE} regressed in nightly {first_bad}"
    assert f"<!-- torch-bisect-bot:regression case={CASE} first_bad={first_bad} -->" in issue.body
    assert f"last good nightly: `{last_good}`" in issue.body

    sweep(server, mirror, 5, db, cache_dir, tracker)
    assert [i.number for i in tracker.filed_by_bot()] == [issue.number]
    assert issue.edits == 1 and f"still failing as of nightly: `{version(mirror, 5)}`" in issue.body

    for day in (6, 7):
        sweep(server, mirror, day, db, cache_dir, tracker)
    assert len(tracker.issues) == 1
    assert [c for c in issue.comments if "appears fixed" in c] == [issue.comments[0]]
    assert f"appears fixed in nightly {version(mirror, 6)}" in issue.comments[0]


def test_a_second_sweep_of_one_nightly_runs_no_reproducer(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite3"
    for day in (1, 4):
        sweep(server, mirror, day, db, cache_dir, None)
    with History(db) as history:
        runs = history.run_count()
    capsys.readouterr()
    sweep(server, mirror, 4, db, cache_dir, None)
    assert "0 reproducer run(s) made" in capsys.readouterr().out
    with History(db) as history:
        assert history.run_count() == runs > 0


def test_shards_export_and_the_collector_files(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """The workflow's path: each shard starts from the last history, exports, one merge files."""
    collector, tracker = tmp_path / "history.sqlite3", FakeTracker()
    History(collector).close()
    for day in (1, 4):
        exports = []
        for shard in ("1/2", "2/2"):
            shard_db = tmp_path / f"day{day}-shard{shard[0]}.sqlite3"
            shutil.copy(collector, shard_db)  # the downloaded artifact
            exports.append(tmp_path / f"day{day}-shard{shard[0]}.json")
            sweep(server, mirror, day, shard_db, cache_dir, None, "--shard", shard,
                  "--export", str(exports[-1]))
        args = build_parser().parse_args(["sweep-merge", *map(str, exports), "--db",
                                          str(collector), "--github-repo", "owner/repo"])
        assert sweep_cli.merge_main(args, lambda repo: tracker) == 0
    [issue] = tracker.filed_by_bot()
    assert f"first_bad={version(mirror, 3)}" in issue.body
    with History(collector) as history:
        assert history.pending_findings() == []


def test_a_lost_history_finds_the_issue_by_its_marker_instead_of_filing_again(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    tracker = FakeTracker()
    for db in (tmp_path / "first.sqlite3", tmp_path / "after-the-artifact-expired.sqlite3"):
        for day in (1, 4):
            sweep(server, mirror, day, db, cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    assert issue.edits == 1


def test_a_known_bug_gets_one_fixed_comment_on_its_linked_issue(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    tracker = FakeTracker()
    linked = tracker.add_existing("compiled running sum is off", "reported by a user")
    suite = tmp_path / "known"
    suite.mkdir()
    text = (SUITE / "cumsum_compile.py").read_text()
    (suite / "cumsum_compile.py").write_text(text.replace(
        '# expect = "pass"', f'# expect = "fail"\n# issue = {linked}'))
    args = ["--db", str(tmp_path / "h.sqlite3"), "--cache-dir", str(cache_dir),
            "--no-default-packages", "--github-repo", "owner/repo"]
    for day in (4, 5, 6, 7):
        parsed = build_parser().parse_args(["sweep", str(suite), "--index",
                                            server.variant_url(mirror.variant), "--nightly",
                                            version(mirror, day), *args])
        sweep_cli.sweep_main(parsed, lambda repo: tracker)
    assert tracker.filed_by_bot() == []  # a known failure is not a new regression
    comments = tracker.issues[linked].comments
    assert len(comments) == 1 and f"appears fixed in nightly {version(mirror, 6)}" in comments[0]


DISTRIBUTED_CASE = '''# The running sum on each of two ranks, compiled with freezing, matches eager.
# /// bisect-case
# requires = "cpu"
# timeout = 60
# nproc_per_node = 2
# env = { TORCHINDUCTOR_FREEZING = "1" }
# ///
import os
from itertools import accumulate

import torch

assert os.environ["WORLD_SIZE"] == "2", "not run with torchrun"
assert os.environ.get("TORCHINDUCTOR_FREEZING") == "1", "run without its variables"
rank = int(os.environ["RANK"])


def running_sum(values):
    return list(accumulate(values))


values = [(rank + 1) * ((i * 37) % 101) / 101.0 for i in range(256)]
torch.testing.assert_close(torch.compile(running_sum)(values), running_sum(values))
'''


def test_a_case_run_with_torchrun_and_its_variables_is_swept_and_bisected(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """`nproc_per_node` and `env` in a case's block: every run of it, on the nightly and in the
    bisection, is a torchrun of two ranks with the variables set (the script checks both)."""
    suite = tmp_path / "distributed"
    suite.mkdir()
    (suite / "running_sum_ranks.py").write_text(DISTRIBUTED_CASE)
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    args = ["--db", str(db), "--cache-dir", str(cache_dir), "--no-default-packages",
            "--github-repo", "owner/repo"]
    for day in (1, 4):
        parsed = build_parser().parse_args(["sweep", str(suite), "--index",
                                            server.variant_url(mirror.variant), "--nightly",
                                            version(mirror, day), *args])
        assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    [issue] = tracker.filed_by_bot()
    assert f"first_bad={version(mirror, 3)}" in issue.body
    assert "AssertionError: Tensor-likes are not close!" in issue.body
    assert "not run with torchrun" not in issue.body and "without its variables" not in issue.body


def test_a_sweep_under_another_sandbox_or_package_source_takes_no_stored_result(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """What a run sees changes its verdict: unconfined (`--sandbox none`) it reaches the
    network and /tmp, and the packages beside torch come from elsewhere. Those runs were
    taken from the history for a confined sweep, and the other way round."""
    suite = tmp_path / "suite"
    dated_case(suite, "plain", "raise SystemExit(1)")
    db = tmp_path / "history.sqlite3"
    counts = []
    for extra in (["--sandbox", "none"], [], ["--packages-index", ""],
                  ["--sandbox", "none", "--packages-index", ""], []):
        capsys.readouterr()
        assert sweep_suite(server, mirror, suite, 1, db, cache_dir, None, *extra) == 0
        out = capsys.readouterr().out
        made = re.search(r"(\d+) reproducer run\(s\) made, (\d+) result\(s\) taken", out)
        assert made, out
        counts.append((int(made[1]), int(made[2])))
    # each new combination runs the case; the confined default's run is found again
    assert counts == [(1, 0)] * 4 + [(0, 1)], counts


def dated_case(folder: Path, name: str, failing: str, meta: str = 'timeout = 30',
               passing: str = "print('ok', day)") -> Path:
    """A case that runs `failing` (Python lines) on the builds of 3-6 May, then `passing` on
    every build: the build's date is read from its torch version."""
    folder.mkdir(parents=True, exist_ok=True)
    block = "\n".join(f"# {line}" for line in meta.splitlines())
    body = "\n".join(f"    {line}" for line in failing.splitlines())
    path = folder / f"{name}.py"
    path.write_text(f"# /// bisect-case\n{block}\n# ///\nimport torch\n\n"
                    "day = int(torch.__version__.split('.dev')[1][:8])\n"
                    f"if 20260503 <= day < 20260507:\n{body}\n{passing}\n")
    return path


def sweep_suite(server: IndexServer, mirror: Mirror, suite: Path, day: int, db: Path,
                cache: Path, tracker: FakeTracker | None, *extra: str) -> int:
    args = build_parser().parse_args([
        "sweep", str(suite), "--index", server.variant_url(mirror.variant), "--nightly",
        version(mirror, day), "--db", str(db), "--cache-dir", str(cache),
        "--no-default-packages", *(["--github-repo", "owner/repo"] if tracker else []), *extra])
    return int(sweep_cli.sweep_main(args, lambda repo: tracker))


def test_a_nightly_that_hangs_or_drops_an_api_is_a_regression(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """A stored case ran within its timeout, and had its API, on the nightly it passed: a
    hang or a vanished torch API in a later one is the regression, not an untestable build."""
    suite = tmp_path / "suite"
    dated_case(suite, "hangs", "import time\ntime.sleep(60)", meta="timeout = 2")
    dated_case(suite, "api_gone", "torch.compiler_api_of_may")
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 4):
        assert sweep_suite(server, mirror, suite, day, db, cache_dir, tracker) == 0
    # Both broke between the same two nightlies: one issue holds both, each with its failure
    [issue] = tracker.filed_by_bot()
    assert issue.title == (f"[sweep] 2 cases regressed in nightly {version(mirror, 3)} "
                           "(suite/api_gone and 1 more)")
    hang = next(line for line in issue.body.splitlines() if line.startswith("| `suite/hangs`"))
    assert "| timeout |" in hang and "--on-timeout bad" in issue.body
    api = next(line for line in issue.body.splitlines() if line.startswith("| `suite/api_gone`"))
    assert "has no attribute 'compiler_api_of_may'" in api
    # and `hang = "skip"` keeps the old meaning: nothing to file
    skipping = tmp_path / "skipping"
    dated_case(skipping, "hangs", "import time\ntime.sleep(60)", meta='timeout = 2\nhang = "skip"')
    quiet = FakeTracker()
    for day in (1, 4):
        sweep_suite(server, mirror, skipping, day, tmp_path / "h2.sqlite3", cache_dir, quiet)
    assert quiet.issues == {}


def windowed_case(folder: Path, name: str, first: int, fixed: int) -> Path:
    """A case that fails (an exception) on the builds of May `first` to `fixed` - 1."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text("# /// bisect-case\n# timeout = 30\n# ///\nimport torch\n\nday = int(torch.__version__.split('.dev')[1][:8])\n"
                    f"if 202605{first:02d} <= day < 202605{fixed:02d}:\n"
                    f"    raise RuntimeError('{name} broke')\nprint('ok')\n")
    return path


def test_cases_that_broke_between_the_same_two_nightlies_share_one_issue(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """One change that broke 30 cases filed 30 issues. Cases whose regressions lie between
    the same two nightlies share one; an issue's body is written once a filing however many
    of its cases changed, and shows which of them pass again."""
    suite = tmp_path / "suite"
    windowed_case(suite, "a", 3, 7)
    windowed_case(suite, "b", 3, 6)
    windowed_case(suite, "c", 5, 7)  # broke later: another window, another issue
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 4):
        assert sweep_suite(server, mirror, suite, day, db, cache_dir, tracker) == 0
    [group] = tracker.filed_by_bot()
    assert group.title == (f"[sweep] 2 cases regressed in nightly {version(mirror, 3)} "
                           "(suite/a and 1 more)")
    for name in ("a", "b"):
        marker = f"<!-- torch-bisect-bot:regression case=suite/{name} first_bad={version(mirror, 3)} -->"
        assert marker in group.body
        row = next(line for line in group.body.splitlines() if line.startswith(f"| `suite/{name}`"))
        assert f"RuntimeError: {name} broke" in row and f"still failing in `{version(mirror, 4)}`" in row
    assert f"last good nightly: `{version(mirror, 2)}`" in group.body
    assert group.edits == 1  # b joined the issue a filed

    assert sweep_suite(server, mirror, suite, 5, db, cache_dir, tracker) == 0
    assert group.edits == 2  # a and b still failing: one edit for both
    assert f"still failing in `{version(mirror, 5)}`" in group.body
    [later] = [issue for issue in tracker.filed_by_bot() if issue is not group]
    assert later.title == f"[sweep] suite/c regressed in nightly {version(mirror, 5)}"
    assert "suite/a" not in later.body

    assert sweep_suite(server, mirror, suite, 6, db, cache_dir, tracker) == 0
    assert [c for c in group.comments if "appears fixed" in c] == [group.comments[0]]
    assert f"`suite/b` appears fixed in nightly {version(mirror, 6)}" in group.comments[0]
    b_row = next(line for line in group.body.splitlines() if line.startswith("| `suite/b`"))
    assert f"passes again in `{version(mirror, 6)}`" in b_row
    assert "still failing: 1 of the 2 cases" in group.body
    assert len(tracker.filed_by_bot()) == 2


def test_an_issue_follows_its_case_through_a_rename_an_edit_and_a_new_failure(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    case = dated_case(suite, "old_name", "raise AssertionError('compiled sum is off')")
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 3):
        sweep_suite(server, mirror, suite, day, db, cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    assert "AssertionError: compiled sum is off" in issue.body

    renamed = case.rename(suite / "new_name.py")  # the same script under another name
    capsys.readouterr()
    sweep_suite(server, mirror, suite, 4, db, cache_dir, tracker)
    assert issue.edits == 1 and f"still failing as of nightly: `{version(mirror, 4)}`" in issue.body
    assert f"suite/new_name: updated issue #{issue.number}" in capsys.readouterr().out

    renamed.write_text(renamed.read_text().replace(
        "raise AssertionError('compiled sum is off')",
        "raise RuntimeError('Triton kernel failed to launch')  # a second bug behind the first"))
    sweep_suite(server, mirror, suite, 5, db, cache_dir, tracker)
    out = capsys.readouterr().out
    assert "still-failing" in out and "unexpected-failure" not in out
    assert "edited since that run" in out and f"fails otherwise than #\u200d{issue.number}" in out
    assert issue.edits == 2 and "**fails differently in" in issue.body
    assert "RuntimeError: Triton kernel failed to launch" in issue.body

    sweep_suite(server, mirror, suite, 7, db, cache_dir, tracker)
    assert [c for c in issue.comments if "appears fixed" in c] == issue.comments
    assert len(issue.comments) == 1 and len(tracker.issues) == 1


def test_the_issue_names_the_commits_and_a_rerun_that_judges_as_the_sweep(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """A metric case passes by its exit status alone: the rerun must carry the metric."""
    suite = tmp_path / "suite"
    dated_case(suite, "drift", "print('METRIC max_abs_diff=0.5')",
               meta='timeout = 30\nmetric = "max_abs_diff"\nthreshold = 1e-4',
               passing="if not 20260503 <= day < 20260507:\n    print('METRIC max_abs_diff=0')")
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 5):
        sweep_suite(server, mirror, suite, day, db, cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    good, bad = fake_git_version(dt.date(2026, 5, 2)), fake_git_version(BROKEN)
    assert f"https://github.com/pytorch/pytorch/compare/{good}...{bad}" in issue.body
    rerun = issue.body.split("Rerun locally:")[1].split("```")[1].strip()
    assert "--metric" in rerun and "--threshold 0.0001" in rerun
    assert "--missing-api bad" in rerun  # a sweep's rule for an API gone from a nightly
    assert "--no-default-packages" in rerun  # the environments the sweep made
    argv = shlex.split(rerun)[1:] + ["--cache-dir", str(cache_dir), "--no-triage",
                                     "--no-commit-tier"]
    capsys.readouterr()
    assert main(argv) == 0
    assert (f"Regression found: first bad nightly {version(mirror, 3)} (last good: "
            f"{version(mirror, 2)})") in capsys.readouterr().out


def test_an_invalid_case_or_a_gpu_less_cuda_shard_fails_the_sweep_after_the_rest_ran(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "demo"
    shutil.copytree(SUITE, suite)
    (suite / "broken.py").write_text("# /// bisect-case\n# ///\nimport torch\ndef f(:\n")
    db = tmp_path / "history.sqlite3"
    assert sweep_suite(server, mirror, suite, 1, db, cache_dir, None, "--kind", "cpu") == 1
    captured = capsys.readouterr()
    assert "broken.py:4: the script does not compile" in captured.err
    assert "1 invalid case(s) were not run" in captured.err
    assert "| `demo/cumsum_compile` | good |" in captured.out  # the valid cases ran
    (suite / "broken.py").unlink()
    # a CUDA shard on a runner whose torch sees no GPU tested nothing: red, not green
    assert sweep_suite(server, mirror, suite, 1, db, cache_dir, None, "--kind", "cuda") == 1
    assert "this CUDA shard ran where torch sees no usable GPU" in capsys.readouterr().err
    assert sweep_suite(server, mirror, suite, 1, db, cache_dir, None, "--kind", "cpu") == 0


def test_a_damaged_or_missing_shard_export_holds_back_nothing_else(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    collector, tracker = tmp_path / "history.sqlite3", FakeTracker()
    History(collector).close()
    exports = []
    for day in (1, 4):
        for shard in ("1/3", "2/3"):  # shard 3/3 of each night never uploads its export
            shard_db = tmp_path / f"day{day}-shard{shard[0]}.sqlite3"
            shutil.copy(collector, shard_db)
            exports.append(tmp_path / f"day{day}-shard{shard[0]}.json")
            sweep(server, mirror, day, shard_db, cache_dir, None, "--shard", shard,
                  "--export", str(exports[-1]))
        cut = tmp_path / f"day{day}-cut.json"
        cut.write_text(exports[-1].read_text()[:200])  # an upload cut short
        args = build_parser().parse_args(["sweep-merge", str(cut), *map(str, exports[-2:]),
                                          "--db", str(collector), "--github-repo", "o/r"])
        assert sweep_cli.merge_main(args, lambda repo: tracker) == 1
        err = capsys.readouterr().err
        assert f"{cut}: not merged, not a sweep export" in err
        assert f"shard 3/3 of nightly {version(mirror, day)} sent no export" in err
    [issue] = tracker.filed_by_bot()  # cumsum_compile is in shard 1 (of the sorted cases)
    assert f"first_bad={version(mirror, 3)}" in issue.body


class RefusingTracker(FakeTracker):
    """GitHub says no to writes, as it does to a token without `issues: write`."""

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> int:
        from github import GithubException
        raise GithubException(403, {"message": "Resource not accessible by integration"}, None)


def test_a_github_refusal_keeps_the_findings_for_the_next_merge(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite3"
    sweep(server, mirror, 1, db, cache_dir, None)
    assert sweep(server, mirror, 4, db, cache_dir, RefusingTracker()) == 1
    err = capsys.readouterr().err
    assert "filing stopped at a GitHub error: 403" in err and "issues: write" in err
    tracker = FakeTracker()
    args = build_parser().parse_args(["sweep-merge", "--db", str(db), "--github-repo", "o/r"])
    assert sweep_cli.merge_main(args, lambda repo: tracker) == 0
    assert len(tracker.filed_by_bot()) == 1


@pytest.fixture
def github_tracker(github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The sweep's tracker as the collect job makes it, with the job's variables."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    tracker = sweep_cli.make_tracker("pytorch/pytorch")
    assert tracker is not None
    return tracker


def test_the_tracker_talks_to_the_api_the_job_names(
    github_server: FakeGitHub, github_tracker: Any
) -> None:
    """GitHub Enterprise Server: its API is GITHUB_API_URL, never api.github.com."""
    tracker = github_tracker
    number = tracker.create_issue("[sweep] demo/x regressed", "body", ["torch-bisect-bot"])
    issue = github_server.state.repos["pytorch/pytorch"].issues[number]
    assert issue.title == "[sweep] demo/x regressed"
    tracker.update_issue(number, "two cases", "[sweep] 2 cases regressed")  # a case joined
    assert (issue.title, issue.body) == ("[sweep] 2 cases regressed", "two cases")
    tracker.update_issue(number, "still failing")  # the title a person may have edited stays
    assert (issue.title, issue.body) == ("[sweep] 2 cases regressed", "still failing")
    seen = tracker.issue(number)
    assert seen is not None and (seen.title, seen.open) == ("[sweep] 2 cases regressed", True)
    other = github_server.state.repos["pytorch/pytorch"].add_issue("not the bot's")
    assert tracker.issue(other.number).title == "not the bot's"  # not listed: asked for
    assert tracker.issue(9999) is None


def test_a_failure_not_filed_yet_is_not_said_never_to_have_passed(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    dated_case(suite, "broke", "raise AssertionError('broke')")
    db = tmp_path / "history.sqlite3"
    for day in (1, 3):  # no --github-repo: the finding waits in the history
        sweep_suite(server, mirror, suite, day, db, cache_dir, None)
    capsys.readouterr()
    sweep_suite(server, mirror, suite, 4, db, cache_dir, None)
    out = capsys.readouterr().out
    assert "no open issue recorded: its filing is still pending" in out
    assert "it has not passed" not in out


def test_a_finding_github_refuses_for_good_is_set_aside_and_the_rest_filed(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """An issue deleted since it was filed: kept pending, its update failed first in every
    later run and nothing after it was ever filed (an audit saw "filed 0, pending 6" for
    good). And the issues are listed once a filing, not once a finding."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    repo = github_server.state.repos["pytorch/pytorch"]
    for number in range(3):  # issues of the bot's label the lookups must page through
        repo.add_issue(f"old {number}", "an older regression", labels=(LABELS[0],))
    tracker = sweep_cli.make_tracker("pytorch/pytorch")
    db = tmp_path / "history.sqlite3"
    sweep(server, mirror, 1, db, cache_dir, None)
    assert sweep(server, mirror, 4, db, cache_dir, tracker) == 0
    (filed,) = [issue for issue in repo.issues.values() if issue.author.endswith("[bot]")]
    lists = [line for line in github_server.log if line.startswith("GET") and
             line.split("?")[0].endswith("/issues")]
    assert len(lists) == 1, lists
    del repo.issues[filed.number]  # deleted by a maintainer
    assert sweep(server, mirror, 5, db, cache_dir, sweep_cli.make_tracker("pytorch/pytorch")) == 1
    err = capsys.readouterr().err
    assert "GitHub refused 1 finding(s) for good, set aside" in err and "HTTP 404" in err
    args = build_parser().parse_args(["sweep-merge", "--db", str(db), "--github-repo", "o/r"])
    assert sweep_cli.merge_main(args, lambda repo: FakeTracker()) == 0  # nothing left blocked
    # the gone issue is no longer followed: the fix seen next is said nowhere, not refused
    assert sweep(server, mirror, 6, db, cache_dir, sweep_cli.make_tracker("pytorch/pytorch")) == 0


def test_a_404_is_an_issue_gone_only_where_the_token_sees_the_repository(
    github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token that cannot see a private repository gets 404 for every issue: that stops
    the filing (all stays pending) instead of setting each finding aside for good."""
    from github import GithubException

    from bot.jobs.sweep_filer import Refused
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    seen = sweep_cli.make_tracker("pytorch/pytorch")
    assert seen is not None
    with pytest.raises(Refused) as gone:
        seen.update_issue(4242, "body")
    assert gone.value.gone == 4242
    unseen = sweep_cli.make_tracker("pytorch/private")
    assert unseen is not None
    with pytest.raises(GithubException) as stopped:
        unseen.comment(1, "body")
    assert not isinstance(stopped.value, Refused) and stopped.value.status == 404


def test_the_tracker_lists_the_issues_once_for_every_lookup(
    github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 labelled issues and 200 new failures made 2,300 requests (one listing a
    finding), over the 1,000 an hour a workflow token may make."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    repo = github_server.state.repos["pytorch/pytorch"]
    repo.add_issue("old", "<!-- key-a -->", labels=(LABELS[0],))
    tracker = sweep_cli.make_tracker("pytorch/pytorch")
    assert tracker is not None
    assert tracker.find_issue("key-a") is not None and tracker.find_issue("key-b") is None
    number = tracker.create_issue("new", "<!-- key-b -->", list(LABELS))
    assert tracker.find_issue("key-b") == number
    lists = [line for line in github_server.log if line.startswith("GET") and
             line.split("?")[0].endswith("/issues")]
    assert len(lists) == 1, lists


def test_an_issue_of_a_year_of_builds_stays_within_what_github_takes() -> None:
    """An ambiguous 365-build window made a 72,720-character body, which GitHub refuses."""
    from bot.core.report import GITHUB_COMMENT_LIMIT
    from bot.jobs.sweep_text import issue_body
    versions = [f"2.13.0.dev2026{day // 28 + 1:02d}{day % 28 + 1:02d}+cu130" for day in range(336)]
    detail = {"first_bad": versions[-1], "last_good": versions[0], "status": "ambiguous",
              "candidates": versions, "signature": "RuntimeError: boom " * 20,
              "probes": [{"version": v, "verdict": "skip", "reason": "exit 125: " + "x" * 100}
                         for v in versions], "path": "repro_suites/demo/x.py"}
    body = issue_body("demo/x", detail, versions[-1])
    assert len(body) < GITHUB_COMMENT_LIMIT
    assert "| … 276 more builds | | |" in body and "… 276 more" in body
    assert f"`{versions[0]}`" in body and f"`{versions[-1]}`" in body


@pytest.mark.parametrize(("count", "parts", "rows"), [
    (2, ("Rerun", "Builds", "markers"), 2), (300, ("Rerun", "Builds", "markers"), 60),
    (400, ("Builds", "markers"), 60), (500, ("markers",), 60), (600, ("markers",), 14),
    (1200, (), 60)])
def test_an_issue_of_many_cases_stays_within_what_github_takes(
    count: int, parts: tuple[str, ...], rows: int
) -> None:
    """What a body of hundreds of cases leaves out to stay within GitHub's limit: the
    reruns, then the builds table and output, then rows, and only when even that cannot
    hold every case's marker, the markers past what fits."""
    from bot.adapters.history import IssueCase
    from bot.core.report import GITHUB_COMMENT_LIMIT
    from bot.jobs.sweep_text import issue_text
    versions = [f"2.13.0.dev2026{day // 28 + 1:02d}{day % 28 + 1:02d}+cu130" for day in range(60)]
    cases = [IssueCase(f"inductor/case_{n:04d}", {
        "first_bad": versions[-1], "last_good": versions[-2], "signature": "RuntimeError: " * 30,
        "path": f"repro_suites/inductor/case_{n:04d}.py", "output_tail": "x" * 9000,
        "probes": [{"version": v, "verdict": "bad", "reason": "exit 1"} for v in versions]})
        for n in range(count)]
    title, body = issue_text(cases)
    assert len(body) < GITHUB_COMMENT_LIMIT and len(title) <= 256
    assert title.startswith(f"[sweep] {count} cases regressed in nightly {versions[-1]}")
    assert body.startswith(f"The scheduled sweep found that {count} cases started failing")
    assert f"still failing: {count} of the {count} cases" in body
    shown = [line for line in body.splitlines() if line.startswith("| `inductor/case_")]
    assert len(shown) == rows and len(set(shown)) == rows
    assert ("Rerun one locally:" in body) == ("Rerun" in parts)
    assert ("Builds tested by `inductor/case_0000`'s bisection:" in body) == ("Builds" in parts)
    markers = body.count("<!-- torch-bisect-bot:regression case=inductor/case_")
    assert (markers == count) == ("markers" in parts) and markers >= min(count, 500)
    assert ("| … " in body) == (count > rows)


def test_a_group_body_within_the_limit_whatever_its_cells_hold() -> None:
    """Escaping makes a cell longer than the text it was cut from (`<` is `&lt;`): 80 cases
    with such paths and signatures, each failing otherwise now, made a 79,948-character body."""
    from bot.adapters.history import IssueCase
    from bot.core.report import GITHUB_COMMENT_LIMIT
    from bot.jobs.sweep_text import issue_text
    cases = [IssueCase(f"s/<deep>|{n}" * 5, {
        "first_bad": "2.13.0.dev20260503+cpu", "last_good": "2.13.0.dev20260502+cpu",
        "signature": "E: <&>" * 100, "path": "<deep>/" * 40},
        seen_signature="F: <&>" * 100) for n in range(80)]
    _, body = issue_text(cases)
    assert len(body) < GITHUB_COMMENT_LIMIT
    row = next(line for line in body.splitlines() if line.startswith("| `s/"))
    assert row.count(" | ") == 2  # a `|` in a case id does not make another column


def test_cases_one_change_broke_check_its_two_nightlies_before_searching(
    tmp_path: Path, cache_dir: Path
) -> None:
    """One change that broke 200 stored cases made 200 searches of the same window (an
    audit: 800 runs); a case after the first checks the regression's two nightlies first."""
    mirror = build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 1), days=24, missing=(),
                          python_tags=(TAG,),
                          bug_for=lambda day: BUG if day >= dt.date(2026, 5, 15) else None)
    suite = tmp_path / "suite" / "broken"
    suite.mkdir(parents=True)
    text = (SUITE / "cumsum_compile.py").read_text()
    for name in ("first", "second"):
        (suite / f"{name}.py").write_text(text.replace("# A running sum", f"# {name}: a sum"))
    db = tmp_path / "history.sqlite3"
    with IndexServer(mirror.root) as served:
        for day in (1, 24):
            args = build_parser().parse_args([
                "sweep", str(suite.parent), "--index", served.variant_url(mirror.variant),
                "--nightly", mirror.version_on(dt.date(2026, 5, day)), "--db", str(db),
                "--cache-dir", str(cache_dir), "--no-default-packages"])
            args.handler(args)
    with History(db) as history:
        found = {f.case_id: f.detail for f in history.pending_findings()}
    first, second = found["broken/first"], found["broken/second"]
    bad = mirror.version_on(dt.date(2026, 5, 15))
    assert first["first_bad"] == second["first_bad"] == bad
    assert second["status"] == "found" and len(first["probes"]) > 3
    assert sorted(p["version"] for p in second["probes"]) == [
        mirror.version_on(dt.date(2026, 5, 14)), bad, mirror.version_on(dt.date(2026, 5, 24))]


def test_a_pruned_history_still_follows_its_regression(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """`sweep-merge --keep-days 0` forgets every run it can; the next sweeps still see the
    case fail as it did (its issue updated, not filed again) and then pass again."""
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 4):
        sweep(server, mirror, day, db, cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    with History(db) as history:
        runs = history.run_count()
    capsys.readouterr()
    time.sleep(1.1)  # times are kept to the second: the runs are older than "now" after this
    args = build_parser().parse_args(["sweep-merge", "--db", str(db), "--keep-days", "0"])
    assert sweep_cli.merge_main(args, lambda repo: tracker) == 0
    said = capsys.readouterr().out
    assert "forgot what was recorded over 0 day(s) ago: " in said and "the history is now" in said
    with History(db) as history:
        assert 0 < history.run_count() < runs
    sweep(server, mirror, 5, db, cache_dir, tracker)
    assert tracker.filed_by_bot() == [issue] and issue.edits == 1
    assert f"still failing as of nightly: `{version(mirror, 5)}`" in issue.body
    sweep(server, mirror, 6, db, cache_dir, tracker)
    assert f"appears fixed in nightly {version(mirror, 6)}" in issue.comments[0]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sweep-merge", "--keep-days", "-3"])
    assert "expected a number of days, 0 or more, got '-3'" in capsys.readouterr().err


def test_a_case_with_another_s_text_does_not_take_its_row(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """A reproducer copied into two suites: the second's runs are the first's results (the
    memo is keyed by the text), so the history had no run of it, and its still-failing took
    the first's issue row for a rename (the row, rerun and marker named the second twice).
    Its history is the first's (the same text), so it follows the first's issue."""
    suite = tmp_path / "suite"
    for sub in ("x", "y"):
        (suite / sub).mkdir(parents=True)
        shutil.copy(SUITE / "cumsum_compile.py", suite / sub / "cumsum_compile.py")
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 4, 5):
        assert sweep_suite(server, mirror, suite, day, db, cache_dir, tracker) == 0
    [issue] = tracker.filed_by_bot()
    assert issue.body.startswith("<!-- torch-bisect-bot:regression case=x/cumsum_compile ")
    assert "`x/cumsum_compile`" in issue.body and "y/cumsum_compile" not in issue.body
    with History(db) as history:  # each twin has a run of its own on the nightly
        assert {row["case_id"] for row in history._db.execute(
            "SELECT case_id FROM runs WHERE build_version = ?", (version(mirror, 5),))} == {
            "x/cumsum_compile", "y/cumsum_compile"}


def test_a_comment_on_a_locked_issue_is_refused_for_good(
    github_server: FakeGitHub, github_tracker: Any
) -> None:
    from bot.jobs.sweep_filer import Refused
    number = github_tracker.create_issue("[sweep] demo/x regressed", "body",
                                         ["torch-bisect-bot"])
    github_server.state.repos["pytorch/pytorch"].issues[number].locked = True
    with pytest.raises(Refused, match="HTTP 403: Unable to create comment because issue is") \
            as refused:
        github_tracker.comment(number, "fixed")
    assert refused.value.expected and refused.value.gone is None  # not the job's failure


def test_a_pass_of_a_case_an_open_issue_says_fails_is_its_fix(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """A history started over from an older one (or a case followed again from an issue's
    markers) has no failure of the case: its next pass was plain "passing", and the issue
    said for good that it failed."""
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (1, 4):
        sweep(server, mirror, day, db, cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    with History(db) as history:  # the failures it saw are gone; the issue is still open
        history._db.execute("DELETE FROM runs WHERE verdict = 'bad'")
    sweep(server, mirror, 7, db, cache_dir, tracker)
    assert [c for c in issue.comments if "appears fixed" in c] == [issue.comments[0]]
    assert f"appears fixed in nightly {version(mirror, 7)}: it passes there.\n" in \
        issue.comments[0]  # not "(it failed on <a nightly it passed on>)"


ESCAPING_CASE = '''# /// bisect-case
# timeout = 60
# ///
import sqlite3, urllib.request, torch
try:
    urllib.request.urlopen("{url}", timeout=5)
    print("NETWORK reached")
except Exception as exc:
    print(f"NETWORK refused: {{type(exc).__name__}}")
try:
    con = sqlite3.connect("{db}")
    con.execute("INSERT INTO findings VALUES ('forged', 'x', 'demo/forged', "
                "'2.13.0.dev20260503+cpu', 'fixed', '{{}}', NULL, '2026-05-03')")
    con.commit()
    print("HISTORY written")
except Exception as exc:
    print(f"HISTORY refused: {{type(exc).__name__}}")
'''


def test_a_stored_case_is_confined_as_a_bisection_s_reproducer_is(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """A case came from an issue: it used to run with the network and the host's files, so
    it could write a forged finding into the shard's history, which the collector files."""
    suite, db = tmp_path / "suite", tmp_path / "history" / "history.sqlite3"
    suite.mkdir()
    (suite / "escapes.py").write_text(ESCAPING_CASE.format(url=f"{server.url}escape-probe",
                                                           db=db))
    args = build_parser().parse_args([
        "sweep", str(suite), "--index", server.variant_url(mirror.variant), "--nightly",
        version(mirror, 2), "--db", str(db), "--cache-dir", str(cache_dir),
        "--no-default-packages"])
    assert args.handler(args) == 0
    with History(db) as history:
        [(output,)] = history._db.execute(
            "SELECT output_tail FROM runs WHERE case_id = 'suite/escapes'").fetchall()
        assert history._db.execute("SELECT * FROM findings WHERE uid = 'forged'").fetchall() == []
    assert "NETWORK refused: URLError" in output and "HISTORY refused: " in output
    assert not any("escape-probe" in path for path in server.requests)


def test_a_nightly_that_no_case_can_import_fails_the_sweep_and_is_not_blamed_on_the_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to be three 'untested' rows and a green CPU shard, and a CUDA shard that
    told the runner's owner to check the driver."""
    from bot.demo.mirror import PLATFORM
    from bot.demo.synthetic_torch import package_files
    from bot.demo.wheels import build_wheel

    broken = build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 1), days=3, missing=(),
                          python_tags=(TAG,), bug_for=lambda day: None)
    day3 = broken.version_on(dt.date(2026, 5, 3))
    for wheel in (broken.root / "cpu").glob("*.dev20260503*.whl"):
        wheel.unlink()
    files = {**package_files(day3, fake_git_version(dt.date(2026, 5, 3)), None),
             "torch/__init__.py": "raise ImportError('libtorch_cpu.so: undefined symbol: "
                                  "_ZN3c1017RegisterOperatorsD1Ev')\n"}
    build_wheel(broken.root / "cpu", "torch", day3, files, f"{TAG}-{TAG}-{PLATFORM}")
    with IndexServer(broken.root) as served:
        for kind in ("cpu", "cuda"):
            capsys.readouterr()
            code = sweep(served, broken, 3, tmp_path / f"{kind}.sqlite3", tmp_path / "cache",
                         None, "--kind", kind)
            said = capsys.readouterr()
            assert code == 1, said.err
            assert (f"bisect-bot: error: no case could be tested on nightly {day3}: each failed "
                    "to install or import it (") in said.err
            assert "undefined symbol" in said.err and "driver" not in said.err
            assert "| untested |" in said.out
        capsys.readouterr()
        assert sweep(served, broken, 2, tmp_path / "cpu.sqlite3", tmp_path / "cache", None,
                     "--kind", "cpu") == 0  # the day before is fine


def test_a_collect_job_run_again_says_a_fix_once(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """'Re-run failed jobs' runs the collect job again from the history this run started
    with, over the same exports: the fix it had commented on was commented again."""
    collector, tracker = tmp_path / "history.sqlite3", FakeTracker()
    History(collector).close()

    def night(day: int, attempts: int = 1) -> None:
        export, shard_db = tmp_path / f"day{day}.json", tmp_path / f"day{day}.sqlite3"
        shutil.copy(collector, shard_db)
        sweep(server, mirror, day, shard_db, cache_dir, None, "--export", str(export))
        started = tmp_path / f"history-in-{day}.sqlite3"
        shutil.copy(collector, started)  # this run's `history-in`
        for _ in range(attempts):
            shutil.copy(started, collector)
            args = build_parser().parse_args(["sweep-merge", str(export), "--db",
                                              str(collector), "--github-repo", "owner/repo"])
            assert sweep_cli.merge_main(args, lambda repo: tracker) == 0

    for day in (1, 4):
        night(day)
    [issue] = tracker.filed_by_bot()
    capsys.readouterr()
    night(6, attempts=2)
    assert [c for c in issue.comments if "appears fixed" in c] == issue.comments
    assert len(issue.comments) == 1 and f"appears fixed in nightly {version(mirror, 6)}" \
        in issue.comments[0]
    assert f"{CASE}: already said on #{issue.number}: appears fixed" in capsys.readouterr().out


def test_an_untestable_nightly_between_the_ends_is_not_said_to_be_unpublished(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "gap.py").write_text(
        "# /// bisect-case\n# timeout = 30\n# ///\nimport sys, torch\n"
        "day = int(torch.__version__.split('.dev')[1][:8])\n"
        "if day == 20260504:\n    sys.exit(125)\n"
        "if day >= 20260505:\n    raise RuntimeError('broke')\nprint('ok')\n")
    tracker, db = FakeTracker(), tmp_path / "history.sqlite3"
    for day in (3, 5):
        args = build_parser().parse_args([
            "sweep", str(suite), "--index", server.variant_url(mirror.variant), "--nightly",
            version(mirror, day), "--db", str(db), "--cache-dir", str(cache_dir),
            "--no-default-packages", "--github-repo", "owner/repo"])
        sweep_cli.sweep_main(args, lambda repo: tracker)
    [issue] = tracker.filed_by_bot()
    assert f"`{version(mirror, 4)}`" in issue.body  # a candidate, published
    assert "no nightly was published" not in issue.body


def test_a_history_started_over_still_tells_the_open_issue_of_its_fix(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """The workflow starts a new history when the last one's artifact expired or did not
    download; the issue its marker names was never told the fix."""
    tracker = FakeTracker()
    for day in (1, 4):
        sweep(server, mirror, day, tmp_path / "lost.sqlite3", cache_dir, tracker)
    [issue] = tracker.filed_by_bot()
    started_over = tmp_path / "started-over.sqlite3"
    for day in (5, 6):  # fails on its first nightly there (filed before), then the fix
        sweep(server, mirror, day, started_over, cache_dir, tracker)
    [comment] = issue.comments
    assert f"`{CASE}` appears fixed in nightly {version(mirror, 6)}" in comment
    sweep(server, mirror, 7, started_over, cache_dir, tracker)
    assert len(issue.comments) == 1 and len(tracker.issues) == 1


def test_a_sweep_s_bisection_keeps_each_probe_s_output_as_a_run_s_is_kept(
    server: IndexServer, mirror: Mirror, cache_dir: Path, tmp_path: Path
) -> None:
    """The checkpoint kept every probe's whole capture (up to 64 KiB): a verbose case's
    bisection was 280 KB in the history and in every shard's export."""
    import json
    import sqlite3

    from bot.adapters.history import GOOD_OUTPUT_TAIL, OUTPUT_TAIL

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "verbose.py").write_text(
        "# /// bisect-case\n# timeout = 30\n# ///\nimport torch\n"
        "day = int(torch.__version__.split('.dev')[1][:8])\n"
        "print('x' * 200_000)\n"
        "if day >= 20260503:\n    raise RuntimeError('broke')\n")
    db = tmp_path / "history.sqlite3"
    for day in (1, 6):
        args = build_parser().parse_args([
            "sweep", str(suite), "--index", server.variant_url(mirror.variant), "--nightly",
            version(mirror, day), "--db", str(db), "--cache-dir", str(cache_dir),
            "--no-default-packages", "--export", str(tmp_path / f"export-{day}.json")])
        assert args.handler(args) == 0
    [(state,)] = sqlite3.connect(db).execute("SELECT state FROM bisections").fetchall()
    probes = json.loads(state)["probe_records"]
    assert len(probes) >= 2 and {p["verdict"] for p in probes} >= {"good", "bad"}
    for probe in probes:
        keep = GOOD_OUTPUT_TAIL if probe["verdict"] == "good" else OUTPUT_TAIL
        assert len(probe["result"]["output"]) <= keep
    assert any("RuntimeError: broke" in p["result"]["output"] for p in probes)
    assert (tmp_path / "export-6.json").stat().st_size < 60_000
