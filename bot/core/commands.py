"""Comment text -> a bot Command (bisect, help, cancel), or a UserError that shows the usage."""

from __future__ import annotations

import enum
import math
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from packaging.requirements import InvalidRequirement, Requirement

from bot.core.builds import VARIANT, parse_end
from bot.core.errors import UserError
from bot.core.issue_facts import FORM_QUESTIONS, PROCESSES_WANTED, given_env, valid_processes
from bot.core.issue_markdown import code_spans, normalize, prose_lines, scan

DEFAULT_HANDLE = "torch-bisect-bot"
MAX_COMMENT_CHARS = 65_536  # GitHub's limit on a comment body
MAX_PATTERN_CHARS = 200
_SLASH = "/bisect"
# Variants of download.pytorch.org/whl/nightly/<variant>/ (cpu, cuNNN, rocmX.Y, xpu).
_PYTHON = re.compile(r"3\.1[0-4]")
_TIMEOUT = re.compile(r"([0-9]{1,5})([smh]?)")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}
_OPTION_WORD = re.compile(r"[a-z]+=")
_OPTIONS = ("good", "bad", "variant", "python", "repeat", "timeout", "match", "metric", "threshold",
            "with", "nproc", "env")
MAX_PACKAGES = 10
_THE_BUILD = frozenset({"torch", "triton", "pytorch-triton"})
# Phones turn typed quotes into curly ones; shlex only knows the straight kind.
_CURLY_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
_T = TypeVar("_T")


class Action(enum.Enum):
    """What a command asks the bot to do."""

    BISECT = "bisect"
    HELP = "help"
    CANCEL = "cancel"


@dataclass(frozen=True)
class Command:
    """One parsed command; None means "not given, use the configured default"."""

    action: Action
    good: str | None = None  # a version, a YYYY-MM-DD date, or "latest"
    bad: str | None = None
    variant: str | None = None
    python: str | None = None  # "X.Y"
    repeat: int | None = None
    timeout_s: int | None = None
    match: str | None = None  # regex the failing output must match
    metric: str | None = None  # regex whose first group is the number to compare
    threshold: float | None = None
    find_fix: bool = False
    packages: tuple[str, ...] = ()  # `with=`: requirements to install beside the build
    processes: str | None = None  # `nproc=`: run it with torchrun on this many processes
    env: tuple[tuple[str, str], ...] = ()  # `env=`: variables every run has, over the issue's

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (part of plan.json)."""
        return {
            "action": self.action.value,
            "good": self.good,
            "bad": self.bad,
            "variant": self.variant,
            "python": self.python,
            "repeat": self.repeat,
            "timeout_s": self.timeout_s,
            "match": self.match,
            "metric": self.metric,
            "threshold": self.threshold,
            "find_fix": self.find_fix,
            "packages": list(self.packages),
            "processes": self.processes,
            "env": dict(self.env),
        }

    def render(self, handle: str = DEFAULT_HANDLE) -> str:
        """The comment line that gives this command (parse_comment reads it back unchanged)."""
        words = [f"@{handle.lstrip('@')}", self.action.value]
        values: tuple[object, ...] = (self.good, self.bad, self.variant, self.python)
        values += (self.repeat, self.timeout_s, self.match, self.metric, self.threshold)
        values += (",".join(self.packages) or None, self.processes,
                   " ".join(f"{name}={value}" for name, value in self.env) or None)
        words += [
            f"{key}={shlex.quote(str(value))}"
            for key, value in zip(_OPTIONS, values, strict=True)
            if value is not None
        ]
        return " ".join([*words, "fix"] if self.find_fix else words)


def usage(handle: str = DEFAULT_HANDLE) -> str:
    """The help reply, in Markdown."""
    bot = f"@{handle.lstrip('@')}"
    return f"""**Usage**

```
{bot} bisect [good=G] [bad=B] [variant=V] [python=X.Y] [repeat=N] [timeout=S]
    [match=REGEX] [metric=REGEX threshold=X] [with=PKG,...] [nproc=N]
    [env="NAME=VALUE ..."] [fix]
{bot} help
{bot} cancel
```

`/bisect ...` is short for `{bot} bisect ...`; `/bisect help` and `/bisect cancel` work too.

