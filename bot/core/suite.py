"""Stored reproducers: the `# /// bisect-case` metadata block, shards, and sweep transitions."""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from bot.core import issue_facts
from bot.core.config import PYPI_INDEX
from bot.core.errors import UserError
from bot.core.verdicts import FLAKY, Verdict, failed_otherwise

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomllib is 3.11+; tomli is the same parser, published separately
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

# PEP 723's block syntax with our own type name: `# /// bisect-case`, `# `-prefixed TOML lines,
# then `# ///` (https://peps.python.org/pep-0723/#specification).
BLOCK_TYPE = "bisect-case"
_OPEN = re.compile(r"^# /// (?P<type>[a-zA-Z0-9-]+)\s*$")
_CLOSE = "# ///"
_TOML_LINE = re.compile(r"at line (\d+)")
_METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_ISSUE_URL = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/?$")
KEYS = ("requires", "expect", "timeout", "repeat", "match", "metric", "threshold", "tags",
        "issue", "nproc_per_node", "env", "hang", "renamed_from")
_CASE_ID = re.compile(r"^[^/\s]+(/[^/\s]+)+$")


class Requires(str, Enum):
    CPU = "cpu"
    CUDA = "cuda"


class Expect(str, Enum):
    PASS = "pass"
    FAIL = "fail"


@dataclass(frozen=True)
class CaseMeta:
    """What a case declares about itself; every key has a default."""

    requires: Requires = Requires.CPU
    expect: Expect = Expect.PASS
    timeout: float = 600.0
    repeat: int = 1
    match: str | None = None
    metric: str | None = None
    threshold: float | None = None
    tags: tuple[str, ...] = ()
    issue: int | str | None = None  # a number in the sweep's repository, or an issue URL
    # Run with torchrun on this many processes ("2", "gpu"), or None: `python case.py`.
    nproc_per_node: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # variables every run has (torch's switches only)
    # A run past `timeout`: BAD, since the case ran within it on the nightlies it passed (a
    # nightly that hangs is a regression), or SKIP for a case whose run time is not in its hands.
    hang: Verdict = Verdict.BAD
    # The ids the case had before (a case renamed and edited in one commit): its issues and
    # its earlier results follow it. Not in the options hash: it changes no run.
    renamed_from: tuple[str, ...] = ()

    def options_hash(self, python: str, sandbox: str = "namespace",
                     default_packages: bool = True,
                     packages_index: str | None = PYPI_INDEX) -> str:
        """Identifies what changes a run's result besides the script and the build: the
        case's options, and the sweep's that change what a run sees: the sandbox (`none`
        reaches the network and the host's files), the packages in every environment
        (`--no-default-packages`) and where what the case imports comes from."""
        keyed: dict[str, object] = {
            "timeout": self.timeout, "repeat": self.repeat, "match": self.match,
            "metric": self.metric, "threshold": self.threshold, "python": python}
        # Each only when not the default: the runs of a default sweep keep their hash.
        if sandbox != "namespace":
            keyed["sandbox"] = sandbox
        if not default_packages:
            keyed["default_packages"] = False
        if (packages_index or None) != PYPI_INDEX:
            keyed["packages_index"] = packages_index or None
        if self.nproc_per_node is not None:  # only when set: older hashes stay what they were
            keyed["nproc_per_node"] = self.nproc_per_node
        if self.env:
            keyed["env"] = dict(self.env)
        if self.hang is not Verdict.BAD:
            keyed["hang"] = self.hang.value
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Case:
    """One reproducer file: `suite/name`, where it lives, its text, metadata and text hash."""

    case_id: str
    path: str
    text: str
    meta: CaseMeta

    @property
    def script_hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def _fail(path: str, line: int, message: str) -> UserError:
    return UserError(f"{path}:{line}: {message}")


