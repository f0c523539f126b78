"""Helpers for the GitHub job tests: real webhook examples adapted to the fake's repository."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.jobs.cli import main

WEBHOOKS = Path(__file__).resolve().parents[1] / "data" / "webhooks"
BISECT_BOT = shutil.which("bisect-bot", path=str(Path(sys.executable).parent))
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
REPO = "pytorch/pytorch"


def issue_body(script: str) -> str:
    return ("### 🐛 Describe the bug\n\ncompiled cumsum drifts from eager\n\n"
            f"```python\n{script}```\n\n### Versions\n\ntorch 2.13.0.dev20260521+cpu\n")


def labeled_event(issue: int, label: str = "bisect", sender: str = "triager") -> dict[str, Any]:
    """The real `issues.labeled` example, pointed at our repository, issue and label."""
    payload = copy.deepcopy(json.loads((WEBHOOKS / "issues.labeled.1.json").read_text()))
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = issue
    payload["label"]["name"] = label
    payload["sender"]["login"] = sender
    return payload


def edited_event(issue: int, labels: tuple[str, ...], body: str = "",
                 sender: str = "octocat", after: str | None = None) -> dict[str, Any]:
    """The real `issues.edited` example, pointed at our repository and issue, with its labels
    and the body's change (from `body` to `after`, the example's body when None)."""
    payload = copy.deepcopy(json.loads((WEBHOOKS / "issues.edited.1.json").read_text()))
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = issue
    if after is not None:
        payload["issue"]["body"] = after
    payload["issue"]["labels"] = [{**payload["issue"]["labels"][0], "name": name}
                                  for name in labels]
    payload["changes"] = {"body": {"from": body}}
    payload["sender"]["login"] = sender
    return payload


def comment_event(issue: int, body: str, author: str = "alice",
                  author_type: str = "User") -> dict[str, Any]:
    """The real `issue_comment.created` example with our comment text and author."""
    payload = copy.deepcopy(json.loads((WEBHOOKS / "issue_comment.created.1.json").read_text()))
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = issue
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = author
    payload["comment"]["user"]["type"] = author_type
    payload["sender"]["login"] = author
    return payload


def sticky(issue: Any) -> str:
    """The body of the bot's comment on `issue`."""
    return str(next(c.body for c in issue.comments if c.author.endswith("[bot]")))


class Jobs:
    """Runs the three jobs the way the workflow does, with Actions' runtime files."""

    def __init__(self, tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch,
                 index_url: str) -> None:
        self.tmp = tmp_path
        self.output = tmp_path / "github_output"
        self.summary = tmp_path / "summary.md"
        self.config = tmp_path / "torch-bisect-bot.yml"
        self.config.write_text(f'variant: cpu\npython: "{PYTHON}"\ntimeout: 120\n'
                               f"index_url: {index_url}{{variant}}/\n")
        for name, value in {"GITHUB_TOKEN": "test-token", "GITHUB_API_URL": server.url,
                            "GITHUB_OUTPUT": str(self.output), "GITHUB_RUN_ID": "1",
                            "GITHUB_STEP_SUMMARY": str(self.summary)}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
        self.monkeypatch = monkeypatch

    def plan(self, name: str, payload: dict[str, Any], run_id: str = "1", *extra: str) -> bool:
        self.monkeypatch.setenv("GITHUB_RUN_ID", run_id)
        event = self.tmp / f"event-{run_id}.json"
        event.write_text(json.dumps(payload))
        self.output.write_text("")
        plan = self.tmp / "plan.json"
        plan.unlink(missing_ok=True)
        assert main(["plan", "--event", str(event), "--event-name", name, "--out", str(plan),
                     "--config", str(self.config), *extra]) == 0
        outputs = self.output.read_text()
        assert ("should_run<<" in outputs) and (("\ntrue\n" in outputs) == plan.exists())
        return plan.exists()

    def run(self, cache_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        """The run job as a subprocess whose environment holds no GitHub token at all."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
        return subprocess.run(
            [BISECT_BOT, "run", str(self.tmp / "plan.json"), "--out",
             str(self.tmp / "outcome.json"), "--cache-dir", str(cache_dir),
             "--no-default-packages", *extra],
            env=env, capture_output=True, text=True, timeout=600,
        )

    def outcome(self, cache_dir: Path, *extra: str) -> dict[str, Any]:
        """The run job, which must succeed, and the outcome.json it wrote."""
        done = self.run(cache_dir, *extra)
        assert done.returncode == 0, done.stderr[-3000:]
        return dict(json.loads((self.tmp / "outcome.json").read_text()))

    def mark_running(self) -> None:
        assert main(["mark-running", str(self.tmp / "plan.json"), "--config",
                     str(self.config)]) == 0

    def report(self) -> None:
        assert main(["report", str(self.tmp / "outcome.json"), "--plan",
                     str(self.tmp / "plan.json"), "--config", str(self.config)]) == 0
