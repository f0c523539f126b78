"""What keeps a sweep's filing to its own issues and its own history: one filing of a history at
a time (real processes on one file), and only the bot's own issues written to or commented on,
against the fake GitHub through the real client."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.history import History
from bot.jobs.cli import main
from bot.jobs.sweep_text import LABELS
from tests.fakes.github_server import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = "2.13.0.dev20260504+cpu"
WINDOW = {"last_good": "2.13.0.dev20260503+cpu", "first_bad": NIGHTLY}


def _pending_new_failures(db: Path, cases: list[str]) -> None:
    """What a sweep with no --github-repo leaves: new failures of one window, to be filed."""
    with History(db) as history:
        sweep = history.start_sweep(NIGHTLY, "1/1")
        for case_id in cases:
            history.add_finding(sweep, case_id, NIGHTLY, "new-failure",
                                {**WINDOW, "signature": f"RuntimeError: {case_id} broke",
                                 "path": f"{case_id}.py", "script_hash": case_id})
        history.finish_sweep(sweep)


def _bot_issues(repo: Any) -> list[Any]:
    return [issue for issue in repo.issues.values() if issue.author.endswith("[bot]")]


def test_two_filings_of_one_history_at_once_file_each_regression_once(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any
) -> None:
    """Two `sweep-merge` processes on one history (a box's CPU and CUDA cron sweeps ending
    together) each filed every finding: the first case twice, in two issues."""
    db = tmp_path / "history.sqlite3"
    cases = ["s/c0", "s/c1", "s/c2"]
    _pending_new_failures(db, cases)
    serve = github_server.handle

    def slow_listing(method: str, target: str, headers: dict[str, str], raw: bytes) -> Any:
        if method == "GET" and "/issues?" in target:  # both list before either files
            time.sleep(2)
        return serve(method, target, headers, raw)

    github_server.handle = slow_listing  # type: ignore[method-assign]
    env = {**os.environ, "GITHUB_TOKEN": "test-token", "GITHUB_API_URL": github_server.url}
    env.pop("GITHUB_STEP_SUMMARY", None)
    command = [sys.executable, "-m", "bot.jobs.cli", "sweep-merge", "--db", str(db),
               "--github-repo", "pytorch/pytorch"]
    filings = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    said = [filing.communicate(timeout=120)[0] for filing in filings]
    assert [filing.returncode for filing in filings] == [0, 0], said
    issues = _bot_issues(github_repo)
    assert len(issues) == 1, [issue.title for issue in issues]
    (issue,) = issues
    for case_id in cases:
        assert issue.body.count(f"case={case_id} ") == 1, case_id
    assert issue.comments == []  # every case was filed by the one filing that created it
    assert any("waiting for another filing" in text for text in said), said
    with History(db) as history:
        assert history.pending_findings() == [] and not history.owes_github()


def _collect(github_server: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The collect job's settings: its token, the API, a job summary to read."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return summary


def test_a_history_naming_issues_the_bot_did_not_file_leaves_them_untouched(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `bisect-history` artifact another workflow uploaded (a fork's pull request) named any
    issue by number: the collect job (issues: write) rewrote a maintainers' issue with the
    history's text and commented on another."""
    summary = _collect(github_server, monkeypatch, tmp_path)
    victim = github_repo.add_issue("Security: CVE triage notes", "original maintainers' text")
    other = github_repo.add_issue("Unrelated feature request", "body")
    marker = "<!-- torch-bisect-bot:regression case=x/z first_bad=2.13.0.dev20260504+cpu -->"
    # a person's issue with the bot's label (a triager's) and a pasted marker: not the bot's
    forged = github_repo.add_issue("Looks like the bot's", f"{marker}\nmine", author="mallory",
                                   labels=LABELS)
    db = tmp_path / "history.sqlite3"
    with History(db) as history:
        for number, case_id in ((victim.number, "x/y"), (forged.number, "x/z")):
            history.remember_issue(f"k{number}", case_id, number, NIGHTLY,
                                   {"first_bad": NIGHTLY, "last_good": None,
                                    "path": "[click here](https://evil.example)",
                                    "signature": "pwned"})
            history.mark_stale(number, retitle=True)
        history.add_notice(other.number, "x/y", "fixed", NIGHTLY)
        history.add_notice(victim.number, "x/y", "joined", NIGHTLY)
    code = main(["sweep-merge", "--db", str(db), "--github-repo", "pytorch/pytorch"])
    assert (victim.title, victim.body) == ("Security: CVE triage notes",
                                           "original maintainers' text")
    assert (forged.title, forged.body) == ("Looks like the bot's", f"{marker}\nmine")
    assert victim.comments == other.comments == forged.comments == []
    assert code == 1 and "Traceback" not in capsys.readouterr().err
    text = summary.read_text()
    assert "3 issue(s) the history names are not the bot's own: left untouched" in text
    for number in (victim.number, forged.number):
        assert f"- issue #{number}: not an issue the bot filed" in text
    assert f"- the comment on #{other.number}: not an issue the bot filed, and no suite" in text
    with History(db) as history:  # none of it is owed any more: the next night is quiet
        assert not history.owes_github()
    assert main(["sweep-merge", "--db", str(db), "--github-repo", "pytorch/pytorch"]) == 0


