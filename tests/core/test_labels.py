"""The label state machine: one state label at a time; the trigger and foreign labels stay."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.core.bisection import Status
from bot.core.config import Labels
from bot.core.labels import (
    FINAL,
    LabelChange,
    State,
    in_flight,
    label_colors,
    state_for,
    transition,
)

LABELS = Labels()


def test_queued_to_found_removes_queued_and_keeps_others():
    change = transition(["bisect", "bisect: queued", "module: inductor"], State.FOUND, LABELS)
    assert change == LabelChange(add=("bisect: found",), remove=("bisect: queued",))


def test_already_there_adds_nothing_and_case_is_ignored():
    assert transition(["Bisect: Found"], State.FOUND, LABELS) == LabelChange((), ())


def test_none_clears_every_state_label():
    change = transition(["bisect: running", "bisect: failed", "bug"], None, LABELS)
    assert change == LabelChange((), ("bisect: running", "bisect: failed"))


def test_statuses_map_to_final_states():
    assert state_for(Status.FOUND) is State.FOUND
    assert state_for(Status.AMBIGUOUS) is State.FOUND  # narrowed to candidates: look at it
    assert state_for(Status.NOT_REPRODUCED) is State.NOT_REPRODUCED
    assert state_for(Status.NOT_A_REGRESSION) is State.NOT_A_REGRESSION
    assert state_for(Status.CANNOT_TEST) is State.CANNOT_TEST
    assert state_for(None) is State.FAILED
    assert {state_for(s) for s in Status} | {State.FAILED} == set(FINAL)


def test_looking_for_a_fix_still_failing_is_not_not_reproduced():
    assert state_for(Status.NOT_REPRODUCED, find_fix=True) is None  # still fails
    assert state_for(Status.NOT_A_REGRESSION, find_fix=True) is State.NOT_REPRODUCED
    assert state_for(Status.FOUND, find_fix=True) is State.FOUND  # the fix


def test_every_state_has_a_label_with_a_color():
    colors = label_colors(LABELS)
    assert len(colors) == len(State) and all(len(c) == 6 for c in colors.values())


@given(st.lists(st.sampled_from([*label_colors(LABELS), "bisect", "bug"]), unique=True),
       st.sampled_from(list(State)))
def test_after_a_transition_exactly_one_state_label_is_left(current, to):
    change = transition(current, to, LABELS)
    after = (set(current) - set(change.remove)) | set(change.add)
    ours = set(label_colors(LABELS))
    assert after & ours == {getattr(LABELS, to.value)}
    assert {"bisect", "bug"} & set(current) <= after


def test_a_bisection_is_in_flight_while_queued_or_running():
    labels = Labels()
    assert in_flight(["bisect", "Bisect: Queued"], labels)
    assert in_flight(["bisect: running"], labels)
    assert not in_flight(["bisect", "bisect: found"], labels)
    assert not in_flight(["bisect", "bug"], labels)
