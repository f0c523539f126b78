"""The commits between the last good and the first bad nightly, from a `CommitSource`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.builds import main_sha_of_nightly
from bot.core.suspects import (
    Clues,
    Commit,
    CommitRange,
    commit_url,
    operators_in_diff,
    ranking,
    reverted_sha,
    undone_pairs,
)

GITHUB_REPO = "pytorch/pytorch"


class CommitLike(Protocol):
    """What the GitHub adapter's CommitData carries (bot/adapters/github.py)."""

    # Read-only: the adapter's CommitData is a frozen dataclass.
    @property
    def sha(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def html_url(self) -> str: ...
    @property
    def files(self) -> Sequence[str]: ...
    @property
    def changed_lines(self) -> str: ...  # what its patches add or remove, bounded; "" without files


class CommitSource(Protocol):
    """The two calls needed: one commit (for a nightly's subject), and a compare of two."""

    def get_commit(self, sha: str) -> CommitLike: ...

    def compare(self, base: str, head: str) -> Sequence[CommitLike]: ...


# A commit's files, and the patches looked through for operators, cost one request: both come
# in GitHub's single-commit reply (the compare lists none). A window of more commits than this
# is ranked by the titles alone, so a report spends at most 3 + 60 requests of the workflow
# token's 1,000 an hour (a fifth of REQUEST_BUDGET), and 2 + one per 100 commits for a wider
# window.
FILES_UP_TO = 60
REQUEST_BUDGET = 300
# The compare pages its commits 100 at a time (GitHubClient asks for per_page=100, GitHub's
# most), so a window of 260 commits costs 3 requests.
COMPARE_PAGE = 100


@dataclass
class PytorchCommits:
    """pytorch/pytorch's commits, read with the report job's token (a public repository)."""

    connect: Callable[[], Any]  # -> a GitHubClient of pytorch/pytorch, made on first use
    files_up_to: int = FILES_UP_TO
    # Requests this source may make in all (a filing of many new windows shares it): past it,
    # a window is ranked by its titles, and then not looked up at all.
    budget: int = REQUEST_BUDGET
    spent: int = 0
    files_failed: str = ""  # why the last window's files could not be looked up
    _client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.connect()
        return self._client

    def _spend(self, requests: int) -> None:
        if self.spent + requests > self.budget:
            raise RuntimeError(f"the {self.budget} requests for commit lookups are spent")
        self.spent += requests

    def get_commit(self, sha: str) -> CommitLike:
        """A nightly's commit, for its subject: no files."""
        self._spend(1)
        commit: CommitLike = self.client.get_commit(sha, with_files=False)
        return commit

    def compare(self, base: str, head: str) -> Sequence[CommitLike]:
        self._spend(1)
        commits: list[CommitLike] = self.client.compare(base, head, with_files=False)
        # the pages past the first are spent already: counted, even past the budget
        self.spent += max(0, -(-len(commits) // COMPARE_PAGE) - 1)
        if len(commits) > self.files_up_to or self.spent + len(commits) > self.budget:
            return commits
        self._spend(len(commits))
        try:
            return [self.client.get_commit(commit.sha) for commit in commits]
        except Exception as exc:  # a rate limit midway: the titles listed still rank them
            self.files_failed = _why(exc)
            return commits


def to_commit(data: CommitLike, operators: Sequence[str] = ()) -> Commit:
    """The commit as ranking needs it: of its diff, only which of `operators` it names."""
    title = data.message.strip().splitlines()[0] if data.message.strip() else ""
    return Commit(sha=data.sha, title=title, author=data.author or "",
                  url=data.html_url or commit_url(data.sha), files=tuple(data.files or ()),
                  reverts=reverted_sha(data.message or ""),
                  diff_operators=operators_in_diff(data.changed_lines or "", operators))


def _main_sha(source: CommitSource, nightly_sha: str) -> str | None:
    return main_sha_of_nightly(source.get_commit(nightly_sha).message)


def commit_range(source: CommitSource | None, good_nightly: str | None,
                 bad_nightly: str | None, clues: Clues) -> CommitRange:
    """Both ends mapped to main and the commits between them ranked; degrades to what is known."""
    plain = CommitRange(good_nightly, bad_nightly)
    if not good_nightly or not bad_nightly:
        return CommitRange(good_nightly, bad_nightly,
                           note="a build did not report torch.version.git_version")
    if source is None:
        return CommitRange(good_nightly, bad_nightly, note="commits not looked up "
                           "(--github looks them up on api.github.com)")
    try:
        good_main, bad_main = _main_sha(source, good_nightly), _main_sha(source, bad_nightly)
        if not good_main or not bad_main:
            return CommitRange(good_nightly, bad_nightly, note="a nightly commit's subject "
                               "names no main commit; the link compares nightly-branch commits")
        if isinstance(source, PytorchCommits):
            source.files_failed = ""
        commits = tuple(to_commit(c, clues.operators)
                        for c in source.compare(good_main, bad_main))
    except Exception as exc:  # GitHub unreachable or rate-limited: the report still has the link
        return CommitRange(plain.good_nightly, plain.bad_nightly,
                           note=f"GitHub lookup failed: {_why(exc)}"[:200])
    limit, failed = getattr(source, "files_up_to", None), getattr(source, "files_failed", "")
    their = "its" if len(commits) == 1 else "their"  # a window of one commit is one
    why = (f"looking up {their} files failed: {failed}" if failed else f"{their} files are "
           f"looked up for a window of up to {limit}, within {getattr(source, 'budget', '?')} "
           "requests")
    titles = (f"{len(commits)} commit{'s' if len(commits) != 1 else ''}: ranked by {their} "
              f"title{'s' if len(commits) != 1 else ''} ({why})"
              if limit is not None and commits and not any(c.files for c in commits) else "")
    undone = len(undone_pairs(commits))
    reverted = (f"{undone} commits are changes reverted within the window and their reverts: "
                "not ranked" if undone else "")
    suspects, tied = ranking(commits, clues)
    return CommitRange(good_nightly, bad_nightly, good_main, bad_main, commits, suspects,
                       note="; ".join(n for n in (titles, reverted) if n), tied=tied)


def _why(exc: Exception) -> str:
    """An API error as its status and GitHub's message (PyGithub's text holds the whole JSON
    reply, which a report cut in the middle); anything else as its type and text."""
    status, data = getattr(exc, "status", None), getattr(exc, "data", None)
    if isinstance(status, int) and isinstance(data, dict) and data.get("message"):
        return f"HTTP {status}: {data['message']}"
    return f"{type(exc).__name__}: {exc}"


def github_source() -> CommitSource | None:
    """The real adapter (another module's), reading GITHUB_TOKEN if set; None without it."""
    try:
        from bot.adapters.github import GitHubClient
    except ImportError:
        return None
    source: CommitSource = GitHubClient(GITHUB_REPO, os.environ.get("GITHUB_TOKEN"))
    return source
