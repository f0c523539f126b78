"""A release owner's week of sweeps on one box: a sweep stopped in the middle of a bisection,
and the arguments a person types wrong."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.demo.index_server import Fault, IndexServer
from bot.demo.mirror import Mirror, build_mirror
from bot.jobs import sweep_cli
from bot.jobs.cli import build_parser, main
from tests.fakes.tracker import FakeTracker

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
BOT = Path(sys.executable).with_name("bisect-bot")
BLOCK = "# /// bisect-case\n# timeout = 30\n# ///\n"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Mirror:
    return build_mirror(tmp_path_factory.mktemp("mirror"), start=dt.date(2026, 5, 1), days=7,
                        missing=(), python_tags=(TAG,), bug_for=lambda _: None)


@pytest.fixture(scope="module")
def server(mirror: Mirror) -> Iterator[IndexServer]:
    with IndexServer(mirror.root) as running:
        yield running


def version(mirror: Mirror, day: int) -> str:
    return mirror.version_on(dt.date(2026, 5, day))


def sweep_args(server: IndexServer, mirror: Mirror, suite: Path, day: int, db: Path,
               cache: Path, *extra: str) -> list[str]:
    return ["sweep", str(suite), "--index", server.variant_url(mirror.variant), "--nightly",
            version(mirror, day), "--db", str(db), "--cache-dir", str(cache),
            "--no-default-packages", *extra]


def _slow_case(tmp_path: Path, name: str, broken_from: int, sleep: int) -> tuple[Path, Path]:
    """A suite of one case that fails from the mirror's day `broken_from` on, and sleeps
    `sleep` s on the days before it (but the first) while the flag file exists: (the flag,
    the suite)."""
    slow = tmp_path / "slow"
    slow.touch()
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / f"{name}.py").write_text(
        "# /// bisect-case\n# timeout = 120\n# ///\nimport os, time\nimport torch\n\n"
        "day = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
        f"if 1 < day < {broken_from} and os.path.exists({str(slow)!r}):\n"
        f"    time.sleep({sleep})\n"
        f"if day >= {broken_from}:\n    raise RuntimeError('{name} broke')\nprint('ok')\n")
    return slow, suite


def test_a_sweep_stopped_while_it_bisects_bisects_and_files_on_the_next_night(
    server: IndexServer, mirror: Mirror, tmp_path: Path
) -> None:
    """Ctrl-C (or the runner's SIGTERM) during a new failure's bisection: the case's failing
    run on the nightly was already in the history, so the next night compared with it, called
    the case `still-failing` and never bisected or filed the regression."""
    # While `slow` exists, the builds before the 4th take their time.
    slow, suite = _slow_case(tmp_path, "stopped", broken_from=4, sleep=100)
    db, cache = tmp_path / "history.sqlite3", tmp_path / "cache"
    unconfined = ("--sandbox", "none")  # the case sees the flag file in /tmp
    tracker = FakeTracker()
    parsed = build_parser().parse_args(sweep_args(server, mirror, suite, 1, db, cache,
                                                  *unconfined))
    assert sweep_cli.sweep_main(parsed, lambda repo: None) == 0

    night = subprocess.Popen([str(BOT), *sweep_args(server, mirror, suite, 5, db, cache,
                                                     *unconfined)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert night.stderr is not None
    for line in night.stderr:  # the bisection's second probe: an older build
        if line.startswith("[probe 2"):
            break
    night.send_signal(signal.SIGTERM)
    night.communicate(timeout=60)
    assert night.returncode == 130
    slow.unlink()

    _files_next_night(server, mirror, suite, 6, db, cache, unconfined, tracker, 4)


def _files_next_night(server, mirror, suite, day, db, cache, unconfined, tracker,
                      first_bad: int) -> None:
    """The next night's sweep, once the stopped bisection's cause is gone: it bisects the
    case and files its one issue, naming the planted first bad nightly."""
    parsed = build_parser().parse_args(sweep_args(server, mirror, suite, day, db, cache,
                                                  *unconfined, "--github-repo", "o/r"))
    assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    [issue] = tracker.filed_by_bot()
    assert f"first_bad={version(mirror, first_bad)}" in issue.body


def test_an_export_path_that_is_a_folder_is_said_before_the_sweep(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--export exports/` (a folder, as `sweep-merge exports/*.json` reads them) ended in a
    traceback (IsADirectoryError) and left a stray `.exports.partial` beside it."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "plain.py").write_text(BLOCK + "import torch\nprint('ok')\n")
    folder = tmp_path / "exports"
    folder.mkdir()
    code = main(sweep_args(server, mirror, suite, 1, tmp_path / "h.sqlite3",
                           tmp_path / "cache", "--export", str(folder)))
    assert code == 2
    assert f"--export {folder}: a folder" in capsys.readouterr().err
    assert not (tmp_path / ".exports.partial").exists()
    # and one that cannot be written is said as such, at the sweep's start
    code = main(sweep_args(server, mirror, suite, 1, tmp_path / "h.sqlite3",
                           tmp_path / "cache", "--export", "/proc/export.json"))
    assert code == 2
    assert "--export /proc/export.json: cannot write it" in capsys.readouterr().err


def _sweep_nights(server: IndexServer, mirror: Mirror, tmp_path: Path, name: str,
                  failing: str, days: tuple[int, ...]) -> FakeTracker:
    """A case that fails on the mirror's days where `failing` (of `day`) holds, swept on
    `days` in that order with filing on: the tracker that holds its issue."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / f"{name}.py").write_text(
        BLOCK + "import torch\n\nday = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
        f"if {failing}:\n    raise RuntimeError('{name} broke')\nprint('ok')\n")
    db, cache, tracker = tmp_path / "history.sqlite3", tmp_path / "cache", FakeTracker()
    for day in days:
        parsed = build_parser().parse_args(sweep_args(server, mirror, suite, day, db, cache,
                                                      "--github-repo", "o/r"))
        assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    return tracker


