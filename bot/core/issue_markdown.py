"""GitHub Markdown -> fenced code blocks and the prose lines between them, HTML comments removed."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias

# CommonMark 0.31 section 4.5: a fence is 3+ backticks or tildes; a backtick fence's info string
# holds no backtick. Indentation is not limited to 3 spaces here, because fences inside list
# items are indented further, and a 4-space "indented code block" is rare in issues. A fence
# may open on a list item's own line ("1. ```", "- ```"; section 5.2), its content indented by
# the marker's width, which the first group then counts.
_FENCE_OPEN = re.compile(r"([ \t]*(?:(?:[-+*]|[0-9]{1,9}[.)])[ \t]+)*)(`{3,}|~{3,})([^`]*)$")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*$")
_COMMENT_OPEN = "<!--"
_COMMENT_CLOSE = "-->"


@dataclass(frozen=True)
class FencedBlock:
    """One fenced code block, its fence's indentation removed from every line."""

    number: int  # 1-based, in document order, counting only blocks outside HTML comments
    info: str  # first word of the info string, lowercased; "" when the fence has none
    text: str
    terminated: bool  # False: the document ended before a closing fence (CommonMark allows it)


# What a document is made of, in order: a prose line, or a whole fenced block.
Item: TypeAlias = "str | FencedBlock"


def normalize(text: str) -> str:
    """Drop NUL bytes (compile() refuses them) and turn CRLF and lone CR into LF."""
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")


def scan(text: str) -> tuple[Item, ...]:
    """Split normalized text into prose lines and fenced blocks; HTML comments hide both."""
    items: list[Item] = []
    in_comment = False
    opening: re.Match[str] | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if opening is not None:
            if _closes(line, opening):
                items.append(_block(opening, body, terminated=True))
                opening, body = None, []
            else:
                body.append(line)
            continue
        # The issue template's <!-- ... --> comments hold example fences that are not code.
        visible, in_comment = _strip_comments(line, in_comment)
        match = _FENCE_OPEN.match(visible)
        if match is not None:
            opening, in_comment = match, False
        else:
            items.append(visible)
    if opening is not None:
        items.append(_block(opening, body, terminated=False))
    return _numbered(items)


def prose_lines(items: tuple[Item, ...]) -> Iterator[str]:
    """The prose lines of a scanned document, fenced blocks left out."""
    return (item for item in items if isinstance(item, str))


def blocks(items: tuple[Item, ...]) -> tuple[FencedBlock, ...]:
    """The fenced blocks of a scanned document, in order."""
    return tuple(item for item in items if isinstance(item, FencedBlock))


def visible_text(items: tuple[Item, ...]) -> str:
    """The document without its HTML comments and fences: prose and block contents."""
    return "\n".join(item if isinstance(item, str) else item.text for item in items)


def code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each inline code span: a backtick run closed by one of equal length.

    Each opening run looks up the next run of its length in a precomputed table, so a line of
    unmatched backticks costs linear time (CommonMark 0.31 section 6.1).
    """
    runs = [(found.start(), found.end()) for found in re.finditer(r"`+", line)]
    following: list[int | None] = [None] * len(runs)
    latest: dict[int, int] = {}
    for index in range(len(runs) - 1, -1, -1):
        length = runs[index][1] - runs[index][0]
        following[index] = latest.get(length)
        latest[length] = index
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(runs):
        closing = following[index]
        if closing is None:
            index += 1
            continue
        spans.append((runs[index][0], runs[closing][1]))
        index = closing + 1
    return spans


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """Remove the parts of one line inside <!-- -->; say whether a comment stays open."""
    kept: list[str] = []
    position = 0
    while True:
        if in_comment:
            end = line.find(_COMMENT_CLOSE, position)
            if end < 0:
                return "".join(kept), True
            position, in_comment = end + len(_COMMENT_CLOSE), False
        else:
            start = line.find(_COMMENT_OPEN, position)
            if start < 0:
                kept.append(line[position:])
                return "".join(kept), False
            kept.append(line[position:start])
            position, in_comment = start + len(_COMMENT_OPEN), True


def _closes(line: str, opening: re.Match[str]) -> bool:
    """A closing fence uses the opening's character, at least as many times, and nothing else."""
    match = _FENCE_CLOSE.match(line)
    if match is None:
        return False
    fence, opened = match.group(1), opening.group(2)
    return fence[0] == opened[0] and len(fence) >= len(opened)


def _block(opening: re.Match[str], body: list[str], terminated: bool) -> FencedBlock:
    """Build a block (numbered later); strip the fence's indentation, then any common indent."""
    indent = len(opening.group(1))
    lines = [_unindent(line, indent) for line in body]
    words = opening.group(3).strip().split()
    info = words[0].strip("{}.").lower() if words else ""
    text = textwrap.dedent("\n".join(lines)).strip("\n")
    return FencedBlock(number=0, info=info, text=text, terminated=terminated)


def _unindent(line: str, indent: int) -> str:
    """Remove up to `indent` leading spaces or tabs, as CommonMark does for fence content."""
    removed = 0
    while removed < indent and removed < len(line) and line[removed] in " \t":
        removed += 1
    return line[removed:]


def _numbered(items: list[Item]) -> tuple[Item, ...]:
    """Give fenced blocks their 1-based numbers in document order."""
    numbered: list[Item] = []
    count = 0
    for item in items:
        if isinstance(item, FencedBlock):
            count += 1
            item = FencedBlock(count, item.info, item.text, item.terminated)
        numbered.append(item)
    return tuple(numbered)
