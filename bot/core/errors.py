"""The one exception type whose message is meant for a user (a person, not a log)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class UserError(Exception):
    """Bad input from a user: the message says what is wrong and what to do instead.

    Everything that parses outside input (issue text, commands, index pages, payloads) raises
    only this; the CLI prints it as one line and exits non-zero, the GitHub jobs post it.
    """


class NoBuilds(UserError):
    """The index lists no torch builds for the Python and variant asked for; a Python taken
    from the issue then gives way to the default one."""


class MalformedError(UserError, ValueError):
    """A JSON file the bot wrote (plan.json, outcome.json, a checkpoint) came back damaged."""


def malformed(what: str, error: Exception) -> MalformedError:
    """The one-line message for a damaged `what`: which part is wrong, and what to do."""
    detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    return MalformedError(f"{what} is damaged or not written by this version of the bot "
                          f"({type(error).__name__}: {detail}); regenerate it")


# What a damaged document raises inside a parser that trusts its shape.
DAMAGE = (KeyError, TypeError, ValueError, OverflowError, AttributeError, AssertionError)


def parse_or_malformed(what: str, parse: Callable[[T], R], data: T) -> R:
    """`parse(data)`, with any sign of a damaged document turned into MalformedError."""
    try:
        return parse(data)
    except DAMAGE as exc:
        raise malformed(what, exc) from None
