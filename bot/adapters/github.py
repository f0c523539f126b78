"""The few GitHub REST calls the bot makes, through PyGithub, returning plain frozen records."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from itertools import islice
from typing import Any
from urllib.parse import quote

from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from github.GithubException import RateLimitExceededExceedsMaxWait

from bot.adapters.github_data import (
    CommentData,
    CommitData,
    IssueData,
    changed_lines,
    comment_data,
    commit_data,
    issue_data,
    role_from_permission,
)

DEFAULT_BASE_URL = "https://api.github.com"



def error_message(error: GithubException) -> str | None:
    """The `message` GitHub's error body gives, if it gives one."""
    data = error.data if isinstance(error.data, dict) else {}
    return str(data["message"]) if data.get("message") else None

class BoundedRetry(GithubRetry):
    """PyGithub's retry (5xx, and 403 rate limits), never sleeping past `max_rate_limit_wait`.

    GithubRetry caps the wait it computes for a rate-limit message, but a `Retry-After` header
    is slept by urllib3 as given; a job would rather fail and be rerun than hang for an hour.
    """

    # Editing a comment or labels twice does no harm, so PATCH/PUT/DELETE retry too; a POST
    # (a new comment or issue) retries only on a rate limit, which GitHub did not carry out:
    # after a 502 it may have been made already, and a retry would post it twice.
    RETRIED_ALWAYS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() not in self.RETRIED_ALWAYS and status_code not in (403, 429):
            return False
        return bool(super().is_retry(method, status_code, has_retry_after))

    def _is_method_retryable(self, method: str) -> bool:
        return method.upper() in self.RETRIED_ALWAYS or method.upper() == "POST"

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        limit = self.max_rate_limit_wait
        if seconds is not None and limit is not None and seconds > limit:
            raise RateLimitExceededExceedsMaxWait(
                response.status, {"message": f"Retry-After {seconds}s"}, dict(response.headers),
                wait=seconds,
            )
        return seconds


def make_retry(total: int = 5, max_wait: float = 120.0, secondary_rate_wait: float = 60.0,
               backoff_factor: float = 1.0) -> BoundedRetry:
    """Bounded retries: at most `total` retries of 5xx and rate limits, each wait <= max_wait."""
    return BoundedRetry(
        total=total,
        backoff_factor=backoff_factor,
        backoff_max=max_wait,
        secondary_rate_wait=secondary_rate_wait,
        max_rate_limit_wait=max_wait,
        # after the last retry, hand PyGithub the response so it raises GithubException(status)
        raise_on_status=False,
    )


