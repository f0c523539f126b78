"""What `bisect-bot bisect` was pointed at: a script, an issue body, an issue, interpreters."""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import sys
import tempfile
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bot.adapters.environments import ProvisionError, describe
from bot.core import issue_facts
from bot.core.builds import Build, existing_build
from bot.core.errors import UserError
from bot.core.issue_text import Reproducer, extract_from_comment, extract_reproducer

if TYPE_CHECKING:
    from bot.adapters.github import GitHubClient

_ISSUE_REF = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)$")
# An issue's or a pull request's (GitHub's issues API serves both by number), with the query
# string of a notification's link (`?notification_referrer_id=...`) and a comment's fragment.
_ISSUE_URL = re.compile(
    r"^https?://(?P<host>[^/?#]+)/(?P<repo>[\w.-]+/[\w.-]+)/(?:issues|pull)/(?P<number>\d+)/?"
    r"(?:\?[^#]*)?(?:#issuecomment-(?P<comment>\d+)|#.*)?$"
)


@dataclass(frozen=True)
class Target:
    """A runnable script on disk, and what its source said about it."""

    script: Path
    needs_cuda: bool
    reported_version: str | None = None
    reproducer: Reproducer | None = None
    scratch: bool = False  # the script's folder was made for it, and holds nothing else
    imports: tuple[str, ...] = ()  # pip names of what the script imports (Reproducer.installs)

    def discard(self) -> None:
        """Remove the folder made for the script (nothing to resume when no bisection began)."""
        if self.scratch:
            shutil.rmtree(self.script.parent, ignore_errors=True)


def issue_reference(text: str) -> tuple[str, int] | None:
    """`owner/repo#N` or an issue URL, as (repo, number)."""
    match = _ISSUE_REF.match(text) or _ISSUE_URL.match(text)
    return (match["repo"], int(match["number"])) if match else None


def comment_reference(text: str) -> int | None:
    """The comment an issue URL points at (`...#issuecomment-ID`), whose reproducer is used."""
    match = _ISSUE_URL.match(text)
    return int(match["comment"]) if match and match["comment"] else None


def issue_reproducer(repo: str, number: int, comment: int | None = None) -> Reproducer:
    """The reproducer of a GitHub issue, or of one of its comments (a bisect command's, with a
    triager's reduced script) with what the issue's body and title say about it."""
    title, body = read_issue(repo, number)
    if comment is None:
        return extract_reproducer(body, title)
    found = extract_from_comment(read_comment(repo, number, comment), body, title)
    if found is None:
        raise UserError(f"comment {comment} of {repo}#{number} holds no Python reproducer: "
                        f"name the issue itself ({repo}#{number}) to use its body's")
    return found


def _empty(code: str) -> bool:
    """Whether a script holds no code: nothing, or only comments and blank lines."""
    try:
        return not ast.parse(code).body
    except SyntaxError:
        return False  # run, it fails: its probes say so


def _script_target(path: Path, code: str) -> Target:
    """A script given as a file: whether it needs CUDA and what it imports, as for an issue's."""
    try:
        nodes = list(ast.walk(ast.parse(code)))
    except SyntaxError:
        return Target(path, False)
    return Target(path, issue_facts.needs_cuda(nodes), imports=issue_facts.script_installs(code))


def _client(repo: str) -> GitHubClient:
    """The GitHub adapter for `repo` (GITHUB_TOKEN if set, GITHUB_API_URL for another host)."""
    from bot.adapters.github import GitHubClient  # imported here: PyGithub is slow to import

    base_url = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    return GitHubClient(repo, os.environ.get("GITHUB_TOKEN") or None, base_url=base_url)


def read_issue(repo: str, number: int) -> tuple[str, str]:
    """The title and body of a GitHub issue."""
    try:
        issue = _client(repo).get_issue(number)
        return issue.title or "", issue.body or ""
    except Exception as exc:  # the adapter's errors are PyGithub's; the user needs one line
        raise UserError(f"cannot read {repo}#{number}: {exc}") from exc


def read_comment(repo: str, number: int, comment: int) -> str:
    """The body of one comment of a GitHub issue."""
    try:
        found = [c.body for c in _client(repo).list_comments(number) if c.id == comment]
    except Exception as exc:  # PyGithub's errors, as in read_issue
        raise UserError(f"cannot read the comments of {repo}#{number}: {exc}") from exc
    if not found:
        raise UserError(f"{repo}#{number} has no comment {comment}")
    return found[0] or ""


def _from_reproducer(reproducer: Reproducer, work_dir: Path | None) -> Target:
    folder = work_dir or Path(tempfile.mkdtemp(prefix="tbb-issue-"))
    folder.mkdir(parents=True, exist_ok=True)
    script = _free(folder / "repro.py", reproducer.script.encode())
    script.write_bytes(reproducer.script.encode())
    return Target(script, reproducer.needs_cuda, reproducer.reported_version, reproducer,
                  scratch=work_dir is None, imports=reproducer.installs)


