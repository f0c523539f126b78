"""The jobs' commands tried by hand, outside GitHub Actions: each that needs what a workflow
provides (the event payload, the token, the step's output and summary files) stops with one
line that says what is missing, and a non-zero status, never a traceback. Run as a user runs
them: the installed command, in a subprocess, with no GITHUB_* variable set."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bot.core.builds import existing_build
from bot.core.issue_text import Reproducer
from bot.core.job_plan import JobPlan, Settings
from tests.jobs.github_helpers import labeled_event
from tests.jobs.test_rounds import BISECT_BOT, start


def _by_hand(argv: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """`bisect-bot ARGV` in `folder`, with only PATH and HOME set."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(folder))}
    return subprocess.run([BISECT_BOT, *argv], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def files(tmp_path, index_server, example_script):
    """An event of each kind a user may hand `plan`, a plan.json, and a round state."""
    (tmp_path / "damaged.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "labeled.json").write_text(json.dumps(labeled_event(7)))
    reproducer = Reproducer("import torch\n", False, None, None, (), "fenced block 1")
    settings = Settings(index_server.variant_url("cpu"), "cpu", "3.12", 60, 1, None, None,
                        None, False)
    plan = JobPlan("owner/repo", 7, 1, "1", "triager", reproducer, settings,
                   (existing_build("/py", "2.13.0.dev20260521+cpu"),))
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_dict()))
    start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    return tmp_path


# A usage error (exit 2), as the README says; exit 1 is a crash of the bot.
TOKEN = "bisect-bot: error: GITHUB_TOKEN is not set; this job needs issues: write"


@pytest.mark.parametrize(("argv", "said", "status"), [
    (["plan"], "bisect-bot: error: GITHUB_EVENT_PATH is not set, as outside a GitHub Actions "
     "workflow: give the webhook payload with --event FILE", 2),
    (["plan", "--event", "missing.json"],
     "bisect-bot: error: missing.json: cannot read the event payload (No such file or "
     "directory)", 2),
    (["plan", "--event", "damaged.json"],
     "bisect-bot: error: damaged.json: the event payload is not JSON (", 2),
    (["plan", "--event", "list.json"],
     "bisect-bot: error: list.json: the event payload is a JSON list, not an object", 2),
    (["plan", "--event", "labeled.json"], TOKEN, 2),
    (["mark-running", "plan.json"], TOKEN, 2),
    (["report", "outcome.json", "--plan", "plan.json"], TOKEN, 2),
    (["report", "outcome.json", "--plan", "plan.json", "--config", "none.yml"],
     "bisect-bot: error: config file none.yml does not exist", 2),
    (["mark-running", "plan.json", "--config", "none.yml"],
     "bisect-bot: error: config file none.yml does not exist", 2),
    (["round", "plan", "state.json", "--github-output"],
     "bisect-bot: error: --github-output: GITHUB_OUTPUT is not set; the flag is for a step of "
     "a GitHub Actions workflow", 2),
    (["round", "report", "state.json", "--github-summary"],
     "bisect-bot: error: --github-summary: GITHUB_STEP_SUMMARY is not set", 2),
    (["round", "triage", "state.json", "--out", "outcome.json", "--github-summary"],
     "bisect-bot: error: --github-summary: GITHUB_STEP_SUMMARY is not set", 2),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
def test_a_job_s_command_outside_actions_says_what_is_missing_in_one_line(
        argv, said, status, files):
    done = _by_hand(argv, files)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line
    assert said in done.stderr
    assert done.returncode == status
