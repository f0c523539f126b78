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

from bot.core.builds import VARIANT, named_variant, parse_end
from bot.core.errors import UserError
from bot.core.issue_facts import (
    FORM_DEFAULT,
    FORM_QUESTIONS,
    PROCESSES_WANTED,
    given_env,
    split_args,
    valid_processes,
)
from bot.core.issue_markdown import Item, code_spans, normalize, scan
from bot.core.safe_markdown import code_span

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
            "with", "nproc", "env", "hang", "args")
# Every character str.isspace() knows (the last is U+3000): a no-break space that a phone or a
# copied web page puts between words separates them as a plain space does.
_SPACES = "".join(char for char in map(chr, range(0x3001)) if char.isspace())
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*=")  # TORCH_LOGS=..., as env= takes them
_CODE_INDENT = 4  # columns that make a Markdown indented code block
# CommonMark 0.31 section 4.6, HTML blocks of type 1: from a line that opens with <pre, <script,
# <style or <textarea to the line that closes any of them, the text is shown as written, its
# Markdown unread; GitHub renders <pre> as preformatted text, where a command is shown, not
# given, as in a fenced block. (Indentation is not limited, as for fences: list items.)
_RAW_HTML_OPEN = re.compile(r"[ \t]*<(?:pre|script|style|textarea)(?:[ \t>]|$)", re.IGNORECASE)
_RAW_HTML_CLOSE = re.compile(r"</(?:pre|script|style|textarea)>", re.IGNORECASE)
_EXCERPT_CHARS = 40  # of a command quoted in a message
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
    hang: str | None = None  # `hang=bad`: a run that times out is bad (the regression hangs)
    args: tuple[str, ...] | None = None  # `args=`: the script's own arguments, over the issue's

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
            "hang": self.hang,
            "args": None if self.args is None else list(self.args),
        }

    def render(self, handle: str = DEFAULT_HANDLE) -> str:
        """The comment line that gives this command (parse_comment reads it back unchanged)."""
        words = [f"@{handle.lstrip('@')}", self.action.value]
        values: tuple[object, ...] = (self.good, self.bad, self.variant, self.python)
        values += (self.repeat, self.timeout_s, self.match, self.metric, self.threshold)
        values += (",".join(self.packages) or None, self.processes,
                   " ".join(f"{name}={value}" for name, value in self.env) or None, self.hang,
                   None if self.args is None else shlex.join(self.args))
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
    [env="NAME=VALUE ..."] [hang=bad] [args="ARG ..."] [fix]
{bot} help
{bot} cancel
```

`/bisect ...` is short for `{bot} bisect ...`; `/bisect help` and `/bisect cancel` work too.
One command per comment; its options may go on the lines below it, lines of options alone \
(a remark goes on a line of its own). Edits of a comment are not read, so post a corrected \
command in a new comment.

| option | meaning | example |
| --- | --- | --- |
| `good=` | a build where the reproducer passes: version, date or `latest`; a release \
means its last nightly | `good=2.12.0` |
| `bad=` | a build where it fails | `bad=2026-05-21`, `bad=latest` |
| `variant=` | wheel variant; it wins over the `+cu126` that a `good=`/`bad=` version ends \
with (which then names only the version); without it, the ends must name the same one | `cpu`, \
`cu130`, `rocm6.4`, `xpu` |
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
| `hang=` | what a run that times out is: `skip` (untestable, the default) or `bad`, for a \
regression that hangs (a compile that never ends, a deadlock); with a `timeout=` well above \
a good build's run | `hang=bad timeout=300` |
| `args=` | the reproducer's own command-line arguments, split as a shell would, instead \
of those the issue's `python repro.py ...` command shows; `args=""` runs it with none | \
`args="--size 8"` |
| `fix` | find the build that fixed it instead of the one that broke it; `bad=` is then a \
build that fails (the older end) and `good=` one that passes (default: the latest) | \
`fix bad=2.12.0` |

Quote values that hold spaces. The reproducer is the ```python block of the comment with the \
command, when it has one (a reduced script), else of the issue; commands inside code blocks \
(fenced or indented), inline code and quotes are ignored.
"""


USAGE = usage()


@dataclass(frozen=True)
class _Invocation:
    """A command as found in a comment, before its words are read (two are refused unread)."""

    line: str  # from `/bisect` or the mention to the end of its line, for messages
    rest: str  # what follows `/bisect` or the mention on that line
    slash: bool  # `/bisect` alone means bisect; the mention alone asks what to do
    more: tuple[str, ...] = ()  # the lines right below that hold only its options


def parse_comment(text: str, handle: str = DEFAULT_HANDLE) -> Command | None:
    """The one command in a comment, None if there is none; UserError (with usage) if it is
    bad or if there are several, as the bot would otherwise act on one and drop the others."""
    handle = handle.lstrip("@")
    if not handle:
        raise ValueError("the bot's handle must not be empty")
    if len(text) > MAX_COMMENT_CHARS:
        return None  # GitHub refuses such comments; do not spend time on one
    mention = re.compile(rf"(?<![\w@/-])@{re.escape(handle)}(?![\w-])", re.IGNORECASE)
    # Fenced blocks and HTML comments are dropped by scan; quotes, indented code and code
    # spans in _invocation.
    found = _invocations(_raw_html_hidden(scan(normalize(text))), mention)
    try:
        if len(found) > 1:
            raise UserError(_several(found))
        return _command(_words(found[0])) if found else None
    except UserError as error:
        raise UserError(f"{error}\n\n{usage(handle)}") from None


def _raw_html_hidden(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """The scanned comment with each line of a raw HTML block (`<pre>` ... `</pre>`) replaced
    by the block's first tag: prose that holds no command, and ends the options of one above
    it."""
    kept: list[Item] = []
    inside = False
    for item in items:
        if isinstance(item, str) and (inside or _RAW_HTML_OPEN.match(item)):
            inside = _RAW_HTML_CLOSE.search(item) is None
            item = "<pre>"
        kept.append(item)
    return tuple(kept)


def _invocations(items: tuple[Item, ...], mention: re.Pattern[str]) -> list[_Invocation]:
    """Every command in a scanned comment, each with the option lines that follow it."""
    found: list[_Invocation] = []
    index = 0
    while index < len(items):
        item = items[index]
        index += 1
        invocation = _invocation(item, mention) if isinstance(item, str) else None
        if invocation is None:
            continue
        more, index = _option_lines(items, index)
        found.append(replace(invocation, more=tuple(more)))
    return found


def _option_lines(items: tuple[Item, ...], index: int) -> tuple[list[str], int]:
    """The lines from `items[index]` on that belong to the command above them, and the index
    after them.

    A line right below the command (or below one of its option lines) belongs to it when it
    holds only options, and also when it only starts as options do (`repeat=3 # flaky`), so
    that _words refuses it: taken as prose, its options would be dropped without a word. Past
    blank lines (a hidden HTML comment reads as one) a line of options alone goes on with the
    command; anything else there is a new paragraph, prose. A fenced block ends the command:
    its lines are not adjacent."""
    more: list[str] = []
    while True:
        after = _past_blank_lines(items, index)
        line = items[after] if after < len(items) else None
        if not isinstance(line, str) or (after > index and _shown(line)):
            return more, index
        if not _continues(line):
            if after == index and _starts_as_options(line):
                more.append(line)
                index += 1
            return more, index
        more.append(line)
        index = after + 1


def _past_blank_lines(items: tuple[Item, ...], index: int) -> int:
    """The index of the first item from `index` on that is not a blank line."""
    while index < len(items) and isinstance(line := items[index], str) and not line.strip(" \t"):
        index += 1
    return index


def _invocation(line: str, mention: re.Pattern[str]) -> _Invocation | None:
    """The command this line gives with `/bisect` or the bot's mention; None if it gives none."""
    if _shown(line):
        return None
    stripped = line.lstrip()
    after = stripped[len(_SLASH) :]
    # Case-blind, as the mention is: a phone's capital makes `/Bisect`. A colon after it is
    # read as after the mention (`@bot: bisect`): `/bisect: good=...` was silently no command.
    if stripped[: len(_SLASH)].lower() == _SLASH and (not after or after[0].isspace()
                                                      or after[0] == ":"):
        return _Invocation(stripped, after.removeprefix(":"), slash=True)
    spans = code_spans(line)
    for found in mention.finditer(line):
        if any(start <= found.start() < end for start, end in spans):
            continue
        rest = line[found.end() :].lstrip(_SPACES + ":,")
        at_start = not line[: found.start()].strip()
        # "thanks @bot!" mid-sentence is no command; a line that opens with the mention is.
        if at_start or rest.lower().split(maxsplit=1)[:1] in ([a.value] for a in Action):
            return _Invocation(line[found.start() :], rest, slash=False)
    return None


