"""Issue Markdown -> the Python reproducer in it, or a UserError that says what to post instead."""

from __future__ import annotations

import keyword
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bot.core import issue_code, issue_facts
from bot.core.errors import UserError
from bot.core.issue_code import Broken, Piece
from bot.core.issue_markdown import (
    FencedBlock,
    Item,
    blocks,
    code_spans,
    normalize,
    prose_lines,
    scan,
    visible_text,
)

MAX_BYTES = 1_000_000  # GitHub caps an issue body at 65,536 characters; a CLI file may be larger
_MAX_BLOCKS = 200  # real issues hold a handful; this bounds the compile() calls
_MAX_HEADINGS = 20
_MAX_TITLE = 256  # GitHub caps an issue title at 256 characters
_MAX_NAMED = 5  # undefined names a refusal lists; the rest are counted
_MIN_SCORE = 3  # see issue_code.score: below this a piece is output or a fragment
_NEAR_BEST = 2
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "pycon", "ipython", "ipython3"})
_SHELL_TAGS = frozenset(
    {"bash", "sh", "shell", "console", "zsh", "sh-session", "powershell", "cmd"}
)
_SHELL_LINE = re.compile(
    r"(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
    r"(?:python\d?(?:\.\d+)?|pip\d?|conda|uv|torchrun|export|cd|git|nvidia-smi)(?:\s|$)(?!\s*=)"
)
_CODE_HEADING = re.compile(
    r"repro|minimal (?:example|code|script)|example|snippet|code|describe the bug", re.IGNORECASE
)
_STOP_HEADING = re.compile(
    r"(?:versions?|environment|errors?|traceback|output|expected|actual|additional|logs?|cc)\b",
    re.IGNORECASE,
)
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9 '/-]*")
_CODE_START = re.compile(
    r"(?:import\s+\w|from\s+[\w.]+\s+import\s|def\s+\w|class\s+\w|@\w|async\s+def\s|>>>"
    r"|[A-Za-z_][\w.]*\s*(?:=[^=]|\())"
)
_HOW = (
    "put a complete script that imports torch and shows the problem when run as "
    "`python repro.py` in a fenced ```python block"
)


