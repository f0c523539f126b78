"""The sweep's IssueTracker over the GitHub adapter (bot.adapters.github.GitHubClient)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from github import GithubException

from bot.adapters.github import error_message
from bot.jobs.github_common import client_from_env
from bot.jobs.sweep_filer import Refused, TrackedIssue
from bot.jobs.sweep_text import LABELS, MARKER, UNTESTABLE_MARKER

# What GitHub answers for a request about one issue that it will never take as it is: the
# issue is gone (404, 410: deleted, or moved where the token cannot see it) or the body is
# invalid (422). A new issue's 404 is the repository's (a token without access): that stops
# the filing, as every finding would meet it.
_ISSUE_GONE = frozenset({404, 410, 422})
_INVALID = frozenset({422})


def _refused(error: GithubException, for_good: frozenset[int] = _ISSUE_GONE,
             issue: int | None = None) -> Refused | None:
    if error.status not in for_good:
        return None
    message = error_message(error)
    gone = issue if error.status in (404, 410) else None
    return Refused(f"HTTP {error.status}: {message or 'refused'}", gone)


@dataclass
class GitHubTracker:
    """Finds the bot's regression issues by their hidden marker among its labelled issues."""

    client: Any  # GitHubClient, or anything with its methods
    # The labelled issues, listed once a filing: looked up per finding, listing cost one
    # request a page each time (1,000 issues and 200 findings made 2,300 requests, over
    # what an hour of a workflow token allows).
    _issues: list[Any] | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, repo: str) -> GitHubTracker:
        """With the job's GITHUB_TOKEN, at GITHUB_API_URL (GitHub Enterprise Server's API)."""
        return cls(client_from_env(repo, os.environ))

    def find_issue(self, key: str) -> int | None:
        found = self.find_issues(key)
        return found[0] if found else None

    def find_issues(self, key: str) -> list[int]:
        if self._issues is None:
            self._issues = list(self.client.list_issues(labels=LABELS[:1], state="all"))
        return sorted(issue.number for issue in self._issues if key in (issue.body or ""))

    def issue(self, number: int) -> TrackedIssue | None:
        """From the labelled issues listed (they are listed with every state), else asked."""
        if self._issues is None:
            self._issues = list(self.client.list_issues(labels=LABELS[:1], state="all"))
        found = next((issue for issue in self._issues if issue.number == number), None)
        if found is None:
            try:
                found = self.client.get_issue(number)
            except GithubException as error:
                if error.status in (404, 410):
                    return None
                raise
        body = found.body or ""
        own = (LABELS[0] in found.labels and found.author.endswith("[bot]")
               and any(marker.split("{case}")[0] in body
                       for marker in (MARKER, UNTESTABLE_MARKER)))
        return TrackedIssue(found.title, body, found.state == "open", own)

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> int:
        try:
            created = self.client.create_issue(title, body, labels)
        except GithubException as error:
            raise _refused(error, _INVALID) or error from error
        if self._issues is not None:
            self._issues.append(created)
        return int(created.number)

    def update_issue(self, number: int, body: str, title: str | None = None) -> None:
        try:
            self.client.edit_issue(number, body=body, title=title)
        except GithubException as error:
            raise self._about(number, error) or error from error

    def comment(self, number: int, body: str) -> None:
        try:
            self.client.create_comment(number, body)
        except GithubException as error:
            raise self._about(number, error) or error from error

    def comments(self, number: int) -> list[str]:
        try:
            return [comment.body for comment in self.client.list_comments(number)]
        except GithubException as error:
            raise self._about(number, error) or error from error

    def _about(self, number: int, error: GithubException) -> Refused | None:
        """Refused for good when issue `number` is gone, or locked (a lock bot locks closed
        issues: GitHub answers 403, which is otherwise a rate limit or a token without the
        right, and those stop the filing); a 404 from a token that cannot see the repository
        at all is not (every finding would meet it: the filing stops)."""
        message = error_message(error)
        if error.status == 403 and "locked" in str(message or "").lower():
            return Refused(f"HTTP 403: {message}", expected=True)
        if error.status == 404 and not self.client.sees_repo():
            return None
        return _refused(error, _ISSUE_GONE, number)
