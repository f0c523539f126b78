"""What `bisect-bot bisect` was pointed at: a script, an issue body file, or a GitHub issue."""

from __future__ import annotations

import ast
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.core import issue_facts
from bot.core.errors import UserError
from bot.core.issue_text import Reproducer, extract_reproducer

_ISSUE_REF = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)$")
_ISSUE_URL = re.compile(
    r"^https?://(?P<host>[^/]+)/(?P<repo>[\w.-]+/[\w.-]+)/issues/(?P<number>\d+)/?(?:#.*)?$"
)


@dataclass(frozen=True)
class Target:
    """A runnable script on disk, and what its source said about it."""

    script: Path
    needs_cuda: bool
    reported_version: str | None = None
    reproducer: Reproducer | None = None


def issue_reference(text: str) -> tuple[str, int] | None:
    """`owner/repo#N` or an issue URL, as (repo, number)."""
    match = _ISSUE_REF.match(text) or _ISSUE_URL.match(text)
    return (match["repo"], int(match["number"])) if match else None


def script_needs_cuda(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return issue_facts.needs_cuda(ast.walk(tree))


def read_issue_body(repo: str, number: int) -> str:
    """The body of a GitHub issue, through the GitHub adapter (GITHUB_TOKEN if set)."""
    from bot.adapters.github import GitHubClient  # imported here: PyGithub is slow to import

    base_url = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    client = GitHubClient(repo, os.environ.get("GITHUB_TOKEN") or None, base_url=base_url)
    try:
        return client.get_issue(number).body or ""
    except Exception as exc:  # the adapter's errors are PyGithub's; the user needs one line
        raise UserError(f"cannot read {repo}#{number}: {exc}") from exc


def _from_markdown(text: str, work_dir: Path | None) -> Target:
    reproducer = extract_reproducer(text)
    folder = work_dir or Path(tempfile.mkdtemp(prefix="tbb-issue-"))
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "repro.py"
    script.write_text(reproducer.script)
    return Target(script, reproducer.needs_cuda, reproducer.reported_version, reproducer)


def load_target(target: str, work_dir: Path | None = None) -> Target:
    reference = issue_reference(target)
    if reference is not None:
        return _from_markdown(read_issue_body(*reference), work_dir)
    path = Path(target)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it as UTF-8 text ({exc})") from exc
    if path.suffix.lower() in (".md", ".markdown", ".txt"):
        return _from_markdown(text, work_dir)
    return Target(path, script_needs_cuda(text))
