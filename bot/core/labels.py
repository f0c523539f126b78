"""The issue's bisection state as labels: queued -> running -> one final label, one at a time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import Enum

from bot.core.bisection import Status
from bot.core.config import Labels


class State(str, Enum):
    """Where a bisection of an issue stands; the value names the field of `Labels`."""

    QUEUED = "queued"
    RUNNING = "running"
    FOUND = "found"
    NOT_REPRODUCED = "not_reproduced"
    NOT_A_REGRESSION = "not_a_regression"
    CANNOT_TEST = "cannot_test"
    FAILED = "failed"


FINAL = frozenset(State) - {State.QUEUED, State.RUNNING}
# Ambiguous is FOUND: the range was narrowed to a few candidate nightlies, which is what a
# maintainer needs to look at; the comment's headline says "Ambiguous" and lists them.
_BY_STATUS = {
    Status.FOUND: State.FOUND,
    Status.AMBIGUOUS: State.FOUND,
    Status.NOT_REPRODUCED: State.NOT_REPRODUCED,
    Status.NOT_A_REGRESSION: State.NOT_A_REGRESSION,
    Status.CANNOT_TEST: State.CANNOT_TEST,
}
COLORS = {  # hex without '#', as the labels API takes them
    State.QUEUED: "c5def5", State.RUNNING: "fbca04", State.FOUND: "d93f0b",
    State.NOT_REPRODUCED: "0e8a16", State.NOT_A_REGRESSION: "5319e7",
    State.CANNOT_TEST: "bfdadc", State.FAILED: "b60205",
}


@dataclass(frozen=True)
class LabelChange:
    """Labels to add to and remove from the issue to reach a state."""

    add: tuple[str, ...]
    remove: tuple[str, ...]


def state_for(status: Status | None, find_fix: bool = False,
              given_end_wrong: bool = False) -> State | None:
    """The final state of a finished bisection; an unfinished one (None) failed. Looking for
    a fix, the statuses mean other things: a build that passes is the news, so "passes back to
    the oldest" is not reproduced, and "still fails on the newest" has no state label (it is
    neither a regression's answer nor "not reproduced", which invites closing the issue).
    `given_end_wrong` (`BisectResult.given_end_wrong`): a good end given that fails, or a bad
    end given that passes, has none either: a mistake in the request, which "not a
    regression" or "not reproduced" would give as the issue's answer."""
    if status is None:
        return State.FAILED
    if given_end_wrong:
        return None
    if find_fix and status is Status.NOT_REPRODUCED:
        return None
    if find_fix and status is Status.NOT_A_REGRESSION:
        return State.NOT_REPRODUCED
    return _BY_STATUS[status]


def label_for(state: State, labels: Labels) -> str:
    name: str = getattr(labels, state.value)
    return name


def state_labels(labels: Labels) -> dict[str, State]:
    """Every state label (not the trigger) by its lower-cased name."""
    return {label_for(state, labels).lower(): state for state in State}


def in_flight(current: Iterable[str], labels: Labels) -> bool:
    """Whether the issue's state label says its bisection is queued or running (not FINAL)."""
    ours = state_labels(labels)
    return any(ours.get(name.lower()) not in (None, *FINAL) for name in current)


def transition(current: Iterable[str], to: State | None, labels: Labels) -> LabelChange:
    """Reach `to` (None: no state, e.g. cancelled) from the labels the issue carries now.

    Every other state label goes, so the issue never shows two states; the trigger label and
    labels that are not the bot's stay. GitHub compares label names case-insensitively.
    """
    ours = state_labels(labels)
    wanted = label_for(to, labels) if to is not None else None
    have = list(current)
    remove = tuple(name for name in have if name.lower() in ours
                   and (wanted is None or name.lower() != wanted.lower()))
    present = wanted is not None and any(name.lower() == wanted.lower() for name in have)
    add = (wanted,) if wanted is not None and not present else ()
    return LabelChange(add=add, remove=remove)


def label_colors(labels: Labels) -> dict[str, str]:
    """The state labels to create in the repository, with their colors."""
    assert {f.name for f in fields(Labels)} - {"trigger"} == {s.value for s in State}
    return {label_for(state, labels): COLORS[state] for state in State}