@dataclass(frozen=True)
class Reproducer:
    """The script from an issue and what the issue says about how it was run."""

    script: str
    needs_cuda: bool
    reported_version: str | None  # the torch version the reporter names
    reported_python: str | None  # "X.Y"
    imports: tuple[str, ...]  # pip names of third-party packages, not torch or its companions
    source: str  # where in the text the script came from
    companions: tuple[str, ...] = ()  # torchvision etc.: must come from torch's nightly index
    reported_good: str | None = None  # a torch version the prose says worked
    good_said: str | None = None  # the words that say so ("works in torch 2.12.0")
    form: tuple[tuple[str, str], ...] = ()  # the issue form's answers: (("good", "2.12.0"), ...)
    # The variables the issue runs it with (`TORCHINDUCTOR_FREEZING=1 python repro.py`).
    env: tuple[tuple[str, str], ...] = ()
    # The processes it runs on with torchrun (`--nproc_per_node=2`: "2"), or None for python.
    processes: str | None = None
    # No count is named, but the script reads torchrun's variables: processes is a guess.
    processes_guessed: bool = False
    reported_platform: str | None = None  # "Windows" or "macOS", from collect_env's OS line
    # The script's own arguments, as the issue runs it (`python repro.py --size 8`): its argv.
    args: tuple[str, ...] = ()
    # Why the arguments an issue's command gives were not used ($VAR, two different sets), in
    # Markdown: the queued comment, the report and `bisect` say so.
    args_refused: str | None = None

    @property
    def installs(self) -> tuple[str, ...]:
        """What environments get beside the build for this script: its third-party imports,
        and the companions (torchvision's nightly whose pin matches each build, from torch's
        index)."""
        return (*self.imports, *self.companions)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (the plan.json contract between jobs)."""
        return {
            "script": self.script,
            "needs_cuda": self.needs_cuda,
            "reported_version": self.reported_version,
            "reported_python": self.reported_python,
            "imports": list(self.imports),
            "source": self.source,
            "companions": list(self.companions),
            "reported_good": self.reported_good,
            "good_said": self.good_said,
            "form": dict(self.form),
            "env": dict(self.env),
            "processes": self.processes,
            "processes_guessed": self.processes_guessed,
            "reported_platform": self.reported_platform,
            "args": list(self.args),
            "args_refused": self.args_refused,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Reproducer:
        """The inverse of to_dict; raises ValueError on a malformed dict (ours, not a user's)."""
        script, source, cuda = data.get("script"), data.get("source"), data.get("needs_cuda")
        if not (isinstance(script, str) and isinstance(source, str) and isinstance(cuda, bool)):
            raise ValueError("reproducer dict needs str script, str source, bool needs_cuda")
        return cls(
            script=script,
            needs_cuda=cuda,
            reported_version=_optional_str(data.get("reported_version")),
            reported_python=_optional_str(data.get("reported_python")),
            imports=_strings(data.get("imports", [])),
            source=source,
            companions=_strings(data.get("companions", [])),
            reported_good=_optional_str(data.get("reported_good")),
            good_said=_optional_str(data.get("good_said")),
            form=_answers(data.get("form", {})),
            env=_answers(data.get("env", {})),
            processes=_optional_str(data.get("processes")),
            processes_guessed=data.get("processes_guessed") is True,
            reported_platform=_optional_str(data.get("reported_platform")),
            args=_strings(data.get("args", [])),
            args_refused=_optional_str(data.get("args_refused")),
        )


def extract_reproducer(markdown: str, title: str = "") -> Reproducer:
    """Find the reproducer in an issue body; raise UserError saying what is missing. The title
    is read for what the reporter says worked ("... (works in 2.12)"), after the body."""
    size = len(markdown.encode("utf-8", "surrogatepass")) if len(markdown) <= MAX_BYTES else -1
    if not 0 <= size <= MAX_BYTES:
        raise UserError(
            "This issue is larger than 1 MB, more than I read: "
            f"{_HOW}, and attach logs as files instead of pasting them."
        )
    items = scan(normalize(markdown))
    leads = _leads(items)
    readings = [_read_block(block, leads.get(block.number, ""))
                for block in blocks(items)[:_MAX_BLOCKS]]
    pieces = [reading for reading in readings if isinstance(reading, Piece)]
    chosen = _choose(pieces) or _from_prose(items) or _inline_command(items)
    if chosen is None:
        raise UserError(_explain(readings, visible_text(items)))
    found = _reproducer(chosen, visible_text(items), "\n".join(prose_lines(items)), title)
    scripts = sum(piece.mentions_torch for piece in pieces)
    commands = issue_facts.command_lines(
        prose_lines(items), [block.text for block in blocks(items)[:_MAX_BLOCKS]
                             if block.info not in _PYTHON_TAGS])
    args, refused = issue_facts.reported_args(
        commands, lambda name: scripts <= 1 or _named(chosen, name))
    return replace(found, args=args, args_refused=refused)


def _named(piece: Piece, name: str) -> bool:
    """Whether the issue gives `piece` the file name `name`: the line that introduces it
    ("Save this as repro.py:", "Run `python repro.py --size 8`:") or its first line, a
    comment ("# repro.py") says so."""
    first = next((line.strip() for line in piece.code.split("\n") if line.strip()), "")
    said = piece.lead + ("\n" + first if first.startswith("#") else "")
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", said) is not None


def _leads(items: tuple[Item, ...]) -> dict[int, str]:
    """Each fenced block's number -> the last prose line before it, if any since the block
    before ("To reproduce:", "This works:")."""
    leads: dict[int, str] = {}
    last = ""
    for item in items:
        if isinstance(item, FencedBlock):
            if last:
                leads[item.number] = last
            last = ""
        elif item.strip():
            last = item.strip()[:300]
    return leads


def _read_block(block: FencedBlock, lead: str = "") -> Piece | tuple[str, str]:
    """A fenced block as code, or (what it is instead, where) for the error message."""
    notes = [block.info or "no language tag"] + ([] if block.terminated else ["unterminated"])
    where = f"fenced block {block.number} ({', '.join(notes)})"
    first = next((line.lstrip() for line in block.text.split("\n") if line.strip()), "")
    tagged = block.info in _PYTHON_TAGS
    looks_like_shell = _SHELL_LINE.match(first) is not None and not tagged
    if block.info in _SHELL_TAGS or looks_like_shell or first.startswith("$ "):
        for script in issue_code.python_c_scripts(block.text):
            piece = _code_piece(script, (block.number,), f"python -c command in {where}", False,
                                lead=lead)
            if isinstance(piece, Piece):
                return piece
        return ("shell", where)
    text = issue_code.cut_traceback(block.text)
    if not text.strip():
        return ("traceback", where)
    code, prompted = issue_code.strip_prompts(text)
    if prompted:
        where = f"fenced block {block.number} ({', '.join([*notes, 'prompts removed'])})"
    piece = _code_piece(code, (block.number,), where, tagged, cut=not block.terminated,
                        lead=lead)
    if isinstance(piece, Broken):
        looks_like_code = tagged or re.search(r"^\s*(?:import|from)\s+\w", code, re.MULTILINE)
        detail = f"{where} does not compile (line {piece.line}: {piece.message})"
        return ("broken", detail) if looks_like_code else ("other", where)
    return piece


def _code_piece(
    code: str, numbers: tuple[int, ...], where: str, tagged: bool, cut: bool = False,
    lead: str = "",
) -> Piece | Broken:
    """Parse code (cutting at syntax errors when its end is unknown) into a Piece."""
    if cut:
        result = issue_code.parse_prefix(code)
        if isinstance(result, Broken):
            return result
        code, tree = result
    else:
        parsed = issue_code.parse(code)
        if isinstance(parsed, Broken):
            return parsed
        tree = parsed
    return issue_code.make_piece(numbers, where, code, tree, tagged, lead)


def _choose(pieces: list[Piece]) -> Piece | None:
    """The first piece that mentions torch and scores near the best, joined with its parts.

    "Near" because issues often hold a smallest repro and then variants of it: the first one
    is the one the reporter leads with, unless its prose introduces it as what works, or it
    checks nothing and a later one does.
    """
    scored = [(issue_code.score(piece), index) for index, piece in enumerate(pieces)]
    scored = [(score, index) for score, index in scored if pieces[index].mentions_torch]
    failing = [(score, index) for score, index in scored
               if score >= _MIN_SCORE and not pieces[index].baseline]
    scored = failing or scored
    best = max((score for score, _ in scored), default=0)
    if best < _MIN_SCORE:
        return None
    near = sorted(index for score, index in scored if score >= best - _NEAR_BEST)
    # A block that checks its result (assert, raise, exit) over one that only prints: a
    # print-only setup or a version report ahead of the script passes on every build.
    checking = [index for index in near if issue_code.checks_itself(pieces[index].code)]
    return issue_code.join(pieces, checking[0] if checking else near[0])


def _inline_command(items: tuple[Item, ...]) -> Piece | None:
    """The script of a `python -c '...'` command in a code span of the prose, for an issue
    whose whole reproducer is one ("`python -c 'import torch'` segfaults")."""
    for item in items:
        if not isinstance(item, str) or "-c" not in item:
            continue
        for start, end in code_spans(item)[:20]:
            for script in issue_code.python_c_scripts(item[start:end].strip("`").strip()):
                piece = _code_piece(script, (), "python -c command in the issue text", False)
                if isinstance(piece, Piece):
                    return piece
    return None


def _from_prose(items: tuple[Item, ...]) -> Piece | None:
    """Code whose fences were lost: after a heading like "Reproducer", else anywhere in prose."""
    headings = [
        (index, text, level)
        for index, item in enumerate(items)
        if isinstance(item, str)
        for text, level in [_heading(item)]
        if text and _CODE_HEADING.search(text)
    ]
    for index, text, level in headings[:_MAX_HEADINGS]:
        piece = _prose_piece(
            _section(items, index + 1, level), f"unfenced code after heading '{text}'"
        )
        if piece is not None:
            return piece
    if any(isinstance(item, FencedBlock) for item in items):
        return None
    return _prose_piece(
        [item for item in items if isinstance(item, str)], "unfenced code in the issue text"
    )


def _heading(line: str) -> tuple[str, int]:
    """(heading text, level) for an ATX, bold or "Label:" heading line; ("", 0) otherwise.

    Plain string operations only, so a hostile line cannot make a regex backtrack.
    """
    stripped = line.strip()
    if len(stripped) > 120:
        return "", 0
    hashes = len(stripped) - len(stripped.lstrip("#"))
    if 1 <= hashes <= 6 and stripped[hashes : hashes + 1] in (" ", "\t"):
        return stripped.strip("# \t"), hashes
    if stripped.startswith("**") and stripped.rstrip(":").endswith("**") and len(stripped) > 4:
        return stripped.rstrip(":").strip("* "), 7
    label = stripped[:-1].strip()
    # "To Reproduce:" is a heading; "def example(n):" and "else:" are code that lost its fence.
    if stripped.endswith(":") and len(label) <= 40 and _LABEL.fullmatch(label):
        return ("", 0) if keyword.iskeyword(label.split()[0]) else (label, 7)
    return "", 0


def _section(items: tuple[Item, ...], start: int, level: int) -> list[str]:
    """Prose lines from start to the next fence or section heading."""
    lines: list[str] = []
    for item in items[start:]:
        if isinstance(item, FencedBlock):
            break
        text, item_level = _heading(item)
        # "# comment" lines are code whose fences were lost: "#" never ends a section, "##"
        # and deeper do up to the level of the section's own heading.
        if 2 <= item_level <= min(level, 6) or (text and _STOP_HEADING.match(text)):
            break
        lines.append(item)
    return lines


def _prose_piece(lines: list[str], where: str) -> Piece | None:
    """The code in lines of prose: from a line that starts like code to a syntax error."""
    starts = [index for index, line in enumerate(lines) if _CODE_START.match(line.lstrip())]
    for start in starts[:5]:
        text = textwrap.dedent("\n".join(lines[start:])).strip("\n")
        code, _ = issue_code.strip_prompts(text)
        piece = _code_piece(code, (), where, False, cut=True)
        if isinstance(piece, Piece) and piece.mentions_torch:
            return piece
    return None


# A script kept elsewhere: a gist, a .py file in a repository, Colab. The bot runs only what
# the issue itself holds (a link's target can change after the bisection is asked for).
# Not a link into torch's own package (`github.com/pytorch/pytorch/blob/<sha>/torch/...`):
# that is where a report points at the code it suspects, not its script (a benchmark script
# of the repository, `benchmarks/dynamo/...`, is one).
_LINKED_SCRIPT = re.compile(
    r"https?://(?:gist\.github\.com/\S+|colab\.research\.google\.com/\S+"
    r"|(?:github\.com|raw\.githubusercontent\.com)/(?!pytorch/pytorch/blob/[^/\s]+/torch/)\S+?\.py\b)")


# A file attached to the issue (GitHub stores it under user-attachments, or files/ before).
_ATTACHED_FILE = re.compile(
    r"https?://github\.com/(?:user-attachments/files|[\w.-]+/[\w.-]+/files)/\d+/"
    r"[^\s)\]\"'>]+")


def _explain(readings: list[Piece | tuple[str, str]], text: str = "") -> str:
    """The most useful UserError message for an issue without a usable script."""
    # A file named like a log or an output is not the script.
    attached = [name for found in _ATTACHED_FILE.finditer(text[:MAX_BYTES])
                for name in [found[0].rsplit("/", 1)[-1][:80]]
                if not re.search(r"log|output|trace|stderr|stdout", name, re.IGNORECASE)]
    if attached and not any(isinstance(reading, Piece) for reading in readings):
        return (f"The reproducer seems to be an attached file ({attached[0]}), and I run only "
                f"code written in the issue itself: {_HOW}.")
    linked = _LINKED_SCRIPT.search(text[:MAX_BYTES])
    if linked and not any(isinstance(reading, Piece) for reading in readings):
        return (f"The reproducer seems to be behind a link ({linked[0][:120]}), and I run only "
                f"what the issue itself holds: {_HOW}.")
    found = {reading[0]: reading[1] for reading in reversed(readings) if isinstance(reading, tuple)}
    if "broken" in found:
        return (
            f"I found Python code, but {found['broken']}: paste the script exactly as you run "
            "it, without its output, in a fenced ```python block."
        )
    if any(isinstance(reading, Piece) for reading in readings):
        return f"The Python code in this issue never uses torch, so I cannot bisect it: {_HOW}."
    if "traceback" in found:
        return f"I found a traceback but not the script that produces it: {_HOW}."
    if "shell" in found:
        return f"I found only shell commands, not the Python they run: {_HOW}."
    return f"I could not find a Python reproducer in this issue: {_HOW}."


def extract_from_comment(comment: str, body: str, title: str = "") -> Reproducer | None:
    """The reproducer in the comment that asked for a bisection (a triager's reduced script),
    or None when it holds none. What the issue says (the versions, the Python, what worked,
    the form's answers) comes from its body and title where the comment says nothing."""
    try:
        found = extract_reproducer(comment)
    except UserError as problem:
        # Python in the comment that cannot be used is the triager's to mend, not to be
        # swapped silently for the issue's script; a traceback or a shell line is not code.
        readings = [_read_block(block) for block in blocks(scan(normalize(comment)))]
        if any(isinstance(reading, Piece) or reading[0] == "broken" for reading in readings):
            raise UserError(
                f"The script in the comment that asked cannot be run: {problem}") from None
        return None
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return found
    items = scan(normalize(body))
    text, prose = visible_text(items), "\n".join(prose_lines(items))
    good = _good(prose, title)
    found = replace(
        found,
        reported_version=found.reported_version or _reported_version(text, prose, good),
        reported_python=found.reported_python or issue_facts.reported_python(text, prose),
        reported_platform=found.reported_platform or issue_facts.reported_platform(text),
        reported_good=found.reported_good or (good[0] if good else None),
        good_said=found.good_said or (good[1] if good else None),
        form=found.form or tuple(issue_facts.form_answers(prose).items()),
        env=found.env or issue_facts.reported_env(text),
    )
    # A count the issue names wins over one guessed from the comment's script.
    named = issue_facts.reported_processes(text)
    if named is not None and (found.processes is None or found.processes_guessed):
        found = replace(found, processes=named, processes_guessed=False)
    return found


def _good(prose: str, title: str) -> tuple[str, str] | None:
    """What the reporter says worked: the body's prose first, then the title."""
    return issue_facts.reported_good(prose) or issue_facts.reported_good(title[:_MAX_TITLE])


def _reported_version(text: str, prose: str, good: tuple[str, str] | None) -> str | None:
    """The torch the reporter ran: a version report's, else a nightly the prose names that is
    not the one it says worked."""
    return (issue_facts.reported_torch_version(text)
            or issue_facts.nightly_in_prose(prose, good[0] if good else None))


def _reproducer(piece: Piece, text: str, prose: str, title: str = "") -> Reproducer:
    """The Reproducer for a chosen piece; the versions come from the whole visible text, what
    the reporter says worked from the prose alone (not from code or logs)."""
    defined = issue_code.never_runs(piece.tree)
    if defined:
        names = ", ".join(f"`{name}`" for name in defined[:3]) + (", ..." if defined[3:] else "")
        raise UserError(
            f"The script I found ({piece.where}) defines {names} but calls nothing, so it "
            "would pass on every build: post the lines that call it and check the result "
            "too (an `assert`, or `torch.testing.assert_close`)"
            + (", and its `import torch`" if "torch" in piece.free else "")
            + ", so that the whole script runs as `python repro.py`.")
    if "torch" in piece.free:
        raise UserError(_no_import_of_torch(piece))
    if issue_facts.needs_mps(piece.tree):
        raise UserError(
            f"The script I found ({piece.where}) runs on Apple's MPS device, and I test "
            "Linux builds of torch, which have no MPS: every build would fail alike. If the "
            "bug also shows on the CPU or on CUDA, post a script that runs there, in a "
            "fenced ```python block.")
    packages, companions = issue_facts.third_party_imports(piece.nodes)
    good = _good(prose, title)
    # The count the issue names, else a guess where the script expects torchrun's variables.
    named = issue_facts.reported_processes(text)
    guessed = named is None and issue_facts.needs_launcher(piece.nodes)
    return Reproducer(
        script=piece.code.strip("\n") + "\n",
        needs_cuda=issue_facts.needs_cuda(piece.nodes),
        reported_version=_reported_version(text, prose, good),
        reported_python=issue_facts.reported_python(text, prose),
        imports=packages,
        source=piece.where,
        companions=companions,
        reported_good=good[0] if good else None,
        good_said=good[1] if good else None,
        form=tuple(issue_facts.form_answers(prose).items()),
        env=issue_facts.reported_env(text),
        processes=named or (issue_facts.GUESSED_PROCESSES if guessed else None),
        processes_guessed=guessed,
        reported_platform=issue_facts.reported_platform(text),
    )


def _no_import_of_torch(piece: Piece) -> str:
    """Why a script that uses torch without importing it is refused, naming every name it
    uses and never defines (#93196's also used `models` and `time`: only torch was named)."""
    missing = piece.undefined
    if len(missing) == 1:
        return (f"The script I found ({piece.where}) uses torch but never imports it: add "
                "`import torch` at its top, so it runs as `python repro.py`.")
    shown = [f"`{name}`" for name in missing[:_MAX_NAMED]]
    more = len(missing) - len(shown)
    names = (", ".join(shown) + f" and {more} more" if more
             else ", ".join(shown[:-1]) + f" and {shown[-1]}")
    return (f"The script I found ({piece.where}) uses {names} but never imports or defines "
            "them: add `import torch`, and the imports or definitions of the others, at its "
            "top, so it runs as `python repro.py`.")


def _optional_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected a string or null, got {value!r}")


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(str(item) for item in value)
    raise ValueError(f"expected a list of strings, got {value!r}")


def _answers(value: object) -> tuple[tuple[str, str], ...]:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return tuple((str(key), str(answer)) for key, answer in value.items())
    raise ValueError(f"expected a mapping of strings, got {value!r}")
