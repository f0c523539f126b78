"""Table tests and properties of the bisection state machine."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core import bisection
from bot.core.bisection import Bisection, Status
from bot.core.verdicts import Verdict

LETTER = {"G": Verdict.GOOD, "B": Verdict.BAD, "S": Verdict.SKIP}


def drive(pattern: str, good_index: int | None = 0, width: int = 1, find_fix: bool = False):
    """Run a bisection where build i behaves as pattern[i]; returns (outcome, probes, rounds)."""
    state = Bisection(len(pattern), good_index, find_fix)
    probed: list[int] = []
    rounds = 0
    while state.outcome is None:
        indices = state.next_probes(width)
        assert indices, "no outcome yet, so there must be something to probe"
        assert len(indices) <= width and len(set(indices)) == len(indices)
        rounds += 1
        for index in indices:
            assert index not in probed, f"build {index} probed twice"
            probed.append(index)
            state = state.record(index, LETTER[pattern[index]])
    return state.outcome, probed, rounds


@pytest.mark.parametrize(
    ("pattern", "good_index", "status", "before", "after", "candidates"),
    [
        ("GGGGGBBBBB", 0, Status.FOUND, 4, 5, ()),
        ("GB", 0, Status.FOUND, 0, 1, ()),
        ("GGSSBB", 0, Status.AMBIGUOUS, 1, 4, (2, 3, 4)),
        ("GSBB", 0, Status.AMBIGUOUS, 0, 2, (1, 2)),
        ("GGGGGG", 0, Status.NOT_REPRODUCED, 5, None, ()),
        ("GGGGGS", 0, Status.NOT_REPRODUCED, 4, None, ()),
        ("BBBBBB", 0, Status.NOT_A_REGRESSION, None, 0, ()),
        ("BBBBBB", None, Status.NOT_A_REGRESSION, None, 0, ()),
        ("SBBBBB", None, Status.NOT_A_REGRESSION, None, 1, ()),
        ("GGGSSS", 0, Status.CANNOT_TEST, None, None, ()),
        ("SSSS", None, Status.CANNOT_TEST, None, None, ()),
        ("SGGGBB", 0, Status.FOUND, 3, 4, ()),
        ("G" * 20 + "B" * 10, None, Status.FOUND, 19, 20, ()),
        ("GGGGSBBB", None, Status.AMBIGUOUS, 3, 5, (4, 5)),
        # The good end given and every build up to the first failure cannot be tested: the
        # boundary is among them (it used to walk below the good end and say "not a
        # regression", as if those builds had failed).
        ("SSSSSBBB", 0, Status.AMBIGUOUS, 0, 5, (1, 2, 3, 4, 5)),
        ("GSSSSSBBB", 1, Status.AMBIGUOUS, 1, 6, (2, 3, 4, 5, 6)),
        # Without a good end, a walk back through untestable builds stops after six of them.
        ("S" * 40 + "B" * 4, None, Status.CANNOT_TEST, None, 41, ()),
    ],
)
def test_outcomes(pattern, good_index, status, before, after, candidates):
    outcome, _, _ = drive(pattern, good_index)
    assert (outcome.status, outcome.before, outcome.after, outcome.candidates) == (
        status, before, after, candidates,
    )


def test_an_answer_whose_good_end_fails_too_says_so():
    outcome, _, _ = drive("BBBBBB", 0)
    assert (outcome.status, outcome.after, outcome.note) == (
        Status.NOT_A_REGRESSION, 0, "the good end given fails too")
    assert drive("BBBBBB", None)[0].note == "fails back to the oldest build"
    assert drive("SBBBBB", 0)[0].note != "the good end given fails too"


def test_bad_end_is_checked_first_and_the_good_end_only_when_it_decides():
    state = Bisection(10, 0)
    assert state.next_probes() == (9,)
    state = state.record(9, Verdict.BAD)
    assert state.next_probes() == (4,)  # split as if build 0 were good
    _, probed, _ = drive("GGGGGGBBBB")
    assert 0 not in probed  # a good build after it made its verdict irrelevant
    outcome, probed, _ = drive("GBBBBBBBBB")
    assert probed[-1] == 0 and (outcome.before, outcome.after) == (0, 1)
    outcome, probed, _ = drive("BBBBBBBBBB", good_index=3)
    assert 3 in probed  # every build after the good bound failed: now it decides
    assert (outcome.status, outcome.after) == (Status.NOT_A_REGRESSION, 0)  # it failed too


def test_exponential_search_doubles_the_step_back_from_the_bad_end():
    _, probed, _ = drive("G" * 40 + "B" * 24, good_index=None)
    assert probed[:6] == [63, 62, 61, 59, 55, 47]


def test_find_fix_mode_looks_for_the_first_passing_build():
    outcome, _, _ = drive("BBBBGGG", find_fix=True)
    assert (outcome.status, outcome.before, outcome.after) == (Status.FOUND, 3, 4)
    outcome, _, _ = drive("BBBBBBB", find_fix=True)
    assert outcome.status is Status.NOT_REPRODUCED  # still failing on the newest


def test_a_round_of_width_k_holds_the_bad_end_and_splits():
    state = Bisection(64, 0)
    first = state.next_probes(4)
    # The bad end, then three splits into parts of 13, 16, 17 and 17 of the 63 candidates:
    # each part takes two more rounds of 4 probes at most (5 x 5 = 25).
    assert first == (63, 13, 29, 46)
    outcome, _, rounds = drive("G" * 30 + "B" * 34, width=8)
    assert outcome.after == 30 and rounds <= 3


def _rounds_at_every_boundary(n: int, width: int) -> list[int]:
    rounds = []
    for boundary in range(1, n):
        outcome, _, taken = drive("G" * boundary + "B" * (n - boundary), width=width)
        assert outcome.after == boundary
        rounds.append(taken)
    return rounds


@pytest.mark.parametrize("n", [16, 30, 64, 100])
@pytest.mark.parametrize("width", [2, 3, 4, 8])
def test_planned_splits_are_never_slower_than_equal_parts(n, width, monkeypatch):
    planned = _rounds_at_every_boundary(n, width)
    monkeypatch.setattr(bisection, "PLANNED_SPLIT_MAX", 0)  # every interval in equal parts
    equal = _rounds_at_every_boundary(n, width)
    assert max(planned) <= max(equal) and sum(planned) <= sum(equal)


def test_three_workers_settle_64_nightlies_in_fewer_rounds_on_average():
    # Equal parts: 3 rounds at 32 of the 63 boundaries and 4 at 31 (3.49 on average). The
    # planned splits leave 21 boundaries to a fourth round (3.33).
    rounds = _rounds_at_every_boundary(64, 3)
    assert max(rounds) == 4 and rounds.count(4) == 21 and rounds.count(3) == 42


def test_illegal_input_raises_and_changes_nothing():
    state = Bisection(5, 0).record(4, Verdict.BAD)
    with pytest.raises(ValueError):
        state.record(4, Verdict.GOOD)
    with pytest.raises(ValueError):
        state.record(7, Verdict.GOOD)
    assert state.verdicts == {4: Verdict.BAD}
    with pytest.raises(ValueError):
        Bisection(0)
    with pytest.raises(ValueError):
        Bisection(3, good_index=5)


def test_json_round_trip_resumes_where_it_stopped():
    state = Bisection(30, None).record(29, Verdict.BAD).record(28, Verdict.BAD)
    restored = Bisection.from_json(state.to_json())
    assert restored == state
    assert restored.next_probes() == state.next_probes()


@st.composite
def regressions(draw):
    n = draw(st.integers(min_value=2, max_value=80))
    boundary = draw(st.integers(min_value=1, max_value=n - 1))  # first bad index
    skips = draw(st.sets(st.integers(min_value=0, max_value=n - 1)))
    pattern = "".join(
        "S" if i in skips else ("G" if i < boundary else "B") for i in range(n)
    )
    return pattern, boundary


@settings(max_examples=300, deadline=None)
@given(regressions(), st.integers(min_value=1, max_value=6), st.booleans())
def test_candidates_always_contain_the_true_boundary(case, width, good_given):
    pattern, boundary = case
    outcome, _, _ = drive(pattern, 0 if good_given else None, width)
    check_outcome(pattern, boundary, outcome)


def check_outcome(pattern: str, boundary: int, outcome) -> None:
    """What any search over `pattern` may answer: the boundary, or candidates holding it."""
    if outcome.status is Status.FOUND:
        assert outcome.after == boundary
    elif outcome.status is Status.AMBIGUOUS:
        assert boundary in outcome.candidates
        assert all(pattern[i] in "SB" for i in outcome.candidates)
    elif outcome.status is Status.NOT_A_REGRESSION:
        assert "G" not in pattern  # every good build was untestable
    elif outcome.status is Status.NOT_REPRODUCED:
        assert "B" not in pattern  # every bad build was untestable
    elif outcome.after is not None:  # failing from `after` on, older builds untestable
        assert outcome.status is Status.CANNOT_TEST
        assert pattern[outcome.after] == "B" and boundary <= outcome.after
    else:
        assert outcome.status is Status.CANNOT_TEST
        assert pattern.endswith("SSS") or set(pattern) == {"S"}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=2, max_value=200), st.data())
def test_without_skips_probes_stay_within_log2_plus_two(n, data):
    boundary = data.draw(st.integers(min_value=1, max_value=n - 1))
    outcome, probed, _ = drive("G" * boundary + "B" * (n - boundary))
    assert outcome.status is Status.FOUND and outcome.after == boundary
    assert len(probed) <= math.ceil(math.log2(n)) + 2


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=3, max_value=200), st.data())
def test_the_good_bound_costs_a_probe_only_when_the_boundary_is_right_after_it(n, data):
    boundary = data.draw(st.integers(min_value=2, max_value=n - 1))
    outcome, probed, _ = drive("G" * boundary + "B" * (n - boundary))
    assert outcome.after == boundary and 0 not in probed
    assert len(probed) <= 1 + math.ceil(math.log2(n - 1))


@pytest.mark.parametrize("boundary", range(1, 60))
def test_eight_runners_settle_sixty_nightlies_in_two_rounds(boundary):
    outcome, _, rounds = drive("G" * boundary + "B" * (60 - boundary), width=8)
    assert outcome.after == boundary and rounds == 2


def test_a_probe_outside_what_is_left_is_not_needed():
    state = Bisection(17, 0).record(0, Verdict.GOOD).record(16, Verdict.BAD)
    first, middle, last = state.next_probes(3)
    assert first < middle < last and all(state.needs(i) for i in (first, middle, last))
    after_bad = state.record(middle, Verdict.BAD)  # the boundary is at or before the middle
    assert after_bad.needs(first) and not after_bad.needs(last) and not after_bad.needs(middle)
    after_good = state.record(middle, Verdict.GOOD)
    assert after_good.needs(last) and not after_good.needs(first)
    done = after_bad.record(first, Verdict.GOOD)
    assert done.needs(first + 1) and not done.needs(0)


def test_while_the_bad_end_is_open_every_probe_is_needed():
    state = Bisection(64, 0)
    newest, *splits = state.next_probes(3)
    assert newest == 63
    # The newest build's own verdict decides what failing means: nothing is moot before it.
    after = state.record(splits[0], Verdict.BAD)
    assert after.needs(newest) and after.needs(splits[1])
    assert Bisection(5, 0).record(0, Verdict.GOOD).record(4, Verdict.GOOD).outcome is not None
    assert not Bisection(5, 0).record(0, Verdict.GOOD).record(4, Verdict.GOOD).needs(2)



def test_the_good_bound_is_needed_while_every_build_after_it_fails():
    state = Bisection(4, 0).record(3, Verdict.BAD)
    assert sorted(state.next_probes(3)) == [0, 1, 2]  # the good bound runs with the rest
    assert state.record(2, Verdict.BAD).needs(0)  # if build 1 fails too, build 0 decides
    assert state.record(1, Verdict.BAD).record(2, Verdict.BAD).needs(0)
    assert not state.record(1, Verdict.GOOD).needs(0)


def drive_stopping(pattern: str, good_index: int | None, width: int, order: st.DataObject):
    """As `drive`, but a round's verdicts come in in a drawn order, and a probe still running
    that the verdicts in so far have made moot is stopped: it is never recorded."""
    state = Bisection(len(pattern), good_index)
    probed: list[int] = []
    stopped = 0
    while state.outcome is None:
        running = list(state.next_probes(width))
        assert running
        while running:
            index = running.pop(order.draw(st.integers(0, len(running) - 1)))
            probed.append(index)
            state = state.record(index, LETTER[pattern[index]])
            moot = [i for i in running if not state.needs(i)]
            running = [i for i in running if i not in moot]
            stopped += len(moot)
    return state.outcome, probed, stopped


def drive_rolling(pattern: str, good_index: int | None, width: int, order: st.DataObject,
                  made: bool = False):
    """As the engine runs: `width` probes at a time; a verdict comes in (which one is drawn),
    moot probes are stopped, and free workers start `next_probes(running=...)` at once.
    With `made`, some builds (drawn anew each time) have their environments made."""
    state = Bisection(len(pattern), good_index)
    probed: list[int] = []
    running: list[int] = []
    while state.outcome is None:
        ready = order.draw(st.frozensets(st.integers(0, len(pattern) - 1))) if made else ()
        new = state.next_probes(width, running, ready)
        assert not set(new) & (set(running) | set(state.verdicts))
        running += new
        assert running and len(running) <= width
        index = running.pop(order.draw(st.integers(0, len(running) - 1)))
        probed.append(index)
        state = state.record(index, LETTER[pattern[index]])
        running = [i for i in running if state.needs(i)]
    return state.outcome, probed


@settings(max_examples=300, deadline=None)
@given(regressions(), st.integers(min_value=2, max_value=6), st.booleans(), st.data())
def test_rolling_probes_find_what_rounds_find(case, width, good_given, order):
    pattern, boundary = case
    good = 0 if good_given else None
    outcome, probed = drive_rolling(pattern, good, width, order)
    check_outcome(pattern, boundary, outcome)
    if "S" not in pattern:
        assert outcome == drive(pattern, good, width)[0]
    assert len(probed) == len(set(probed))


@settings(max_examples=300, deadline=None)
@given(regressions(), st.integers(min_value=1, max_value=6), st.booleans(), st.data())
def test_splits_moved_to_made_builds_find_the_same_answer(case, width, good_given, order):
    pattern, boundary = case
    good = 0 if good_given else None
    outcome, probed = drive_rolling(pattern, good, width, order, made=True)
    check_outcome(pattern, boundary, outcome)
    if "S" not in pattern:
        assert outcome == drive(pattern, good, width)[0]
    assert len(probed) == len(set(probed))


def test_a_split_moves_to_a_made_build_a_third_of_the_way_to_its_neighbour_at_most():
    state = Bisection(65, 0).record(0, Verdict.GOOD).record(64, Verdict.BAD)
    assert state.next_probes(1) == (32,)
    assert state.next_probes(1, ready={30}) == (30,)  # 2 off; up to 32 // 3 = 10 may be
    assert state.next_probes(1, ready={30, 33}) == (33,)  # the nearest made one
    assert state.next_probes(1, ready={42}) == (42,)
    assert state.next_probes(1, ready={21, 43}) == (32,)  # 11 off: the install is waited for
    assert state.next_probes(3, ready={17}) == (17, 32, 48)  # parts 16: up to 5 off


def test_the_ends_are_probed_as_they_are_whatever_is_made():
    assert Bisection(64, 0).next_probes(3) == (63, 19, 41)
    assert Bisection(64, 0).next_probes(3, ready={62, 20}) == (63, 20, 41)


def test_a_free_worker_splits_what_the_running_probes_leave():
    state = Bisection(65, 0).record(0, Verdict.GOOD).record(64, Verdict.BAD)
    assert state.next_probes(3, (16, 32, 48)) == ()
    after = state.record(32, Verdict.GOOD)  # 48 still runs, 16 is moot
    assert not after.needs(16)
    assert after.next_probes(3, (16, 48)) == (40, 56)  # halves of 32..48 and 48..64
    assert after.next_probes(2, (48,)) == (40,)  # one free worker: the older half first
    assert state.next_probes(3, (20,)) == (34, 49)  # 0..20 stays, 20..64 in three


class _OldestFirst:
    """Verdicts come in oldest first (a stand-in for hypothesis's data object)."""

    @staticmethod
    def draw(_strategy):
        return 0


def test_three_workers_stop_more_than_one_probe_a_bisection_of_64_on_average():
    plain = stopping = 0
    for boundary in range(1, 64):
        pattern = "G" * boundary + "B" * (64 - boundary)
        plain += len(drive(pattern, 0, 3)[1])
        stopping += len(drive_stopping(pattern, 0, 3, _OldestFirst())[1])
    assert stopping <= plain - 63  # 524 probes run instead of 628, verdicts in oldest first