def test_an_older_nightly_swept_late_is_not_said_swept_before(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 4th, never swept, swept by hand after the 5th filed the regression it starts: its
    row said "found failing by an earlier sweep of this nightly", which none was."""
    tracker = _sweep_nights(server, mirror, tmp_path, "late", "day >= 4", (3, 5, 4))
    [issue] = tracker.filed_by_bot()
    [row] = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("| `suite/late` | bad | good") and "still-failing" in line]
    assert "earlier sweep of this nightly" not in row
    assert f"its issue saw it failing on a later nightly, {version(mirror, 5)}" in row


@pytest.mark.parametrize("repo", ["pytorch", "pytorch/pytorch/issues", "https://github.com/o/r"])
def test_a_github_repo_not_owner_slash_name_is_refused_at_once(
    repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--github-repo pytorch` was taken: the sweep ran, and its filing failed on GitHub's
    answer to a path that is no repository (a 404 said to be a token without `issues: write`)."""
    with pytest.raises(SystemExit) as exited:
        main(["sweep-merge", "--db", str(tmp_path / "h.sqlite3"), "--github-repo", repo])
    assert exited.value.code == 2
    assert f"expected OWNER/NAME, e.g. pytorch/pytorch, got {repo!r}" in capsys.readouterr().err


def test_a_failing_nightly_older_than_its_issue_s_fix_names_that_issue(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 5th, swept by hand after the 6th was seen to fix the case's issue: its row said
    "no open issue recorded: its filing is still pending ..., or the issue was closed" of an
    issue filed, open, and commented fixed."""
    tracker = _sweep_nights(server, mirror, tmp_path, "mended", "3 <= day < 6", (2, 4, 6, 5))
    [issue] = tracker.filed_by_bot()
    [row] = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("| `suite/mended` | bad | bad")]
    assert "no open issue recorded" not in row
    shown = row.replace("\u200d", "")  # the job summary keeps `#1` from linking
    assert (f"issue #{issue.number} saw it fixed in a later nightly, {version(mirror, 6)}"
            in shown)


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--workers", "0", "--workers must be at least 1"),
    ("--cache-budget-gb", "-1", "--cache-budget-gb must be positive"),
])
def test_a_sweep_refuses_what_bisect_refuses_before_it_runs_a_case(
    flag: str, value: str, said: str, server: IndexServer, mirror: Mirror, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """`--workers 0` was taken: the sweep ran its cases, then the first new failure's
    bisection ended it in a traceback (ThreadPoolExecutor: max_workers must be greater
    than 0)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "plain.py").write_text(BLOCK + "import torch\nprint('ok')\n")
    code = main(sweep_args(server, mirror, suite, 1, tmp_path / "h.sqlite3",
                           tmp_path / "cache", flag, value))
    assert code == 2
    captured = capsys.readouterr()
    assert said in captured.err and "sweeping" not in captured.out


def test_a_nightly_that_does_not_install_fails_the_sweep_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wheel cut short on the index: every case is untested, the sweep fails naming the
    nightly, and the count says no reproducer ran (it said "2 reproducer run(s) made")."""
    broken = build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 1), days=2, missing=(),
                          python_tags=(TAG,), bug_for=lambda _: None)
    [wheel] = (broken.root / broken.variant).glob("torch-*20260502*.whl")
    wheel.write_bytes(wheel.read_bytes()[:300])
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("one", "two"):
        (suite / f"{name}.py").write_text(BLOCK + "import torch\nprint('ok')\n")
    with IndexServer(broken.root) as served:
        code = main(sweep_args(served, broken, suite, 2, tmp_path / "h.sqlite3",
                               tmp_path / "cache"))
    captured = capsys.readouterr()
    assert code == 1
    assert (f"no case could be tested on nightly {version(broken, 2)}: each failed to install "
            "or import it") in captured.err
    assert "| `suite/one` | skip | - | untested | install failed:" in captured.out
    assert ("0 reproducer run(s) made, 0 result(s) taken from the history, 2 probe(s) of a "
            "build that did not install or import") in captured.out


def test_a_history_path_that_is_a_folder_is_not_called_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--db history/` (the folder the artifact downloads into) was said to be "damaged: move
    it away ... and a fresh history starts": advice to throw the history away."""
    folder = tmp_path / "history"
    folder.mkdir()
    assert main(["sweep-merge", "--db", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "damaged" not in err
    assert f"history database {folder}: a folder; give the file, e.g. " in err


def test_a_bisection_that_hangs_stops_at_the_deadline_and_is_bisected_again(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--deadline-minutes` was checked only between cases: a new failure whose older builds
    hang bisected on past it (a week of 600 s timeouts, ~50 minutes), and the job was killed
    at its time limit, uploading nothing. Stopped at the deadline, the case is said unfinished
    (row, export, exit status) and the next night bisects and files it."""
    # While `slow` exists, the builds before the 5th hang.
    slow, suite = _slow_case(tmp_path, "hangs", broken_from=5, sleep=40)
    db, cache, tracker = tmp_path / "history.sqlite3", tmp_path / "cache", FakeTracker()
    export = tmp_path / "export.json"
    unconfined = ("--sandbox", "none")  # the case sees the flag file in /tmp
    parsed = build_parser().parse_args(sweep_args(server, mirror, suite, 1, db, cache,
                                                  *unconfined))
    assert sweep_cli.sweep_main(parsed, lambda repo: None) == 0
    capsys.readouterr()

    parsed = build_parser().parse_args(sweep_args(
        server, mirror, suite, 6, db, cache, *unconfined, "--deadline-minutes", "0.25",
        "--export", str(export), "--github-repo", "o/r"))
    assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 1
    captured = capsys.readouterr()
    [row] = [line for line in captured.out.splitlines() if line.startswith("| `suite/hangs`")]
    assert "| bad | good" in row and "bisection unfinished: the sweep's deadline passed" in row
    assert "| unfinished |" in row and "new-failure" not in captured.out  # not a new failure
    assert ("1 case(s): 1 unfinished (bisection stopped before its answer; not filed yet)"
            in captured.out)
    assert "1 case(s) whose bisection the deadline stopped" in captured.err
    exported = json.loads(export.read_text())
    [bisection] = exported["bisections"]
    assert bisection["status"] == "unfinished"
    assert not tracker.filed_by_bot()

    slow.unlink()
    _files_next_night(server, mirror, suite, 7, db, cache, unconfined, tracker, 5)


def test_a_case_checking_a_regression_found_before_stops_at_the_deadline(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case after the first that one change broke checks the regression's two nightlies
    before searching, and those runs had no deadline: a case that hangs there ran each to
    its timeout (600 s by default), past the sweep's deadline and into the job's limit,
    which kills the sweep before it writes its export. They stop at the deadline now, and
    the bisection is unfinished, as one the deadline stopped in its search is."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, hang in (("a_first", ""), ("b_hangs", "if 1 < day < 5:\n    time.sleep(100)\n")):
        (suite / f"{name}.py").write_text(
            "# /// bisect-case\n# timeout = 60\n# ///\nimport time\nimport torch\n\n"
            f"day = int(torch.__version__.split('.dev')[1][:8]) % 100\n{hang}"
            f"if day >= 4:\n    raise RuntimeError('{name} broke')\nprint('ok')\n")
    db, cache, export = tmp_path / "history.sqlite3", tmp_path / "cache", tmp_path / "e.json"
    parsed = build_parser().parse_args(sweep_args(server, mirror, suite, 1, db, cache))
    assert sweep_cli.sweep_main(parsed, lambda repo: None) == 0
    capsys.readouterr()

    parsed = build_parser().parse_args(sweep_args(
        server, mirror, suite, 6, db, cache, "--deadline-minutes", "0.25",
        "--export", str(export)))
    started = time.monotonic()
    assert sweep_cli.sweep_main(parsed, lambda repo: None) == 1
    took = time.monotonic() - started
    captured = capsys.readouterr()
    assert took < 40, f"the sweep took {took:.0f} s: its deadline was 15 s"
    [first] = [line for line in captured.out.splitlines() if line.startswith("| `suite/a_")]
    assert f"first bad nightly {version(mirror, 4)}" in first  # the regression found before
    [row] = [line for line in captured.out.splitlines() if line.startswith("| `suite/b_")]
    assert "| bad | good" in row and "| unfinished |" in row
    assert "bisection unfinished: the sweep's deadline passed after 1 of 6 builds" in row
    assert "1 case(s) whose bisection the deadline stopped (suite/b_hangs)" in captured.err
    [bisection] = [b for b in json.loads(export.read_text())["bisections"]
                   if b["case_id"] == "suite/b_hangs"]
    assert bisection["status"] == "unfinished"


def test_an_issue_closed_while_its_case_fails_is_left_closed_and_untouched(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A maintainer closed the case's issue while it still failed (won't fix, not a bug): its
    body was rewritten every night ("still failing as of nightly ..."), though the docs say
    the sweep updates the *open* issue(s). It stays closed and untouched, the log says so, and
    no duplicate is filed."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "wontfix.py").write_text(
        BLOCK + "import torch\n\nday = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
        "if day >= 3:\n    raise RuntimeError('wontfix broke')\nprint('ok')\n")
    db, cache, tracker = tmp_path / "history.sqlite3", tmp_path / "cache", FakeTracker()
    for day in (2, 3):
        parsed = build_parser().parse_args(sweep_args(server, mirror, suite, day, db, cache,
                                                      "--github-repo", "o/r"))
        assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    [issue] = tracker.filed_by_bot()
    issue.open, body, edits = False, issue.body, issue.edits
    capsys.readouterr()
    for day in (4, 5):
        parsed = build_parser().parse_args(sweep_args(server, mirror, suite, day, db, cache,
                                                      "--github-repo", "o/r"))
        assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    assert [i.number for i in tracker.filed_by_bot()] == [issue.number]
    assert (issue.body, issue.edits, issue.open, issue.comments) == (body, edits, False, [])
    out = capsys.readouterr().out
    assert (f"issue #{issue.number} was closed on GitHub while the case still fails (in "
            f"{version(mirror, 5)}): left closed and untouched") in out


def test_a_case_removed_from_an_issue_of_several_is_not_counted_still_failing(
    server: IndexServer, mirror: Mirror, tmp_path: Path
) -> None:
    """After the collect job's "no longer in the suite" comment, the issue's row of the removed
    case still said "still failing in <its last nightly>" and it was counted in "still failing:
    2 of the 2 cases"; the comment said "what this issue says of them ... their last sweep" of
    the one case."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("kept", "gone"):
        (suite / f"{name}.py").write_text(
            BLOCK + "import torch\n\nday = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
            f"if day >= 3:\n    raise RuntimeError('{name} broke')\nprint('ok')\n")
    db, cache, tracker = tmp_path / "history.sqlite3", tmp_path / "cache", FakeTracker()
    for day in (2, 3, 4):
        if day == 4:
            (suite / "gone.py").unlink()
        parsed = build_parser().parse_args(sweep_args(server, mirror, suite, day, db, cache,
                                                      "--github-repo", "o/r"))
        assert sweep_cli.sweep_main(parsed, lambda repo: tracker) == 0
    parsed = build_parser().parse_args(["sweep-merge", "--db", str(db), "--suite", str(suite),
                                        "--github-repo", "o/r"])
    assert sweep_cli.merge_main(parsed, lambda repo: tracker) == 0
    [issue] = tracker.filed_by_bot()
    [row] = [line for line in issue.body.splitlines() if line.startswith("| `suite/gone`")]
    assert "still failing" not in row
    assert f"no longer in the suite (the sweeps of nightly `{version(mirror, 4)}`" in row
    assert "- still failing: 1 of the 2 cases (1 no longer in the suite)" in issue.body
    [comment] = issue.comments
    assert ("`suite/gone`: it is no longer in the suite, so what this issue says of it is as "
            "of its last sweep") in comment


def test_an_index_that_stops_answering_stops_the_sweep_and_records_nothing_of_the_nightly(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index listed the nightly, then stopped answering before its wheel came: each case
    was SKIP "could not be installed", stored as the nightly's result, and the sweep said
    "the nightly itself is broken here". It stops, names the index and the cases it did not
    run, records no result of that nightly, and the next sweep runs them."""
    import threading

    from bot.adapters.history import History

    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a", "b"):
        (suite / f"{name}.py").write_text(BLOCK + f"import torch\nprint('{name} ok')\n")
    db, cache, export = tmp_path / "history.sqlite3", tmp_path / "cache", tmp_path / "e.json"
    server = IndexServer(mirror.root).start()
    port = server._server.server_address[1]  # type: ignore[union-attr]
    url, nightly = server.variant_url(mirror.variant), version(mirror, 2)
    assert main(sweep_args(server, mirror, suite, 1, db, cache)) == 0

    def stop_at_the_first_wheel() -> None:  # the build list is read; the wheel never comes
        while not any(path.endswith(".whl") for path in server.requests):
            time.sleep(0.01)
        server.stop()

    server.requests.clear()
    server.faults.append(Fault(".whl", status=503, delay_s=1.0, times=10**6))
    watcher = threading.Thread(target=stop_at_the_first_wheel)
    watcher.start()
    capsys.readouterr()
    code = main(sweep_args(server, mirror, suite, 2, db, cache, "--export", str(export)))
    watcher.join()
    said = capsys.readouterr()
    assert code == 1, said.err
    assert f"the index {url} did not answer" in said.err
    assert ("The sweep stopped before finishing: 0 of 2 case(s) done, 2 not (suite/a, "
            f"suite/b), with no result of nightly {nightly} recorded for them") in said.err
    assert "nightly itself is broken" not in said.err and "Traceback" not in said.err
    assert "| `suite/a` | skip | - | untested | not finished: the index did not answer while it ran" in said.out
    assert _runs_of(db, nightly) == [] and json.loads(export.read_text())["runs"] == []
    with History(db) as history:
        assert history.pending_findings() == []

    with IndexServer(mirror.root, port=port) as back:  # the next night, the index answers
        assert main(sweep_args(back, mirror, suite, 2, db, cache)) == 0
    assert _runs_of(db, nightly) == [("suite/a", "good"), ("suite/b", "good")]


def _runs_of(db: Path, nightly: str) -> list[tuple[str, str]]:
    """(case, verdict) of each run of `nightly` the history holds."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        return sorted(conn.execute("SELECT case_id, verdict FROM runs WHERE build_version = ?",
                                   (nightly,)).fetchall())


def test_a_sweep_s_lines_name_the_case_and_number_only_its_bisection_s_probes(
    server: IndexServer, mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case's one run on the nightly said "[probe 1/~4]", as if a bisection of the
    week were starting, and a bisection numbered its builds on from the earlier cases'."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a_fine.py").write_text(BLOCK + "import torch\nprint('ok')\n")
    (suite / "b_broke.py").write_text(
        BLOCK + "import torch\n\nday = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
        "if day >= 4:\n    raise RuntimeError('broke')\nprint('ok')\n")
    db, cache = tmp_path / "history.sqlite3", tmp_path / "cache"
    assert main(sweep_args(server, mirror, suite, 1, db, cache)) == 0
    capsys.readouterr()
    assert main(sweep_args(server, mirror, suite, 6, db, cache)) == 0
    lines = capsys.readouterr().err.splitlines()
    nightly = version(mirror, 6)
    assert f"[suite/a_fine] {nightly}: running" in lines
    assert f"[suite/b_broke] {nightly}: running" in lines
    assert not [line for line in lines if line.startswith("[probe 1/")], lines
    start = lines.index(f"suite/b_broke: bisecting 6 builds ({version(mirror, 1)} .. {nightly})")
    # The nightly, its bad end, is its first probe; the builds it runs are numbered on.
    assert lines[start + 1].startswith(f"[probe 1] {nightly}: BAD"), lines[start:]
    assert lines[start + 2].startswith("[probe 2/~4] "), lines[start:]


def _index_gone_while_bisecting(mirror: Mirror, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str], *extra: str
                                ) -> tuple[int, pytest.CaptureResult[str], Path, str,
                                           IndexServer, Path]:
    """A case that passes on the 1st and fails from the 4th, swept on the 1st and then on the
    6th, where the index stops answering once the new failure's bisection fetches an older
    build: (the second sweep's exit status, what it said, the history, the index's URL, the
    index to start again at that URL, the suite)."""
    import threading

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "broke.py").write_text(
        BLOCK + "import torch\n\nday = int(torch.__version__.split('.dev')[1][:8]) % 100\n"
        "if day >= 4:\n    raise RuntimeError('broke')\nprint('ok')\n")
    db, cache = tmp_path / "history.sqlite3", tmp_path / "cache"
    server = IndexServer(mirror.root).start()
    port = server._server.server_address[1]  # type: ignore[union-attr]
    url = server.variant_url(mirror.variant)
    assert main(sweep_args(server, mirror, suite, 1, db, cache)) == 0
    older = [version(mirror, day).split("+")[0] for day in range(2, 6)]

    def stop_at_an_older_wheel() -> None:  # the nightly came; the builds to search do not
        while not any(path.endswith(".whl") and any(v in path for v in older)
                      for path in server.requests):
            time.sleep(0.01)
        server.stop()

    server.faults += [Fault(v, status=503, delay_s=1.0, times=10**6) for v in older]
    watcher = threading.Thread(target=stop_at_an_older_wheel)
    watcher.start()
    capsys.readouterr()
    code = main([*sweep_args(server, mirror, suite, 6, db, cache), *extra])
    watcher.join()
    return code, capsys.readouterr(), db, url, IndexServer(mirror.root, port=port), suite


def test_an_index_gone_while_the_sweep_bisects_leaves_the_case_to_bisect_the_next_night(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index stopped answering while a new failure's bisection fetched an older build:
    each build left was SKIP, and the search ended on a false answer (filed) with the
    nightly's failure stored, so the next night said `still-failing`. The sweep stops with
    nothing of the nightly stored for the case; the next night bisects it and finds where
    it broke."""
    from bot.adapters.history import History

    code, said, db, url, back, suite = _index_gone_while_bisecting(mirror, tmp_path, capsys)
    nightly = version(mirror, 6)
    assert code == 1, said.err
    assert f"the index {url} did not answer" in said.err and "Traceback" not in said.err
    assert "The sweep stopped before finishing: 0 of 1 case(s) done, 1 not (suite/broke)" \
        in said.err
    assert _runs_of(db, nightly) == []
    with History(db) as history:
        assert history.pending_findings() == []

    with back:  # the next night, the index answers
        assert main(sweep_args(back, mirror, suite, 6, db, tmp_path / "cache")) == 0
    assert _runs_of(db, nightly) == [("suite/broke", "bad")]
    with History(db) as history:
        [finding] = history.pending_findings()
    assert (finding.transition, finding.detail["first_bad"]) == ("new-failure",
                                                                 version(mirror, 4))


def test_a_bisection_the_index_stopped_is_saved_unfinished_not_running(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its checkpoint stayed `running`, in the history and the export, as if a process still
    bisected it, and every prune kept it for ever (a deadline's stop is `unfinished`)."""
    from bot.adapters.history import History

    export = tmp_path / "export.json"
    code, said, db, _, _, _ = _index_gone_while_bisecting(mirror, tmp_path, capsys,
                                                          "--export", str(export))
    assert code == 1, said.err
    [exported] = json.loads(export.read_text())["bisections"]
    assert exported["status"] == "unfinished"
    with History(db, now=lambda: "2099-01-01T00:00:00+00:00") as history:
        assert history.prune(keep_days=30)["bisections"] == 1


def test_the_runs_made_for_the_case_an_outage_stopped_are_counted(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The two runs of the nightly made for the case going when the index stopped (its
    failure, and that failure run again) were left out: "0 reproducer run(s) made"."""
    code, said, _, _, _, _ = _index_gone_while_bisecting(mirror, tmp_path, capsys)
    assert code == 1, said.err
    assert "2 reproducer run(s) made, 0 result(s) taken from the history" in said.out
