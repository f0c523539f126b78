"""In-memory state of the fake GitHub: repositories, issues, comments, labels, commits, roles."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

# GitHub's repository roles, strongest first; the legacy `permission` field of
# GET /repos/{owner}/{repo}/collaborators/{username}/permission folds maintain into write and
# triage into read (see the REST docs for "Get repository permissions for a user").
ROLES = ("admin", "maintain", "write", "triage", "read", "none")
LEGACY_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write",
                     "triage": "read", "read": "read", "none": "none"}


@dataclass
class User:
    login: str
    id: int
    type: str = "User"  # "User", "Bot" or "Organization"


@dataclass
class Label:
    name: str
    color: str
    id: int
    description: str | None = None


@dataclass
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Issue:
    number: int
    id: int
    title: str
    body: str | None
    author: str
    labels: list[str]
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    comments: list[Comment] = field(default_factory=list)
    locked: bool = False


@dataclass
class Commit:
    sha: str
    message: str
    author: str
    date: datetime
    files: list[str]
    parents: list[str]
    patches: dict[str, str] = field(default_factory=dict)  # filename -> its unified diff


@dataclass
class Repo:
    """One repository; the `add_*` methods seed it, the fields show its final state."""

    owner: str
    name: str
    id: int
    world: GitHubState
    issues: dict[int, Issue] = field(default_factory=dict)
    labels: dict[str, Label] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # login -> one of ROLES
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # name -> head sha
    runs: dict[int, str] = field(default_factory=dict)  # workflow run id -> its status

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def add_issue(self, title: str, body: str | None = "", author: str = "octocat",
                  labels: tuple[str, ...] = ()) -> Issue:
        self.world.user(author)
        for name in labels:
            self.add_label(name)
        number = max(self.issues, default=0) + 1
        now = self.world.tick()
        issue = Issue(number, self.world.next_id(), title, body, author, list(labels), now, now)
        self.issues[number] = issue
        return issue

    def add_comment(self, number: int, body: str, author: str = "octocat") -> Comment:
        self.world.user(author)
        now = self.world.tick()
        comment = Comment(self.world.next_id(), author, body, now, now)
        self.issues[number].comments.append(comment)
        return comment

    def add_label(self, name: str, color: str = "ededed", description: str | None = None) -> Label:
        if name not in self.labels:
            self.labels[name] = Label(name, color, self.world.next_id(), description)
        return self.labels[name]

    def set_role(self, login: str, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}")
        self.world.user(login)
        self.roles[login] = role

    def add_commit(self, message: str, files: tuple[str, ...] = (), author: str = "octocat",
                   branch: str = "main", date: datetime | None = None,
                   patches: dict[str, str] | None = None) -> Commit:
        """Append a commit to `branch` (linear history), its sha derived from its content;
        `patches` gives some of its files a diff (GitHub leaves it out for a large file)."""
        self.world.user(author)
        parent = self.branches.get(branch, "")
        when = date or self.world.tick()
        digest = hashlib.sha1(f"{parent}\0{message}\0{when.isoformat()}".encode()).hexdigest()
        commit = Commit(digest, message, author, when, list(files), [parent] if parent else [],
                        dict(patches or {}))
        self.commits[digest] = commit
        self.branches[branch] = digest
        return commit

    def resolve_ref(self, ref: str) -> Commit | None:
        """A branch name, a full sha or an unambiguous sha prefix of at least 7 characters."""
        sha = self.branches.get(ref) or ref
        if sha in self.commits:
            return self.commits[sha]
        found = [c for s, c in self.commits.items() if len(ref) >= 7 and s.startswith(ref)]
        return found[0] if len(found) == 1 else None

    def history(self, head: Commit) -> list[Commit]:
        """`head` and its first-parent ancestors, newest first."""
        chain = [head]
        while chain[-1].parents:
            chain.append(self.commits[chain[-1].parents[0]])
        return chain


@dataclass
class GitHubState:
    """Everything the fake server knows; tests seed it and inspect it directly."""

    bot_login: str = "torch-bisect-bot[bot]"
    repos: dict[str, Repo] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
    clock: datetime = datetime(2026, 5, 21, 12, 0, tzinfo=timezone.utc)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.user(self.bot_login, kind="Bot")

    def next_id(self) -> int:
        return next(self._ids)

    def tick(self) -> datetime:
        """A deterministic clock: every event happens one minute after the previous one."""
        self.clock += timedelta(minutes=1)
        return self.clock

    def user(self, login: str, kind: str | None = None) -> User:
        if login not in self.users:
            guessed = "Bot" if login.endswith("[bot]") else "User"
            self.users[login] = User(login, self.next_id(), kind or guessed)
        return self.users[login]

    def add_repo(self, full_name: str) -> Repo:
        owner, name = full_name.split("/")
        self.user(owner)
        repo = Repo(owner, name, self.next_id(), self)
        self.repos[full_name] = repo
        return repo