def _shown(line: str) -> bool:
    """Whether the line is in a quote or a Markdown indented code block (4 columns of spaces or
    tabs): a command there is shown, not given, as in a fenced block."""
    if line.lstrip().startswith(">"):
        return True
    column = 0
    for char in line:
        if char == " ":
            column += 1
        elif char == "\t":
            column += _CODE_INDENT - column % _CODE_INDENT
        else:
            break
    return column >= _CODE_INDENT


def _continues(line: str) -> bool:
    """Whether a line below a command holds only option words (a command wrapped by hand or
    by a narrow editor, or continued with ` \\` as in a shell); prose below it stays prose."""
    try:
        words = _unwrapped(_split(line))
    except UserError:
        return False  # an apostrophe in prose
    return bool(words) and all(
        _option_word(word) or (index > 0 and _stray_variable(words[index - 1], word))
        for index, word in enumerate(words)
    )


def _starts_as_options(line: str) -> bool:
    """Whether a line opens with an option (`repeat=3 …`) or with one whose `=` is written
    wrong (`good = 2.5.1`, `good:2.5.1`); a bare `fix` opens prose as often ("fix this")."""
    words = _loose_words(line)
    if not words:
        return False
    key, equals, _ = words[0].partition("=")
    opens = bool(equals) and key.lower() in _OPTIONS
    return opens or _meant_option(words, 0, loose=False) is not None


