"""Sweeps day by day over a local nightly mirror with a regression planted and later fixed."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.history import History
from bot.demo.index_server import IndexServer
from bot.demo.mirror import Mirror, build_mirror
from bot.jobs import sweep_cli
from bot.jobs.cli import build_parser
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
