"""The sweep's IssueTracker over the GitHub adapter (bot.adapters.github.GitHubClient)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.jobs.github_common import client_from_env
from bot.jobs.sweep_text import LABELS


@dataclass
class GitHubTracker:
    """Finds the bot's regression issues by their hidden marker among its labelled issues."""

    client: Any  # GitHubClient, or anything with its methods

    @classmethod
    def connect(cls, repo: str) -> GitHubTracker:
        """With the job's GITHUB_TOKEN, at GITHUB_API_URL (GitHub Enterprise Server's API)."""
        return cls(client_from_env(repo, os.environ))

    def find_issue(self, key: str) -> int | None:
        found = self.client.find_issues_with_marker(key, labels=LABELS[:1], state="all")
        return min(issue.number for issue in found) if found else None

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> int:
        return int(self.client.create_issue(title, body, labels).number)

    def update_issue(self, number: int, body: str) -> None:
        self.client.edit_issue(number, body=body)

    def comment(self, number: int, body: str) -> None:
        self.client.create_comment(number, body)
