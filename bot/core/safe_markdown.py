"""Text a reproducer controls (its output, its failure's message), made safe to put in a
GitHub comment: it pings nobody, links nothing, and cannot close the construct it sits in.

A failure message is the reproducer's to choose, and the bot's comment is posted with a token
that may write to the issue: an `@team` in it would ping a team, a `#123` would leave a
"mentioned this" event on issue 123, a backtick would end the code span around it, and HTML
(`<details open>`, a comment that looks like the bot's marker) would change the comment.
"""

from __future__ import annotations

import re

from bot.core.ansi import without_escapes

_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"#(?=\d)")
# A backtick opens code, brackets a link or an image; a backslash escapes whatever follows.
# (Emphasis marks are left: at worst they change a word's style, and they are common in
# failure messages: `aot_eager_decomp_partition`, `**kwargs`.)
_SPECIAL = re.compile(r"([\\`\[\]])")
# C0 controls but newline and tab (ESC, carriage return, backspace), DEL and C1 controls: in a
# terminal they move the cursor, rewrite lines already printed, or (OSC 52) set the clipboard.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def neutralise(text: str) -> str:
    """Output pasted into a comment must not ping anyone: `@name` gets a zero-width joiner.
    (Inside code, where nothing else is interpreted, that is all there is to do.)"""
    return _MENTION.sub("@\u200d", text)


def fenced(text: str, language: str = "") -> str:
    """A code fence longer than any backtick run inside, so output cannot close it early;
    without terminal colour codes, which GitHub shows as text (`[31m`)."""
    text = without_escapes(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{neutralise(text).rstrip()}\n{fence}"


def code_span(text: str) -> str:
    """Inline code that no backtick inside can end (CommonMark: a longer run of backticks
    around it, padded with a space where it starts or ends with one)."""
    text = neutralise(text.replace("\n", " "))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plain(text: str) -> str:
    """Inline text shown as it is written: code spans and links escaped, HTML as text (its
    entities too, so `&#64;team` stays five characters and a name), issue numbers unlinked."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SPECIAL.sub(r"\\\1", text.replace("\n", " "))
    return _REFERENCE.sub("#\u200d", neutralise(text))


def cell(text: str, width: int = 80) -> str:
    """`plain` text in one cell of a table, cut to `width` characters of the original."""
    short = text if len(text) <= width else text[: width - 1] + "…"
    return plain(short).replace("|", "\\|")


def visible(text: str) -> str:
    """Text for a terminal: every control character but newline and tab written out as
    `\\x1b`, so that a failure's message cannot rewrite what the user sees (an audit made a
    regression found show as "No regression" with cursor moves in a failure's message)."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