class GitHubClient:
    """One repository's issues, labels, permissions and commits.

    `base_url` is `https://HOST/api/v3` on GitHub Enterprise Server, or a local test server.
    The throttles are PyGithub's defaults, which follow GitHub's advice to space out writes.
    """

    def __init__(self, repo: str, token: str | None, *, base_url: str = DEFAULT_BASE_URL,
                 retry: GithubRetry | None = None, seconds_between_requests: float = 0.25,
                 seconds_between_writes: float = 1.0, timeout: int = 30) -> None:
        self._github = Github(
            auth=Auth.Token(token) if token else None,
            base_url=base_url,
            retry=retry if retry is not None else make_retry(),
            timeout=timeout,
            seconds_between_requests=seconds_between_requests,
            seconds_between_writes=seconds_between_writes,
            lazy=True,  # build URLs without fetching each object first: one request per call
            per_page=100,
        )
        self._repo = self._github.get_repo(repo)
        self.repo = repo

    def _request(self, verb: str, path: str, body: Any = None) -> Any:
        """A call PyGithub does not shape the way GitHub documents it; `path` is repo-relative."""
        _, data = self._github.requester.requestJsonAndCheck(
            verb, f"{self._repo.url}/{path}", input=body
        )
        return data

    def get_issue(self, number: int) -> IssueData:
        return issue_data(self._repo.get_issue(number))

    def list_comments(self, number: int) -> list[CommentData]:
        return [comment_data(c) for c in self._repo.get_issue(number).get_comments()]

    def create_comment(self, number: int, body: str) -> CommentData:
        return comment_data(self._repo.get_issue(number).create_comment(body))

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._request("PATCH", f"issues/comments/{comment_id}", {"body": body})

    def edit_issue(self, number: int, *, body: str | None = None,
                   title: str | None = None, state: str | None = None) -> None:
        fields = {k: v for k, v in (("body", body), ("title", title), ("state", state)) if v}
        if fields:
            self._request("PATCH", f"issues/{number}", fields)

    def add_labels(self, number: int, labels: Iterable[str]) -> None:
        names = list(labels)
        if names:
            # PyGithub posts a bare array; the documented body is an object with `labels`
            self._request("POST", f"issues/{number}/labels", {"labels": names})

    def remove_label(self, number: int, label: str) -> None:
        """Remove a label; one the issue does not carry is not an error."""
        # quote `/` too: PyGithub leaves it, which turns `bisect/running` into two segments
        with suppress(UnknownObjectException):
            self._request("DELETE", f"issues/{number}/labels/{quote(label, safe='')}")

    def ensure_labels(self, colors_by_name: Mapping[str, str]) -> list[str]:
        """Create the repository labels that do not exist yet; return the names created."""
        existing = {label.name.lower() for label in self._repo.get_labels()}
        created = []
        for name, color in colors_by_name.items():
            if name.lower() in existing:
                continue
            try:
                self._repo.create_label(name, color.lstrip("#"))
            except GithubException as error:
                if error.status != 422:  # 422: someone created it since we listed
                    raise
            else:
                created.append(name)
        return created

    def get_permission(self, username: str) -> str:
        """The user's role: admin, maintain, write, triage, read or none."""
        try:
            data = self._request("GET", f"collaborators/{quote(username, safe='')}/permission")
        except UnknownObjectException:
            return "none"  # no such user
        return role_from_permission(data)

    def sees_repo(self) -> bool:
        """Whether the token can see this repository at all (a 404 on one of its issues then
        means the issue is gone, not that the token lacks access)."""
        try:  # one issue listed: the lightest request a repository answers
            self._github.requester.requestJsonAndCheck("GET", f"{self._repo.url}/issues",
                                                       parameters={"per_page": 1})
        except UnknownObjectException:
            return False
        return True

    def cancel_run(self, run_id: str) -> str:
        """Ask Actions to cancel a workflow run of this repository: "cancelled" (requested),
        "ended" (it had finished: GitHub's 409), "not found", or "forbidden" (a token
        without `actions: write`)."""
        try:
            self._request("POST", f"actions/runs/{int(run_id)}/cancel")
        except UnknownObjectException:
            return "not found"
        except GithubException as error:
            if error.status == 409:
                return "ended"
            if error.status == 403:
                return "forbidden"
            raise
        return "cancelled"

    def create_issue(self, title: str, body: str, labels: Iterable[str] = ()) -> IssueData:
        return issue_data(self._repo.create_issue(title=title, body=body, labels=list(labels)))

    def list_issues(self, labels: Iterable[str] = (), state: str = "open") -> list[IssueData]:
        """Issues (not pull requests) carrying every one of `labels`."""
        names = list(labels)
        found = self._repo.get_issues(state=state, labels=names) if names else (
            self._repo.get_issues(state=state))
        # not `issue.pull_request`: absent from listed issues, reading it fetches each issue again
        return [issue_data(issue) for issue in found if "/pull/" not in issue.html_url]

    def find_issues_with_marker(self, marker: str, labels: Iterable[str] = (),
                                state: str = "all") -> list[IssueData]:
        """Issues whose body contains `marker`, for deduplication.

        Listing by label rather than the search API: search is rate limited separately and
        indexes new issues with a delay, so a sweep filing two issues in a row could miss one.
        """
        return [issue for issue in self.list_issues(labels, state) if marker in issue.body]

    def get_commit(self, sha: str, with_files: bool = True) -> CommitData:
        """One commit, with its files and the lines their patches change in the same request
        (a commit of more than 100 files costs a request per further page of them)."""
        commit = self._repo.get_commit(sha)
        data = commit_data(commit)  # fetches it; its first page of files comes in the reply
        if not with_files:
            return data
        files = list(commit.files)  # read once: each pass over a PaginatedList pages again
        return replace(data, files=tuple(f.filename for f in files),
                       changed_lines=changed_lines(f.patch for f in files))

    def compare(self, base: str, head: str, with_files: bool = True) -> list[CommitData]:
        """Commits after `base` up to `head`, oldest first: a request per 100 of them, and
        with files, one more a commit."""
        commits = self._repo.compare(base, head).commits
        if not with_files:
            return [commit_data(c) for c in commits]
        return [self.get_commit(c.sha) for c in commits]

    def list_branch_commits(self, branch: str, since: datetime | None = None,
                            limit: int = 100) -> list[CommitData]:
        """The newest `limit` commits of `branch` (since `since`), newest first, without files."""
        if since is None:
            commits = self._repo.get_commits(sha=branch)
        else:
            commits = self._repo.get_commits(sha=branch, since=since)
        return [commit_data(c) for c in islice(commits, limit)]

    def for_repo(self, repo: str) -> GitHubClient:
        """A client for another repository sharing this one's connection and retry policy."""
        other = copy.copy(self)
        other._repo, other.repo = self._github.get_repo(repo), repo
        return other