def _loose_words(text: str) -> list[str]:
    """The words of `text` split at spaces alone, for a line that _split may refuse (an
    apostrophe in a remark)."""
    return text.translate(_CURLY_QUOTES).split()


def _option_word(word: str) -> bool:
    """A `key=value` of a known option, or the bare `fix`."""
    key, equals, _ = word.partition("=")
    return key.lower() in _OPTIONS if equals else word.lower() == "fix"


def _stray_variable(previous: str, word: str) -> bool:
    """Whether `word` is a second NAME=VALUE of an unquoted `env=A=1 B=2`."""
    return previous.lower().startswith("env=") and _VARIABLE.match(word) is not None


def _unwrapped(words: list[str]) -> list[str]:
    """The words of one line without a trailing shell-style continuation `\\`."""
    return words[:-1] if words[-1:] == ["\\"] else words


def _words(invocation: _Invocation) -> list[str]:
    """The words of a command, its option lines joined to its line; a line below it that only
    starts as options do is refused (_option_lines)."""
    words = _unwrapped(_split(invocation.rest))
    for line in invocation.more:
        if not _continues(line):
            raise UserError(_mixed(line))
        words += _unwrapped(_split(line))
    return words or (["bisect"] if invocation.slash else [])


def _mixed(line: str) -> str:
    """The refusal of a line below the command that starts as options do but holds other words
    (a remark, a typo): dropping the line would run the bisection without its options, and
    taking them would guess where the options end and the remark begins (`match=a (b)`)."""
    try:
        words = _unwrapped(_split(line))
    except UserError as unclosed:
        if _option_word(_open_quote(line)):
            return str(unclosed)
        words = _loose_words(line)
    index = next((index for index, word in enumerate(words) if not _option_word(word)
                  and not (index and _stray_variable(words[index - 1], word))), 0)
    where = f"The line {_code(_excerpt(line))} below the command"
    hint = _hint(words, index)
    if hint is not None:
        return f"{where}: {hint}"
    return (f"{where} holds words that are not options ({_code(_excerpt(' '.join(words[index:])))})"
            ": I take a line below the command only when it holds nothing but options, so put "
            "a remark on a line of its own, after the options.")


def _several(found: list[_Invocation]) -> str:
    """The refusal of a comment with more than one command: acting on one would drop the rest,
    with their mistakes, unsaid."""
    shown = [_code(_excerpt(invocation.line)) for invocation in found[:3]]
    listed = (f"{', '.join(shown[:-1])} and {shown[-1]}" if len(found) <= 3
              else f"{', '.join(shown)}, …")
    return f"One command per comment: I found {len(found)} ({listed}); post them separately."