| option | meaning | example |
| --- | --- | --- |
| `good=` | a build where the reproducer passes: version, date or `latest`; a release \
means its last nightly | `good=2.12.0` |
| `bad=` | a build where it fails | `bad=2026-05-21`, `bad=latest` |
| `variant=` | wheel variant | `cpu`, `cu130`, `rocm6.4`, `xpu` |
| `python=` | Python 3.10 to 3.14 (default: the issue's `Python version`, else the \
repository's) | `python=3.12` |
| `repeat=` | runs per build, 1 to 20; mixed results count as flaky | `repeat=3` |
| `timeout=` | limit per run, at most 2 hours | `600`, `600s`, `10m` |
| `match=` | regex the failing output must match | `match="CUDA error: .*"` |
| `metric=` `threshold=` | regex whose first group is a number; above the threshold is bad | \
`metric="max diff: (\\S+)" threshold=0.01` |
| `with=` | packages to install beside torch, instead of those guessed from the \
reproducer's imports (a pip name that differs from the module's, a version that matters) | \
`with=attrs,transformers==4.57.1` |
| `nproc=` | run it with torchrun on N processes (a GPU each where it uses CUDA), when the \
issue's own `torchrun --nproc_per_node=N` command does not say so | `nproc=2` |
| `env=` | variables every run has, beside those the issue runs it with: torch's, Triton's \
and CUDA's switches only | `env="TORCHINDUCTOR_FREEZING=1 TORCH_LOGS=+dynamo"` |
| `fix` | find the build that fixed it instead of the one that broke it | `fix` |

Quote values that hold spaces. The reproducer is the ```python block of the comment with the \
command, when it has one (a reduced script), else of the issue; commands inside code blocks \
and quotes are ignored.
"""


USAGE = usage()


def parse_comment(text: str, handle: str = DEFAULT_HANDLE) -> Command | None:
    """The first command in a comment, None if there is none; UserError (with usage) if bad."""
    handle = handle.lstrip("@")
    if not handle:
        raise ValueError("the bot's handle must not be empty")
    if len(text) > MAX_COMMENT_CHARS:
        return None  # GitHub refuses such comments; do not spend time on one
    mention = re.compile(rf"(?<![\w@/-])@{re.escape(handle)}(?![\w-])", re.IGNORECASE)
    # Fenced blocks and HTML comments are dropped by scan; quotes and code spans below.
    for line in prose_lines(scan(normalize(text))):
        if line.lstrip().startswith(">"):
            continue
        try:
            words = _invocation(line, mention)
            if words is not None:
                return _command(words)
        except UserError as error:
            raise UserError(f"{error}\n\n{usage(handle)}") from None
    return None


def _invocation(line: str, mention: re.Pattern[str]) -> list[str] | None:
    """The words after `/bisect` or the bot's mention; None if this line gives no command."""
    stripped = line.lstrip()
    if stripped == _SLASH or stripped.startswith((_SLASH + " ", _SLASH + "\t")):
        return _split(stripped[len(_SLASH) :]) or ["bisect"]
    spans = code_spans(line)
    for found in mention.finditer(line):
        if any(start <= found.start() < end for start, end in spans):
            continue
        rest = line[found.end() :].lstrip(" \t:,")
        at_start = not line[: found.start()].strip()
        # "thanks @bot!" mid-sentence is no command; a line that opens with the mention is.
        if at_start or rest.lower().split(maxsplit=1)[:1] in ([a.value] for a in Action):
            return _split(rest)
    return None


def _command(words: list[str]) -> Command:
    """Words after the mention -> Command; the first word names the action."""
    if not words:
        raise UserError("Tell me what to do: `bisect`, `help` or `cancel`.")
    verb, options = words[0].lower(), words[1:]
    if verb not in {action.value for action in Action}:
        if _OPTION_WORD.match(verb) or verb == "fix":
            verb, options = "bisect", words  # `/bisect good=...` has no verb
        else:
            raise UserError(f"I do not know the command `{words[0]}`.")
    action = Action(verb)
    if action is not Action.BISECT:
        if options:
            raise UserError(f"`{verb}` takes no options, but got `{' '.join(options)}`.")
        return Command(action)
    return _bisect(options)


def _bisect(options: list[str]) -> Command:
    """The options of a bisect command, each validated."""
    raw: dict[str, str] = {}
    find_fix = False
    for word in options:
        key, equals, value = word.partition("=")
        key = key.lower()
        if not equals and key == "fix":
            if find_fix:
                raise UserError("`fix` is given twice.")
            find_fix = True
        elif not equals or key not in _OPTIONS:
            raise UserError(f"I do not know the option `{key if equals else word}`.")
        elif key in raw:
            raise UserError(f"`{key}=` is given twice.")
        else:
            raw[key] = value
    if ("metric" in raw) != ("threshold" in raw):
        raise UserError("`metric=` and `threshold=` go together: give both or neither.")
    return Command(
        Action.BISECT,
        good=_given(raw, "good", _bound),
        bad=_given(raw, "bad", _bound),
        variant=_given(raw, "variant", _variant),
        python=_given(raw, "python", _python),
        repeat=_given(raw, "repeat", _repeat),
        timeout_s=_given(raw, "timeout", _timeout),
        match=_given(raw, "match", _pattern),
        metric=_given(raw, "metric", _metric),
        threshold=_given(raw, "threshold", _threshold),
        find_fix=find_fix,
        packages=_given(raw, "with", _packages) or (),
        processes=_given(raw, "nproc", _processes),
        env=_given(raw, "env", lambda value: given_env(value.split())) or (),
    )


def with_form(command: Command, form: Mapping[str, str]) -> Command:
    """The command with what the issue form answered where the command says nothing; an
    answer is checked as the same option in a comment would be."""
    labels = {option: question for question, option in FORM_QUESTIONS.items()}

    def answer(option: str, parse: Callable[[str], _T]) -> _T | None:
        if option not in form or getattr(command, option):
            return None  # not asked, or the command gives it
        try:
            return parse(form[option])
        except UserError as error:
            raise UserError(f'The form\'s "{labels[option].capitalize()}" ({form[option]}): '
                            f"{error}") from None

    return replace(command, good=answer("good", _bound) or command.good,
                   bad=answer("bad", _bound) or command.bad,
                   variant=answer("variant", _variant) or command.variant,
                   packages=answer("packages", _packages) or command.packages)


def _given(raw: dict[str, str], key: str, parse: Callable[[str], _T]) -> _T | None:
    """The parsed value of an option, None when absent; errors name the option."""
    if key not in raw:
        return None
    try:
        return parse(raw[key])
    except UserError as error:
        raise UserError(f"`{key}={raw[key]}`: {error}") from None


def _bound(value: str) -> str:
    """A good/bad bound: `latest`, a real YYYY-MM-DD date, or a PEP 440 version."""
    return "latest" if parse_end(value) == "latest" else value


def _variant(value: str) -> str:
    if not VARIANT.fullmatch(value.lower()):
        raise UserError("a variant is cpu, cuNNN (cu130), rocmX.Y (rocm6.4) or xpu.")
    return value.lower()


def supported_python(value: str) -> bool:
    """Whether `value` is a Python X.Y that nightlies are built for (3.10 to 3.14)."""
    return _PYTHON.fullmatch(value) is not None


def _python(value: str) -> str:
    if not supported_python(value):
        raise UserError("give a Python version from 3.10 to 3.14, as X.Y.")
    return value


def _repeat(value: str) -> int:
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= 20):
        raise UserError("repeat a run 1 to 20 times.")
    return int(value)


def _timeout(value: str) -> int:
    found = _TIMEOUT.fullmatch(value.lower())
    seconds = int(found.group(1)) * _SECONDS[found.group(2)] if found else 0
    if not 1 <= seconds <= 7200:
        raise UserError("a timeout is 1 to 7200 seconds: 600, 600s or 10m.")
    return seconds


def _pattern(value: str) -> str:
    if len(value) > MAX_PATTERN_CHARS:
        raise UserError(f"a pattern may hold at most {MAX_PATTERN_CHARS} characters.")
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError) as error:
        raise UserError(f"not a Python regular expression ({error}).") from None
    return value


def _metric(value: str) -> str:
    if re.compile(_pattern(value)).groups < 1:
        raise UserError("a metric puts the number in a (group), like `metric=\"max diff: "
                        "(\\S+)\"`.")
    return value


