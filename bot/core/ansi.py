"""Terminal escape sequences (colour, line erasing, hyperlinks) taken out of a run's output."""

from __future__ import annotations

import re

# ECMA-48's forms, as terminals and colour libraries write them: a CSI sequence is ESC [, then
# parameter bytes (0x30-0x3F), intermediate bytes (0x20-0x2F) and one final byte (0x40-0x7E):
# colour is `ESC[1;31m`, erasing to the end of the line `ESC[K`. An OSC sequence is ESC ] up
# to BEL or ESC \ (a hyperlink, OSC 8, as rich writes it; a window title); its text is cut
# short so that one left open cannot take the output with it. Any other escape is ESC,
# intermediate bytes and one final byte (`ESC(B`, which `tput sgr0` writes before `ESC[m`).
# Colour comes when a reproducer forces it (FORCE_COLOR, PYTHON_COLORS=1 for Python 3.13's
# tracebacks, pytest --color=yes), whether or not its output is a terminal.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)"
                     r"|[ -/]*[0-~])")


def without_escapes(text: str) -> str:
    """The text as a terminal would show its characters, without colour or cursor codes."""
    return _ESCAPE.sub("", text) if "\x1b" in text else text