def _excerpt(text: str) -> str:
    """The start of a command or word, enough to tell which it is."""
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1].rstrip() + "…"


def _code(text: str) -> str:
    """`text` as Markdown inline code, even when it holds backticks."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _command(words: list[str]) -> Command:
    """Words after the mention -> Command; the first word names the action."""
    if not words:
        raise UserError("Tell me what to do: `bisect`, `help` or `cancel`.")
    verb, options = words[0].lower(), words[1:]
    if verb not in {action.value for action in Action}:
        if _OPTION_WORD.match(verb) or verb == "fix":
            verb, options = "bisect", words  # `/bisect good=...` has no verb
        else:
            fixed = _meant_option(words, 0, loose=True)
            raise UserError(_write_as(fixed) if fixed else
                            f"I do not know the command `{words[0]}`.")
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
    for index, word in enumerate(options):
        key, equals, value = word.partition("=")
        key = key.lower()
        if not equals and key == "fix":
            if find_fix:
                raise UserError("`fix` is given twice.")
            find_fix = True
        elif not equals or key not in _OPTIONS:
            raise UserError(_unknown(options, index))
        elif key in raw:
            raise UserError(f"`{key}=` is given twice.")
        else:
            raw[key] = value
    if ("metric" in raw) != ("threshold" in raw):
        raise UserError("`metric=` and `threshold=` go together: give both or neither.")
    return _one_variant(Command(
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
        hang=_given(raw, "hang", _hang),
        args=_given(raw, "args", split_args),
    ))


def _one_variant(command: Command) -> Command:
    """The command, unless its ends name different variants (`good=…+cpu bad=…+cu126`): a
    bisection tests builds of one, and picking one end's would drop the other's unsaid.
    `variant=` settles it, as it wins over the ends' `+…` (job_plan.settings)."""
    good, bad = (named_variant((end or "").lower()) for end in (command.good, command.bad))
    if command.variant is None and good and bad and good != bad:
        raise UserError(f"`good={command.good}` and `bad={command.bad}` name different variants "
                        f"(`{good}` and `{bad}`), and a bisection tests builds of one: say "
                        "which with `variant=` (it wins over the `+…` of the ends, which then "
                        "name only their versions), or give ends of one variant.")
    return command


def _unknown(words: list[str], index: int) -> str:
    """The message for a word that is no option: a misspelt option, or prose the user meant
    as a remark after the command."""
    word = words[index]
    hint = _hint(words, index)
    if hint is not None:
        return hint
    key, equals, _ = word.partition("=")
    if equals or word.startswith("-"):
        return f"I do not know the option {_code(key.lower() if equals else word)}."
    return (f"{_code(_excerpt(word))} is not an option (they are `key=value`, or `fix`): the "
            "options end the command's line, so words after them go on the next line.")


def _hint(words: list[str], index: int) -> str | None:
    """What to write instead of `words[index]`, a word that is no option, where it is clear
    what was meant: an option with its `=` written wrong, a second variable of an unquoted
    `env=`, a second package of `with=` after a space; None for anything else."""
    word, previous = words[index], words[index - 1] if index else ""
    key, equals, value = previous.partition("=")
    if equals and not value and key.lower() in _OPTIONS:  # `good= 2.5.1`
        return _write_as(f"{key.lower()}={word}")
    fixed = _meant_option(words, index, loose=True)
    if fixed is not None:
        return _write_as(fixed)
    if _stray_variable(previous, word):
        name = word.partition("=")[0]
        return (f"{_code(name)} looks like a second variable of `env=`: quote several "
                'variables, env="A=1 B=2".')
    if key.lower() == "with" and _requirement(word):
        listed = f"{previous.rstrip(',')},{word}"
        return (f"{_code(_excerpt(word))} is not an option: separate the packages of `with=` "
                f"with commas, and no spaces: {_code(listed)}.")
    return None