def _block(text: str, path: str) -> tuple[int, str]:
    """The first line number of the TOML and its text, with the `# ` prefixes removed."""
    lines = text.splitlines()
    opens = [(n, m["type"]) for n, line in enumerate(lines, 1) if (m := _OPEN.match(line))]
    ours = [n for n, kind in opens if kind == BLOCK_TYPE]
    if not ours:
        raise _fail(path, 1, f"no `# /// {BLOCK_TYPE}` metadata block")
    if len(ours) > 1:
        raise _fail(path, ours[1], f"a second `# /// {BLOCK_TYPE}` block (one per file)")
    start = ours[0]
    body: list[str] = []
    for number in range(start + 1, len(lines) + 1):
        line = lines[number - 1]
        if line.rstrip() == _CLOSE:
            return start + 1, "\n".join(body) + "\n"
        if line != "#" and not line.startswith("# "):
            raise _fail(path, number, "every line of the block must start with `# ` "
                        f"(or close it with `{_CLOSE}`)")
        body.append(line[2:])
    raise _fail(path, start, f"the `# /// {BLOCK_TYPE}` block is never closed with `{_CLOSE}`")


def _key_line(block: str, first: int, key: str) -> int:
    for offset, line in enumerate(block.splitlines()):
        if re.match(rf"^\s*{re.escape(key)}\s*=", line):
            return first + offset
    return first


def _choice(enum: Callable[[str], Any], allowed: Sequence[str]) -> Callable[[object], Any]:
    def convert(value: object) -> Any:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return enum(value)
    return convert


def _positive_number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 1:
        raise ValueError("must be a number of seconds, at least 1")
    return float(value)


def _positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be an integer of at least 1")
    return value


