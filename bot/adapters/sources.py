"""PyTorch's sources: a cached partial (blob-less) bare clone of the upstream repository."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.adapters.locks import file_lock
from bot.core.overlay import Commit, FileChange, parse_name_status

UPSTREAM = "https://github.com/pytorch/pytorch.git"
BRANCHES = ("main", "nightly")  # pytorch/pytorch: main, and the nightly branch of the wheels
PREFIX = "tbb-"
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


class SourceError(Exception):
    """The repository could not be cloned, fetched or read."""


@dataclass
class GitSources:
    """A bare clone under `root/sources` with `--filter=blob:none`: commits and trees only.

    Blobs arrive on demand from the promisor remote (git's partial clone), so listing the commits
    between two nightlies and their changed paths costs no file contents; reading the changed
    files of a candidate fetches just those blobs, in one batch (`git diff` prefetches them).
    """

    root: Path
    url: str = UPSTREAM
    branches: Sequence[str] = BRANCHES
    timeout_s: float = 1800.0

    @property
    def path(self) -> Path:
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
        return self.root / "sources" / f"{PREFIX}{digest}.git"

    def git(self, *args: str, data: bytes | None = None) -> bytes:
        """The one method that runs git; everything else is parsing."""
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
               "LC_ALL": "C"}
        try:
            done = subprocess.run(["git", *args], input=data, capture_output=True, env=env,
                                  timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceError(f"git {args[0]} failed: {exc}") from exc
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise SourceError(f"git {' '.join(args[:3])} failed: {' '.join(message)[:400]}")
        return done.stdout

    def _in_repo(self, *args: str, data: bytes | None = None) -> bytes:
        return self.git("--git-dir", str(self.path), *args, data=data)

    @property
    def cloned(self) -> bool:
        """Whether the clone is there already (then `update` only fetches, in seconds)."""
        return (self.path / "HEAD").exists()

    def update(self) -> Path:
        """Clone once (atomically: temp, then rename), then fetch main and nightly each time."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.parent / f"{self.path.name}.lock"):
            if not (self.path / "HEAD").exists():
                self._clone()
            refspecs = [f"+refs/heads/{b}:refs/heads/{b}" for b in self.branches]
            self._in_repo("fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin",
                          *refspecs)
        return self.path

    def _clone(self) -> None:
        staging = Path(tempfile.mkdtemp(prefix=f"{PREFIX}tmp-", dir=self.path.parent))
        try:
            target = staging / "repo.git"
            # One branch: pytorch/pytorch has tens of thousands of others (`gh/*` stacks);
            # `update` fetches main and nightly by name.
            self.git("clone", "--quiet", "--bare", "--no-checkout", "--filter=blob:none",
                     "--no-tags", "--single-branch", "--branch", self.branches[0], self.url,
                     str(target))
            os.replace(target, self.path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def subject(self, sha: str) -> str:
        return self._in_repo("log", "--format=%s", "-1", _checked(sha)).decode().strip()

    def commit(self, sha: str) -> Commit:
        fields = self._in_repo("log", "--format=%H%x00%s%x00%an%x00%aI", "-1", _checked(sha))
        full, subject, author, date = fields.decode().rstrip("\n").split("\0")
        return Commit(full, subject, author, date)

    def commits_between(self, good: str, bad: str) -> list[str]:
        """Main commits after `good` up to `bad`, oldest first, along first parents."""
        out = self._in_repo("rev-list", "--reverse", "--first-parent",
                            f"{_checked(good)}..{_checked(bad)}")
        return out.decode().split()

    def changes(self, old: str, new: str) -> tuple[FileChange, ...]:
        """`git diff --name-status` between two commits; trees only, no blob is fetched."""
        out = self._in_repo("diff", "--name-status", "-z", "--no-renames",
                            _checked(old), _checked(new))
        return parse_name_status(out.decode())

    def own_changes(self, sha: str) -> tuple[FileChange, ...]:
        # A merge's own changes are what it brings to the first parent (main's line): without
        # --diff-merges, diff-tree prints nothing for a merge (git 2.31 and later).
        out = self._in_repo("diff-tree", "--diff-merges=first-parent", "-r", "--root",
                            "--no-commit-id", "--name-status", "-z", "--no-renames",
                            _checked(sha))
        return parse_name_status(out.decode())

    def read_files(self, old: str, new: str, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of `paths` at `new`; their blobs are fetched in one batch first."""
        if not paths:
            return {}
        # A content diff makes git prefetch every missing blob it needs in one request.
        self._in_repo("diff", "--numstat", _checked(old), _checked(new), "--", *paths)
        request = "".join(f"{_checked(new)}:{path}\n" for path in paths).encode()
        return dict(zip(paths, _parse_batch(self._in_repo("cat-file", "--batch", data=request)),
                        strict=True))


def _checked(rev: str) -> str:
    if not (_SHA.match(rev) or rev in BRANCHES):
        raise SourceError(f"not a commit id: {rev!r}")
    return rev


def _parse_batch(out: bytes) -> list[bytes]:
    """`git cat-file --batch` output: `<oid> <type> <size>\\n<content>\\n` per object."""
    contents, position = [], 0
    while position < len(out):
        end = out.index(b"\n", position)
        header = out[position:end].split()
        if len(header) != 3:
            raise SourceError(f"git cat-file: {out[position:end].decode(errors='replace')}")
        size = int(header[2])
        contents.append(out[end + 1 : end + 1 + size])
        position = end + 1 + size + 1
    return contents