def _meant_option(words: list[str], index: int, loose: bool) -> str | None:
    """`key=value` for `words[index]`, an option written with `:` or spaced `=` for its `=`
    (`good:2.5.1`, `good = 2.5.1`, `good =2.5.1`); `loose` adds `good: 2.5.1`, for words
    already known to be a command's. A colon's value needs a digit, as versions, dates and
    counts have: "Bad: it hangs" and "Note:this" are prose."""
    key, colon, value = words[index].partition(":")
    following = words[index + 1 : index + 3]
    if key.lower() not in _OPTIONS:
        return None
    key = key.lower()
    if colon:
        value = value or (following[0] if loose and following else "")
        return f"{key}={value}" if any(char.isdigit() for char in value) else None
    if following[:1] == ["="] and len(following) > 1:
        return f"{key}={following[1]}"
    if following and following[0].startswith("=") and following[0] != "=":
        return f"{key}{following[0]}"
    return None


def _write_as(option: str) -> str:
    return (f"write an option as `key=value`, with `=` and no spaces around it: "
            f"{_code(option)}.")


def _requirement(word: str) -> bool:
    """Whether `word` reads as a package requirement (`einops`, `transformers==4.57.1`)."""
    try:
        Requirement(word)
    except InvalidRequirement:
        return False
    return True


def with_form(command: Command, form: Mapping[str, str]) -> Command:
    """The command with what the issue form answered where the command says nothing; an
    answer is checked as the same option in a comment would be."""
    labels = {option: question for question, option in FORM_QUESTIONS.items()}

    def answer(option: str, parse: Callable[[str], _T]) -> _T | None:
        if option not in form or getattr(command, option) or form[option] == FORM_DEFAULT:
            return None  # not asked, left to the defaults, or the command gives it
        try:
            return parse(form[option])
        except UserError as error:
            # A code span: the answer is the reporter's text, which may hold a mention or
            # an issue reference that the bot's reply would otherwise act on.
            raise UserError(f'The form\'s "{labels[option].capitalize()}" '
                            f"({code_span(form[option])}): {error}") from None

    # The form's good version worked before the bug came: looking for its fix, the good end is
    # a build after the failing one, which the form does not ask for.
    good = None if command.find_fix else answer("good", _bound)
    return replace(command, good=good or command.good,
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
        said = f"{code_span(f'{key}={raw[key]}')}: "  # a backtick in it ends no span
        raise UserError(said + (_comma_joined(key, raw[key], parse) or str(error))) from None


def _comma_joined(key: str, value: str, parse: Callable[[str], object]) -> str | None:
    """The message for a value that is right up to a comma that joins it to the next option
    (`good=2.5.1, bad=…`, `good=2.5.1,bad=…`), as in a function call; None otherwise."""
    head, comma, tail = value.partition(",")
    if not comma or (tail and not _option_word(tail)):
        return None
    try:
        parse(head)
    except UserError:
        return None
    written = f"{key}={head} {tail or '…'}"
    return f"separate options with spaces, not commas: {_code(written)}."


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


def _hang(value: str) -> str:
    if value.lower() in ("bad", "skip"):
        return value.lower()
    raise UserError("`hang=` is `bad` (a run that times out is bad) or `skip` (untestable).")


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
    lexer.whitespace = _SPACES
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        raise UserError(_unclosed(_open_quote(text))) from None


def _open_quote(text: str) -> str:
    """The word of `text` in which a quote opens that nothing closes (as _split reads it)."""
    quote, start, opened = "", 0, 0
    for index, char in enumerate(text.translate(_CURLY_QUOTES)):
        if quote:
            quote = "" if char == quote else quote
        elif char in _SPACES:
            start = index + 1
        elif char in "'\"":
            quote, opened = char, start
    return (text[opened:].split(maxsplit=1) or [""])[0]


def _unclosed(word: str) -> str:
    """The message for a quote left open in `word`: in an option's value it wants closing; in
    prose after the options (an apostrophe: it's) it belongs on the next line."""
    key, equals, _ = word.partition("=")
    where = f"A quote is not closed in the command, in {_code(_excerpt(word))}"
    if equals and key.lower() in _OPTIONS:
        return (f"{where}: close it, and put a value that holds a quote or spaces between "
                'quotes of the other kind, like match="it\'s gone" or env="A=1 B=2".')
    return (f"{where}: the options end the command's line, so words after them go on the next "
            'line (and a value with spaces is quoted, env="A=1 B=2").')
