"""A fake commit source: a main branch and nightly-branch commits that name main shas."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field


def fake_sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass(frozen=True)
class FakeCommit:
    """Shaped like the GitHub adapter's CommitData."""

    sha: str
    message: str
    author: str = "someone"
    html_url: str = ""
    files: Sequence[str] = ()
    changed_lines: str = ""


@dataclass
class FakeCommitSource:
    """`main` oldest first; `nightly` maps a nightly-branch sha to its subject's main sha."""

    main: list[FakeCommit] = field(default_factory=list)
    nightly: dict[str, FakeCommit] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)  # what was asked, for final-state asserts
    fail_with: Exception | None = None

    def add_main(self, title: str, files: Sequence[str] = (), author: str = "someone",
                 body: str = "body") -> str:
        sha = fake_sha(f"main {len(self.main)} {title}")
        self.main.append(FakeCommit(sha, f"{title}\n\n{body}", author,
                                    f"https://github.com/pytorch/pytorch/commit/{sha}",
                                    tuple(files)))
        return sha

    def add_nightly(self, nightly_sha: str, date: str, main_sha: str) -> None:
        self.nightly[nightly_sha] = FakeCommit(nightly_sha, f"{date} nightly release ({main_sha})")

    def get_commit(self, sha: str) -> FakeCommit:
        self.lookups.append(f"commit {sha}")
        if self.fail_with is not None:
            raise self.fail_with
        found = self.nightly.get(sha) or next((c for c in self.main if c.sha == sha), None)
        if found is None:
            raise LookupError(f"404: no commit {sha}")
        return found

    def compare(self, base: str, head: str) -> list[FakeCommit]:
        self.lookups.append(f"compare {base}...{head}")
        shas = [c.sha for c in self.main]
        return self.main[shas.index(base) + 1: shas.index(head) + 1]
