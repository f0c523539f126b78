"""Plain frozen records of GitHub objects, so nothing past the adapter sees PyGithub types."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Repository roles, strongest first, as `role_name` reports them.
ROLES = ("admin", "maintain", "write", "triage", "read", "none")


@dataclass(frozen=True)
class IssueData:
    number: int
    title: str
    body: str
    author: str
    labels: tuple[str, ...]
    html_url: str
    state: str = "open"


@dataclass(frozen=True)
class CommentData:
    id: int
    author: str
    author_type: str  # "User", "Bot" or "Organization", as GitHub reports the user's type
    body: str
    html_url: str


@dataclass(frozen=True)
class CommitData:
    sha: str
    message: str
    author: str  # the GitHub login when GitHub could match the email, else the git name
    html_url: str
    date: datetime | None = None  # committer date
    files: tuple[str, ...] = ()  # filled only where asked: listing files costs a request each
    changed_lines: str = ""  # with the files: what `changed_lines` keeps of their patches


def issue_data(issue: Any) -> IssueData:
    """From a PyGithub Issue."""
    return IssueData(
        number=issue.number,
        title=issue.title,
        body=issue.body or "",
        author=issue.user.login,
        labels=tuple(label.name for label in issue.labels),
        html_url=issue.html_url,
        state=issue.state,
    )


def comment_data(comment: Any) -> CommentData:
    """From a PyGithub IssueComment."""
    return CommentData(
        id=comment.id,
        author=comment.user.login,
        author_type=comment.user.type,
        body=comment.body or "",
        html_url=comment.html_url,
    )


def commit_data(commit: Any, files: tuple[str, ...] = ()) -> CommitData:
    """From a PyGithub Commit; `commit.commit` is the git object, `commit.author` the account."""
    git = commit.commit
    return CommitData(
        sha=commit.sha,
        message=git.message,
        author=commit.author.login if commit.author else git.author.name,
        html_url=commit.html_url,
        date=git.committer.date if git.committer else None,
        files=files,
    )


# How much of a commit's diff is kept to look for operators in: a commit that regenerates a
# large file would otherwise hold megabytes a commit, for a window of many commits.
DIFF_SCAN_CHARS = 200_000


def changed_lines(patches: Iterable[str | None], limit: int = DIFF_SCAN_CHARS) -> str:
    """The added and removed lines of a commit's patches (each file's unified diff, GitHub's
    `files[].patch`, absent for a large or binary file), without their +/-, up to `limit`
    characters: the context and hunk-header lines are code the commit did not change."""
    kept: list[str] = []
    left = limit
    for patch in patches:
        for line in (patch or "").splitlines():
            if left <= 0:
                return "\n".join(kept)
            if line.startswith(("+", "-")):
                kept.append(line[1:left + 1])
                left -= len(kept[-1]) + 1
    return "\n".join(kept)


def role_from_permission(data: dict[str, Any]) -> str:
    """The user's role from a collaborator-permission response.

    The legacy `permission` field folds maintain into write and triage into read; `role_name`
    keeps them apart, but names a custom role when the organization defines one, so fall back
    to `permission` for a name outside the built-in roles.
    """
    role = data.get("role_name")
    if role in ROLES:
        return str(role)
    permission = data.get("permission")
    return str(permission) if permission in ROLES else "none"