def _threshold(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise UserError("a threshold is a finite number, like 0.01 or 1e-3.")
    return number


def _processes(value: str) -> str:
    if valid_processes(value):
        return value
    raise UserError(f"`nproc=` is {PROCESSES_WANTED}.")


def _packages(value: str) -> tuple[str, ...]:
    """`with=`: comma-separated requirements by name, each optionally with versions
    (`transformers==4.57.1`); no URLs or markers, at most MAX_PACKAGES."""
    names = [word.strip() for word in value.split(",") if word.strip()]
    if not names or len(names) > MAX_PACKAGES:
        raise UserError(f"give 1 to {MAX_PACKAGES} package names, separated by commas")
    packages = []
    for name in names:
        try:
            requirement = Requirement(name)
        except InvalidRequirement:
            requirement = None
        if requirement is None or requirement.url or requirement.marker or len(name) > 100:
            raise UserError(f"`{name}` is not a package name with an optional version "
                            "(`einops`, `transformers==4.57.1`)")
        if requirement.name.lower().replace("_", "-") in _THE_BUILD:
            raise UserError(f"`{requirement.name}` comes with the build under test")
        packages.append(str(requirement))
    return tuple(packages)


def _split(text: str) -> list[str]:
    """Shell-like words; backslashes stay literal, because patterns are full of them."""
    lexer = shlex.shlex(text.translate(_CURLY_QUOTES), posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        raise UserError("A quote is not closed in the command.") from None
