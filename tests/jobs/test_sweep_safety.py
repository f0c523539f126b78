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

from bot.adapters.history import History
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