def test_a_fix_is_said_on_an_issue_a_case_of_the_suite_links_and_on_no_other(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person's issue gets the bot's comment only as the linked issue of a case that the
    suite given to sweep-merge holds (a fixed case's `issue`)."""
    summary = _collect(github_server, monkeypatch, tmp_path)
    linked = github_repo.add_issue("compiled running sum is off", "reported by a user")
    unlinked = github_repo.add_issue("another person's issue", "body")
    suite = tmp_path / "suite" / "s"
    suite.mkdir(parents=True)
    (suite / "a.py").write_text(f"# /// bisect-case\n# issue = {linked.number}\n# ///\n"
                                "import torch\nprint('ok')\n")
    db = tmp_path / "history.sqlite3"
    with History(db) as history:
        history.add_notice(linked.number, "s/a", "fixed", NIGHTLY)
        history.add_notice(unlinked.number, "s/a", "fixed", NIGHTLY)  # not what s/a links
    assert main(["sweep-merge", "--db", str(db), "--github-repo", "pytorch/pytorch",
                 "--suite", str(tmp_path / "suite")]) == 1
    assert len(linked.comments) == 1 and "appears fixed" in linked.comments[0].body
    assert unlinked.comments == []
    assert (f"- the comment on #{unlinked.number}: not an issue the bot filed (it lacks"
            in summary.read_text())


def _timed_case(folder: Path, name: str, sleep: int, timeout: int = 60) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(f"# /// bisect-case\n# timeout = {timeout}\n# ///\n"
                                       f"import time\nimport torch\ntime.sleep({sleep})\n"
                                       "print('ok')\n")


def _sweep_command(suite: Path, index_server: Any, mirror: Any, db: Path, cache_dir: Path,
                   *extra: str) -> list[str]:
    return ["sweep", str(suite), "--index", index_server.variant_url(mirror.variant),
            "--db", str(db), "--cache-dir", str(cache_dir), "--no-default-packages", *extra]


def _runs(export: Path) -> list[str]:
    import json

    return sorted(row["case_id"] for row in json.loads(export.read_text())["runs"])


def test_a_shard_killed_at_its_time_limit_has_exported_the_cases_it_finished(
    tmp_path: Path, index_server: Any, mirror: Any, cache_dir: Path
) -> None:
    """The export was written at the very end only: a shard killed by the job's
    timeout-minutes (a nightly that makes cases hang) sent nothing, not even what it
    finished, and a widespread hang was never filed."""
    suite = tmp_path / "suite"
    _timed_case(suite / "s", "a_fast", 0)
    _timed_case(suite / "s", "b_hangs", 600, timeout=900)
    export = tmp_path / "export-cpu-1-of-1.json"
    command = [sys.executable, "-m", "bot.jobs.cli",
               *_sweep_command(suite, index_server, mirror, tmp_path / "h.sqlite3", cache_dir,
                               "--export", str(export))]
    sweep = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        give_up = time.monotonic() + 120
        while time.monotonic() < give_up and not (export.exists() and _runs(export)):
            assert sweep.poll() is None, "the sweep ended before its hanging case"
            time.sleep(0.2)
        assert export.exists(), "no export while the sweep runs its hanging case"
    finally:
        sweep.kill()  # the runner's kill at timeout-minutes
        sweep.wait()
    assert _runs(export) == ["s/a_fast"]
    merged = tmp_path / "collect.sqlite3"
    assert main(["sweep-merge", str(export), "--db", str(merged)]) == 0
    with History(merged) as history:
        assert history.run_count() == 1


def test_cases_not_begun_by_the_deadline_are_untested_for_lack_of_time(
    tmp_path: Path, index_server: Any, mirror: Any, cache_dir: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite"
    _timed_case(suite / "s", "a_fast", 0)
    _timed_case(suite / "s", "b_slow", 20)  # runs past the deadline of 15 s
    _timed_case(suite / "s", "c_fast", 0)
    export = tmp_path / "export.json"
    code = main(_sweep_command(suite, index_server, mirror, tmp_path / "h.sqlite3", cache_dir,
                               "--export", str(export), "--deadline-minutes", "0.25"))
    said = capsys.readouterr()
    assert code == 1
    # The case running at the deadline is stopped there, not left to its own timeout (with
    # its reruns, a hanging case ran on into the job's limit, and a killed job uploads
    # nothing); nothing of it is stored, so the next sweep runs it.
    assert ("| `s/b_slow` | skip | - | untested | not finished: the sweep's deadline passed "
            "while it ran on the nightly") in said.out
    assert "| `s/c_fast` | skip | - | untested | not run: the sweep's deadline passed" in said.out
    assert ("the deadline of 0.25 minute(s) passed with 2 case(s) not begun or not finished, "
            "untested for lack of time (s/b_slow, s/c_fast)") in said.err
    assert _runs(export) == ["s/a_fast"]


def test_a_deadline_is_a_positive_number_of_minutes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "suite", "--deadline-minutes", "0"])
    assert "expected a number of minutes over 0, got '0'" in capsys.readouterr().err
