"""A local upstream for the commit tier: a git repository of the synthetic torch and its nightlies.

Like pytorch/pytorch, `main` takes several commits a day (Python, C++-marked files, tests); one
nightly a day is built from that day's last main commit; the `nightly` branch has one commit per
nightly whose subject reads `YYYY-MM-DD nightly release (<main sha>)` and whose tree is that main
commit's; the wheel's `torch.version.git_version` is the nightly-branch commit.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.demo.mirror import PLATFORM
from bot.demo.synthetic_torch import BACKENDS, COMPILE, CUDA, INIT, TESTING, VERSION
from bot.demo.wheels import build_wheel

CURRENT_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
DEFAULT_BUG: dict[str, Any] = {"subsystem": "inductor", "kind": "precision"}
AUTHORS = ("Alice Example <alice@example.com>", "Bob Example <bob@example.com>")
CULPRIT_AUTHOR = "Carol Culprit <carol@example.com>"


@dataclass(frozen=True)
class GitMirror:
    """What was built: the upstream repository, the wheel folder and the planted commits."""

    repo: Path
    root: Path  # served as /whl/nightly/ (wheels under root/<variant>/)
    variant: str
    versions: tuple[str, ...]  # oldest first
    first_bad: str | None
    culprit: str  # the main commit that plants the regression
    cpp_commit: str | None
    main_of: dict[str, str] = field(default_factory=dict)  # version -> main commit

    @property
    def url(self) -> str:
        return f"file://{self.repo}"


def initial_tree() -> dict[str, str]:
    """The repository's files: the synthetic torch's sources plus C++ and test stand-ins."""
    # torch/__init__.py takes its version from the generated torch/version.py, as PyTorch's does.
    init = INIT.format(version="0").replace(
        "__version__ = '0'", "from torch.version import __version__  # noqa: E402")
    return {
        "torch/__init__.py": init,
        "torch/cuda.py": CUDA,
        "torch/testing.py": TESTING.format(),
        "torch/_compile.py": COMPILE.format(backends=BACKENDS),
        "torch/_behaviour.json": json.dumps({"bug": None}),
        "torch/_dynamo/notes.py": "NOTES = []\n",
        "aten/src/ATen/native/Foo.cpp": "// a kernel\nint foo() { return 0; }\n",
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.27)\n",
        "test/test_compile.py": "def test_nothing():\n    pass\n",
    }


def _git(repo: Path, *args: str, when: dt.datetime | None = None, author: str = AUTHORS[0]) -> str:
    name, email = author[: author.index(" <")], author[author.index("<") + 1 : -1]
    stamp = (when or dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)).isoformat()
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def _commit(repo: Path, tree: dict[str, str], edits: dict[str, str], subject: str,
            when: dt.datetime, author: str) -> str:
    for path, text in edits.items():
        tree[path] = text
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", subject, when=when, author=author)
    return _git(repo, "rev-parse", "HEAD")


def _edit_for(kind: str, tree: dict[str, str], tag: str, bug: dict[str, Any]) -> dict[str, str]:
    cpp, notes = "aten/src/ATen/native/Foo.cpp", "torch/_dynamo/notes.py"
    if kind == "culprit":
        return {"torch/_behaviour.json": json.dumps({"bug": bug})}
    if kind == "cpp":
        return {cpp: tree[cpp] + f"// {tag}\n"}
    if kind == "python":
        return {notes: tree[notes] + f"NOTES.append({tag!r})\n"}
    return {f"test/test_{tag}.py": "def test_it():\n    pass\n"}


SUBJECTS = {"culprit": "[inductor] Keep cumsum accumulators in bf16",
            "cpp": "[ATen] Speed up foo kernel", "python": "[dynamo] Record a note",
            "test": "[test] Add a test"}


def build_git_mirror(
    root: Path,
    *,
    start: dt.date = dt.date(2026, 5, 18),
    days: int = 6,
    per_day: int = 4,
    culprit: tuple[int, int] = (3, 2),  # (day, slot) of the planted Python commit
    cpp: tuple[int, int] | None = (3, 3),  # (day, slot) of a C++-marked commit
    variant: str = "cpu",
    python_tags: Sequence[str] = (CURRENT_TAG,),
    bug: dict[str, Any] | None = None,
) -> GitMirror:
    """Write the repository to `root/upstream` and one wheel a day to `root/whl/<variant>/`."""
    repo, wheels = root / "upstream", root / "whl"
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch", "main")
    _git(repo, "config", "uploadpack.allowFilter", "true")  # for `git clone --filter` over file://
    tree: dict[str, str] = {}
    base = dt.datetime.combine(start, dt.time(), dt.timezone.utc)
    head = _commit(repo, tree, initial_tree(), "Initial import (#150000)", base, AUTHORS[0])
    planted, cpp_sha, nightly = "", None, ""
    versions, main_of, first_bad = [], {}, None
    for day in range(days):
        for slot in range(per_day):
            kind = ("culprit" if (day, slot) == culprit else "cpp" if (day, slot) == cpp
                    else ("test", "python")[slot % 2])
            number = 150001 + day * per_day + slot
            author = CULPRIT_AUTHOR if kind == "culprit" else AUTHORS[slot % 2]
            when = base + dt.timedelta(days=day, hours=1 + slot)
            edits = _edit_for(kind, tree, f"d{day}s{slot}", bug or DEFAULT_BUG)
            head = _commit(repo, tree, edits, f"{SUBJECTS[kind]} (#{number})", when, author)
            planted = head if kind == "culprit" else planted
            cpp_sha = head if kind == "cpp" else cpp_sha
        date = start + dt.timedelta(days=day)
        nightly = _nightly_commit(repo, head, nightly, date)
        version = f"2.13.0.dev{date:%Y%m%d}+{variant}"
        files = {p: text for p, text in tree.items() if p.startswith("torch/")}
        files["torch/version.py"] = VERSION.format(version=version, git_version=nightly)
        for tag in python_tags:
            build_wheel(wheels / variant, "torch", version, files, f"{tag}-{tag}-{PLATFORM}")
        versions.append(version)
        main_of[version] = head
        if first_bad is None and json.loads(tree["torch/_behaviour.json"])["bug"]:
            first_bad = version
    _git(repo, "update-ref", "refs/heads/nightly", nightly)
    return GitMirror(repo, wheels, variant, tuple(versions), first_bad, planted, cpp_sha, main_of)


def _nightly_commit(repo: Path, main_sha: str, parent: str, date: dt.date) -> str:
    """A nightly-branch commit: the main commit's tree, PyTorch's subject, the previous nightly."""
    tree = _git(repo, "rev-parse", f"{main_sha}^{{tree}}")
    parents = ["-p", parent] if parent else []
    subject = f"{date.isoformat()} nightly release ({main_sha})"
    when = dt.datetime.combine(date + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
    return _git(repo, "commit-tree", tree, *parents, "-m", subject, when=when,
                author="pytorchbot <soumith+bot@pytorch.org>")
