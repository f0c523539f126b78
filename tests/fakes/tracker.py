"""An in-memory issue tracker implementing the sweep's IssueTracker, recording final state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.core.report import GITHUB_COMMENT_LIMIT
from bot.jobs.sweep_filer import Refused, TrackedIssue
from bot.jobs.sweep_text import LABELS, MARKER, UNTESTABLE_MARKER


@dataclass
class FakeIssue:
    number: int
    title: str
    body: str
    labels: tuple[str, ...]
    comments: list[str] = field(default_factory=list)
    edits: int = 0
    open: bool = True


@dataclass
class FakeTracker:
    """Issues live in a dict; `find_issue` looks for the key in bodies, as the real one does."""

    issues: dict[int, FakeIssue] = field(default_factory=dict)
    next_number: int = 1
    # Deleted issues, still in a list of issues made before they went (GitHubTracker lists
    # once a filing); writing to one is refused as GitHub refuses it: 404, gone.
    deleted: dict[int, FakeIssue] = field(default_factory=dict)

    def delete(self, number: int) -> None:
        self.deleted[number] = self.issues.pop(number)

    def add_existing(self, title: str, body: str = "") -> int:
        """An issue someone else filed, e.g. the one a case links to."""
        return self.create_issue(title, body, ())

    def find_issue(self, key: str) -> int | None:
        found = self.find_issues(key)
        return found[0] if found else None

    def find_issues(self, key: str) -> list[int]:
        return [n for n, issue in sorted(self.issues.items()) if key in issue.body]

    def issue(self, number: int) -> TrackedIssue | None:
        found = self.issues.get(number) or self.deleted.get(number)
        if found is None:
            return None
        own = LABELS[0] in found.labels and any(marker.split("{case}")[0] in found.body
                                                 for marker in (MARKER, UNTESTABLE_MARKER))
        return TrackedIssue(found.title, found.body, found.open, own)

    def _gone(self, number: int) -> None:
        if number in self.deleted:
            raise Refused("HTTP 404: Not Found", number)

    @staticmethod
    def _takes(body: str) -> None:
        """GitHub refuses a body or comment over 65,536 characters: 422, for good."""
        if len(body) > GITHUB_COMMENT_LIMIT:
            raise Refused("HTTP 422: Validation Failed (body is too long)")

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> int:
        self._takes(body)
        number = self.next_number
        self.next_number += 1
        self.issues[number] = FakeIssue(number, title, body, tuple(labels))
        return number

    def update_issue(self, number: int, body: str, title: str | None = None) -> None:
        self._gone(number)
        self._takes(body)
        issue = self.issues[number]  # KeyError: the bot edits an issue that does not exist
        issue.body = body
        issue.title = title or issue.title
        issue.edits += 1

    def comment(self, number: int, body: str) -> None:
        self._gone(number)
        self._takes(body)
        self.issues[number].comments.append(body)

    def comments(self, number: int) -> list[str]:
        self._gone(number)
        return list(self.issues[number].comments)

    def filed_by_bot(self) -> list[FakeIssue]:
        return [i for i in self.issues.values() if "torch-bisect-bot" in i.labels]