def _regex(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string (a regular expression)")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"is not a valid regular expression: {exc}") from exc
    return value


def _metric(value: object) -> str:
    if not isinstance(value, str) or not _METRIC_NAME.match(value):
        raise ValueError("must be a name such as max_abs_diff")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ValueError("must be a finite number")
    return float(value)


def _tags(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise ValueError("must be a list of non-empty strings")
    return tuple(value)


def _issue(value: object) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and (_ISSUE_URL.match(value) or re.fullmatch(r"#?\d+", value)):
        return int(value.lstrip("#")) if value.lstrip("#").isdigit() else value
    raise ValueError("must be an issue number or https://github.com/OWNER/REPO/issues/N")


def _processes(value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(text, str) and issue_facts.valid_processes(text):
        return text
    raise ValueError(f"must be {issue_facts.PROCESSES_WANTED}")


def _env(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("must be a table of strings, e.g. { TORCHINDUCTOR_FREEZING = \"1\" }")
    try:  # as a triager's variables are checked
        return tuple(sorted(issue_facts.given_env(f"{k}={v}" for k, v in value.items())))
    except UserError as error:
        raise ValueError(f"{error}") from None


def _case_ids(value: object) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or \
            not all(isinstance(name, str) and _CASE_ID.match(name) for name in names):
        raise ValueError("must be a case id such as \"compile_numerics/cumsum_fp32_fwd\", or "
                         "a list of them")
    return tuple(names)


_CONVERTERS: Mapping[str, Callable[[object], Any]] = {
    "requires": _choice(Requires, [r.value for r in Requires]),
    "expect": _choice(Expect, [e.value for e in Expect]),
    "timeout": _positive_number, "repeat": _positive_int, "match": _regex, "metric": _metric,
    "threshold": _number, "tags": _tags, "issue": _issue, "nproc_per_node": _processes,
    "env": _env, "hang": _choice(Verdict, [Verdict.BAD.value, Verdict.SKIP.value]),
    "renamed_from": _case_ids,
}


def parse_meta(text: str, path: str) -> CaseMeta:
    """The metadata of one reproducer; errors are UserErrors that read `path:line: message`."""
    first, block = _block(text, path)
    try:
        data = tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        line = first + int(found[1]) - 1 if found else first
        raise _fail(path, line, f"invalid TOML: {exc}") from None
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if key not in _CONVERTERS:
            raise _fail(path, _key_line(block, first, key),
                        f"unknown key {key!r} (known: {', '.join(KEYS)})")
        try:
            values[key] = _CONVERTERS[key](raw)
        except ValueError as exc:
            raise _fail(path, _key_line(block, first, key), f"{key} {exc}") from None
    if ("metric" in values) != ("threshold" in values):
        raise _fail(path, first - 1, "metric and threshold go together: set both or neither")
    return CaseMeta(**values)


def parse_case(text: str, path: str, case_id: str) -> Case:
    """A stored reproducer with its metadata; UserError (file:line: why) for metadata that does
    not hold or a script that does not compile (a sweep would record it as failing on every
    nightly)."""
    meta = parse_meta(text, path)
    try:
        ast.parse(text, filename=path)
    except SyntaxError as error:
        raise _fail(path, error.lineno or 1, f"the script does not compile: {error.msg}") from None
    return Case(case_id=case_id, path=path, text=text, meta=meta)


def imported_modules(text: str) -> set[str]:
    """The top-level names a script that compiles imports; "." for a relative import."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else (node.module or "").split(".")[0])
    return found


def imports_torch(text: str) -> bool:
    """Whether a script that compiles imports torch (or a module of it) anywhere."""
    for node in ast.walk(ast.parse(text)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(name.split(".")[0] == "torch" for name in names):
            return True
    return False


def issue_number(issue: int | str | None, repo: str | None) -> int | None:
    """The linked issue's number when it lives in `repo` (the one the sweep files into)."""
    if isinstance(issue, int):
        return issue
    found = _ISSUE_URL.match(issue or "")
    if found and repo is not None and found["repo"].lower() == repo.lower():
        return int(found["number"])
    return None


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` with 1 <= I <= N, as a matrix job names its shard."""
    found = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not found or not 1 <= int(found[1]) <= int(found[2]):
        raise UserError(f"--shard {text}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(found[1]), int(found[2])


def shard(cases: Sequence[Case], index: int, count: int) -> list[Case]:
    """Round-robin over cases sorted by id, so shards stay balanced as cases are added."""
    ordered = sorted(cases, key=lambda case: case.case_id)
    return [case for n, case in enumerate(ordered) if n % count == index - 1]


class Transition(str, Enum):
    """How a case's result on this nightly compares with its previous recorded nightly."""

    NEW_FAILURE = "new-failure"  # passed before, fails now: bisect and file
    STILL_FAILING = "still-failing"
    FIXED = "fixed"  # failed before (or is expected to fail), passes now
    PASSING = "passing"
    UNEXPECTED = "unexpected-failure"  # fails on its first recorded nightly, expected to pass
    UNTESTED = "untested"
    # Passed on its previous nightly; on this one it fails in a way its `match` does not take,
    # or its runs disagree (flaky): no verdict, but a change someone must hear of (filed).
    NEW_UNTESTABLE = "new-untestable"
    STILL_UNTESTABLE = "still-untestable"  # and so on the nightlies after: its issue follows


def untestable(reason: str) -> bool:
    """Whether a SKIP's reason is the case's own doing on this build (a failure its `match`
    does not take, runs that disagree) rather than the build's or the runner's (an install,
    the network): a case that passed before and says this now needs a person."""
    return failed_otherwise(reason) is not None or reason.startswith(FLAKY)


def transition(previous: Verdict | None, current: Verdict, expect: Expect,
               filed: bool = False, reason: str = "") -> Transition:
    """Decide; with no earlier result, the case's `expect` stands in for it. `filed`: an
    open issue of the history says the case fails, so a pass is its fix whatever the
    previous result (a history started over from an older one has no failure of it).
    `reason`: the current verdict's; a SKIP that is `untestable` after a pass is new."""
    if current is Verdict.SKIP:
        if previous is Verdict.GOOD and untestable(reason):
            return Transition.NEW_UNTESTABLE
        return Transition.UNTESTED
    failing = current is Verdict.BAD
    if filed and not failing:
        return Transition.FIXED
    if previous is None:
        if failing:
            return Transition.STILL_FAILING if expect is Expect.FAIL else Transition.UNEXPECTED
        return Transition.FIXED if expect is Expect.FAIL else Transition.PASSING
    if previous is Verdict.GOOD:
        return Transition.NEW_FAILURE if failing else Transition.PASSING
    return Transition.STILL_FAILING if failing else Transition.FIXED