def _free(path: Path, content: bytes) -> Path:
    """`path`, or `name-2.py`, `name-3.py`... where `path` holds another script: a --work-dir
    of the user's own files kept them (their repro.py was written over without a word)."""
    candidate, number = path, 1
    while True:
        try:
            held = candidate.read_bytes()
        except FileNotFoundError:
            break
        except OSError:
            held = None  # a folder, or unreadable: not ours to write over
        if held == content:
            break
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    if candidate != path:
        print(f"{path} holds another script; writing this one to {candidate}", file=sys.stderr)
    return candidate


def load_target(target: str, work_dir: Path | None = None) -> Target:
    reference = issue_reference(target)
    if reference is not None:
        return _from_reproducer(issue_reproducer(*reference, comment_reference(target)),
                                work_dir)
    if target == "-":
        raise UserError("-: the reproducer is not read from standard input; save it to a "
                        "file (a .py script or an issue body .md) and give its path")
    if re.match(r"^https?://", target):  # as given: a path would read `https:/...`
        raise UserError(f"{target}: not an issue's URL; give one as "
                        "https://github.com/OWNER/REPO/issues/N (or /pull/N)")
    path = Path(target)
    if path.is_dir():
        raise UserError(f"{target}: that is a folder; give a .py file, an issue body (.md), "
                        "or an issue (owner/repo#N or its URL)")
    if not path.is_file():
        raise UserError(f"{target}: no such file")
    script = path.suffix.lower() not in (".md", ".markdown", ".txt")
    try:
        if script:  # in the encoding its coding line names (PEP 263), as Python runs it
            with tokenize.open(path) as source:
                text = source.read()
        else:
            text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        kind = "a Python script in its declared encoding" if script else "UTF-8 text"
        raise UserError(f"{path}: cannot read it as {kind} ({exc})") from exc
    if not script:
        return _from_reproducer(extract_reproducer(text), work_dir)
    if _empty(text):  # it would pass on every build: "not reproduced", after an install
        raise UserError(f"{target}: the script is empty (nothing but comments and blank "
                        "lines); give the script that shows the problem")
    # A copy is what runs: the user's file may be edited (or `resume` may write another) while
    # a bisection runs, and every probe must run the text the bisection started with.
    folder = work_dir or Path(tempfile.mkdtemp(prefix="tbb-script-"))
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / path.name
    if copy.resolve() != path.resolve():
        copy = _free(copy, path.read_bytes())
        shutil.copyfile(path, copy)
    return replace(_script_target(copy, text), scratch=work_dir is None)


def existing_builds(paths: Sequence[str]) -> tuple[Build, ...]:
    """Each interpreter a build, in the order given; `@FILE` lists one path a line."""
    expanded: list[str] = []
    for path in paths:
        if path.startswith("@"):
            try:
                lines = Path(path[1:]).read_text().splitlines()
            except OSError as exc:
                raise UserError(f"{path[1:]}: cannot read the list of interpreters") from exc
            expanded += [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
        else:
            expanded.append(path)
    builds = []
    for path in expanded:
        python, info = interpreter_with_torch(Path(path))
        builds.append(existing_build(str(python), str(info["torch"])))
    return tuple(builds)


def interpreter_with_torch(path: Path) -> tuple[Path, dict[str, object]]:
    """An existing interpreter (or venv or conda prefix) and what its torch says of itself;
    UserError when it does not start or torch does not import there."""
    python = path / "bin" / "python" if path.is_dir() else path
    # Resolve the folder, not the file: a venv's python is a link to the base interpreter,
    # and only its own path finds pyvenv.cfg; the sandbox sees resolved paths only.
    python = python.absolute().parent.resolve() / python.name
    try:
        info = dict(describe(python))
    except ProvisionError as exc:
        raise UserError(str(exc)) from exc
    if "torch" not in info:
        raise UserError(f"{python}: torch does not import there ({info.get('import_error')})")
    return python, info


def add_processes_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nproc-per-node", dest="processes", type=processes_count,
                        metavar="N", help="run the reproducer with torchrun on N processes "
                        "(python -m torch.distributed.run --standalone --nproc_per_node=N; "
                        "gpu, cpu or auto as torchrun takes them) (default: as the issue's "
                        "torchrun command says, else python alone)")


def add_env_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable every run has (repeatable), beside those the issue "
                        "runs it with: torch's, Triton's and CUDA's switches only, e.g. "
                        "TORCHINDUCTOR_FREEZING=1")


def add_args_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--args", dest="args_given", metavar="ARGS",
                        help="the reproducer's own command-line arguments, as one string split "
                        "as a shell would, e.g. --args='--size 8' (write it with = when it "
                        "starts with -); every run gets them as its argv (default: as the "
                        "issue's `python repro.py ...` command shows them); --args='' runs it "
                        "with none")


def script_args(args: argparse.Namespace, reproducer: Reproducer | None) -> tuple[str, ...]:
    """The reproducer's arguments: `--args`, else the issue's; UserError for ones that
    cannot be passed."""
    given = getattr(args, "args_given", None)
    if given is None:
        return reproducer.args if reproducer is not None else ()
    try:
        return issue_facts.split_args(given)
    except UserError as error:
        raise UserError(f"--args: {error}") from None


def processes_count(text: str) -> str:
    """`--nproc-per-node`: a count of 1-16, or gpu, cpu or auto."""
    if issue_facts.valid_processes(text):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: expected {issue_facts.PROCESSES_WANTED}")
