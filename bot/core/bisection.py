"""The search: a pure state machine over builds ordered oldest to newest.

Like h11's connection objects, a `Bisection` is asked what to do next (`next_probes`), told what
happened (`record`, which returns a new state), and can be looked at any time (`outcome`). It
knows builds only by index; the jobs map indices to builds.

The newest build is probed first: it must fail (or nothing is reproduced), and its failure is the
one the search follows. The user's good bound is not: the interval is split as if it were good,
and it is probed only when every build after it failed, the one case where its verdict decides
the answer. So a window of N builds with no skips costs 1 + ceil(log2(N - 1)) probes, one more
than a search that trusts both ends, and one fewer than checking both ends first.

Regression mode looks for the first BAD build after GOOD ones; find-the-fix mode for the first
GOOD build after BAD ones. Internally both are the boundary between the "old" behaviour (what the
oldest builds do) and the "new" one (what the newest build does).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from bot.core.errors import parse_or_malformed
from bot.core.verdicts import Verdict

# An endpoint that cannot be tested is replaced by its neighbour, at most this many times in a
# row, before the bisection gives up with CANNOT_TEST (cargo-bisect-rustc stops at once).
MAX_ENDPOINT_SKIPS = 3

# Intervals up to this many builds are split by `_part_sizes`; wider ones into equal parts.
PLANNED_SPLIT_MAX = 256

# A split may move up to 1/READY_SLACK of the way to its neighbour to use a made environment.
READY_SLACK = 3


class Status(str, Enum):
    FOUND = "found"
    AMBIGUOUS = "ambiguous"
    NOT_REPRODUCED = "not-reproduced"
    NOT_A_REGRESSION = "not-a-regression"
    CANNOT_TEST = "cannot-test"


class _Side(Enum):
    OLD = "old"
    NEW = "new"
    SKIP = "skip"


@dataclass(frozen=True)
class Outcome:
    """The answer: `before`/`after` are the last old-behaviour and first new-behaviour builds."""

    status: Status
    before: int | None = None  # regression mode: last good; fix mode: last bad
    after: int | None = None  # regression mode: first bad; fix mode: first good
    candidates: tuple[int, ...] = ()  # builds that may be the first new one (AMBIGUOUS)
    note: str = ""

    @property
    def located(self) -> bool:
        """Whether the boundary was found, exactly or among `candidates`: only then is
        `after` the first build with the new behaviour (elsewhere it is the oldest tested)."""
        return self.status in (Status.FOUND, Status.AMBIGUOUS)


@dataclass(frozen=True)
class _Probe:
    index: int
    expected: _Side | None  # what an optimistic plan may assume; None for interior splits


@functools.cache
def _split_plan(width: int, top: int) -> tuple[tuple[tuple[int, int, int, int], ...], ...]:
    """For rounds of `width` probes: plan[p][n] = (worst, cost, squares, first part) of the best
    split of an interval of n candidates into p parts, for n up to `top`.

    n candidates for the first new build (an interval lo..hi has hi - lo) take `worst` more
    rounds at most, and cost[n] = n x the expected rounds, every position equally likely:
    cost[1] = 0 and cost[n] = n + the least sum of cost[s] over the parts s of n. Splits are
    compared by the worst case first, so no interval takes a round more than equal parts would,
    and among equals the most even one (the least sum of squares) wins. Computed bottom up in
    integers, in O(top^2 x width) steps: 0.2 s for 256 builds and width 3, 15 ms for 64.
    """
    most = width + 1
    none = (0, 0, 0, 0)
    plan = [[none] * (top + 1) for _ in range(most + 1)]
    single = [none] * (top + 1)  # one part of size n: (worst, cost, n squared, n)
    single[1] = plan[1][1] = (0, 0, 1, 1)
    for n in range(2, top + 1):
        for parts in range(2, min(most, n) + 1):
            best = None
            for first in range(1, n - parts + 2):
                part, rest = single[first], plan[parts - 1][n - first]
                candidate = (max(part[0], rest[0]), part[1] + rest[1], part[2] + rest[2], first)
                if best is None or candidate[:3] < best[:3]:
                    best = candidate
            assert best is not None
            plan[parts][n] = best
        worst, cost, _, _ = plan[min(most, n)][n]
        single[n] = plan[1][n] = (worst + 1, n + cost, n * n, n)
    return tuple(tuple(row) for row in plan)


def _part_sizes(n: int, parts: int, width: int) -> tuple[int, ...]:
    """The sizes, oldest first, of `parts` parts of an interval of n candidates that the
    rounds after this one (of `width` probes each) settle in the fewest rounds on average,
    without making the worst case longer than equal parts. Splitting equally is the best
    for one probe a round, and close enough for intervals over PLANNED_SPLIT_MAX builds.

    With 3 probes a round, 64 nightlies take 3.33 rounds on average instead of 3.49.
    """
    parts = min(parts, n)
    if width == 1 or n > PLANNED_SPLIT_MAX:
        bounds = [n * j // parts for j in range(parts + 1)]
        return tuple(b - a for a, b in zip(bounds, bounds[1:], strict=False))
    plan = _split_plan(width, max(16, 1 << (n - 1).bit_length()))  # a few sizes, each cached
    sizes: list[int] = []
    while parts > 1:
        first = plan[parts][n][3]
        sizes.append(first)
        n, parts = n - first, parts - 1
    return (*sizes, n)


def _between(lo: int, hi: int, cuts: list[int], count: int) -> list[int]:
    """`count` points that, with the running probes at `cuts`, split lo..hi most evenly:
    each goes to the segment whose parts would be the longest, which it splits equally."""
    bounds = [lo, *cuts, hi]
    segments = [[a, b, 1] for a, b in zip(bounds, bounds[1:], strict=False)]  # [a, b, parts]
    for _ in range(count):
        widest = max(segments, key=lambda seg: ((seg[1] - seg[0]) / seg[2], -seg[0]))
        widest[2] += 1
    return [a + (b - a) * j // parts for a, b, parts in segments for j in range(1, parts)]


def _untested_nearest(
    targets: Iterable[int], pool: list[int], taken: set[int],
    ready: Collection[int] = (), fixed: Iterable[int] = (),
) -> list[int]:
    """The untested build nearest each target; or a `ready` one (its environment is made)
    if that lies within 1/READY_SLACK (a third) of the way to the nearest other point (a
    target, or one of the `fixed` bounds and running probes). A cut a third off centre leaves
    an interval about 11% larger on average (under 0.1 of a round with 3 probes a round),
    where an install a probe waits for costs 1.5-3.5 s of a 2-5 s round in the speed
    benchmark."""
    targets = list(targets)
    points = sorted({*fixed, *targets})
    chosen: list[int] = []
    for target in targets:
        free = [i for i in pool if i not in taken and i not in chosen]
        if not free:
            break
        before = max((p for p in points if p < target), default=target)
        after = min((p for p in points if p > target), default=target)
        slack = min(target - before, after - target) // READY_SLACK
        near = [i for i in free if i in ready and abs(i - target) <= slack]
        chosen.append(min(near or free, key=lambda i: (abs(i - target), i)))
    return chosen


def _bad_end(size: int, sides: Mapping[int, _Side]) -> Outcome | _Probe | int:
    """The newest testable build: it must show the new behaviour, or nothing is reproduced."""
    skipped = 0
    for index in range(size - 1, -1, -1):
        side = sides.get(index)
        if side is None:
            return _Probe(index, _Side.NEW)
        if side is _Side.OLD:
            return Outcome(Status.NOT_REPRODUCED, before=index, note="the newest testable build")
        if side is _Side.NEW:
            return index
        skipped += 1
        if skipped >= MAX_ENDPOINT_SKIPS:
            break
    return Outcome(Status.CANNOT_TEST, note=f"the newest {skipped} builds could not be tested")


# The note of an answer whose good end, given by the user or the issue, shows the new
# behaviour too: the range holds no regression, but the good end was not a good build.
GOOD_END_FAILS = "the good end given fails too"


# Looking for an older build with the old behaviour, at most this many untestable ones are
# probed before the search says it cannot test further back: every one is an install and a run.
MAX_EXPLORE_SKIPS = 2 * MAX_ENDPOINT_SKIPS


def _explore(bad: int, hi: int, sides: Mapping[int, _Side]) -> Outcome | _Probe:
    """No good build known: step back from the bad end, doubling the distance each time, and
    again after each build that cannot be tested (a stretch of untestable builds, such as
    nightlies an imported package does not exist for, is crossed in a few steps)."""
    older_untested = [i for i in range(hi) if i not in sides]
    skipped = hi - len(older_untested)  # below the oldest failure nothing else is known
    if older_untested and skipped < MAX_EXPLORE_SKIPS:
        target = max(0, hi - max(1, bad - hi) * 2**skipped)
        at_or_below = [i for i in older_untested if i <= target]
        return _Probe(at_or_below[-1] if at_or_below else older_untested[-1], _Side.NEW)
    if older_untested:  # not "fails back to the oldest build": those were not tested
        return Outcome(Status.CANNOT_TEST, after=hi,
                       note=f"{skipped} older builds could not be tested")
    return Outcome(Status.NOT_A_REGRESSION, after=hi, note="fails back to the oldest build")


@dataclass(frozen=True)
class Bisection:
    """The state of one search; immutable, so every `record` returns a new one."""

    size: int
    good_index: int | None = None  # a user's good bound; None starts an exponential search
    find_fix: bool = False
    results: tuple[tuple[int, Verdict], ...] = ()

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("a bisection needs at least one build")
        if self.good_index is not None and not 0 <= self.good_index < self.size:
            raise ValueError(f"good index {self.good_index} is outside 0..{self.size - 1}")

    @property
    def verdicts(self) -> dict[int, Verdict]:
        return dict(self.results)

    def record(self, index: int, verdict: Verdict) -> Bisection:
        """A new state with `verdict` for build `index`; illegal input raises, nothing changes."""
        if not 0 <= index < self.size:
            raise ValueError(f"build index {index} is outside 0..{self.size - 1}")
        if index in self.verdicts:
            raise ValueError(f"build {index} already has a verdict ({self.verdicts[index].value})")
        return Bisection(
            self.size, self.good_index, self.find_fix, self.results + ((index, Verdict(verdict)),)
        )

    def _sides(self, assumed: Mapping[int, _Side] | None = None) -> dict[int, _Side]:
        old, new = (Verdict.BAD, Verdict.GOOD) if self.find_fix else (Verdict.GOOD, Verdict.BAD)
        table = {old: _Side.OLD, new: _Side.NEW, Verdict.SKIP: _Side.SKIP}
        sides = {index: table[verdict] for index, verdict in self.results}
        sides.update(assumed or {})
        return sides

    def _step(self, sides: Mapping[int, _Side]) -> Outcome | _Probe | tuple[int, int]:
        """The outcome, the next endpoint or exploration probe, or the interval to split."""
        bad = _bad_end(self.size, sides)
        if not isinstance(bad, int):
            return bad
        olds = [i for i in range(bad) if sides.get(i) is _Side.OLD]
        if olds:
            lo = olds[-1]
            hi = next(i for i in range(lo + 1, bad + 1) if sides.get(i) is _Side.NEW)
            return self._settle(lo, hi, sides)
        hi = min(i for i in range(bad + 1) if sides.get(i) is _Side.NEW)
        if self.good_index is not None and self.good_index < hi:
            good = self.good_index
            if any(i not in sides for i in range(good + 1, hi)):
                # Split as if the user's good bound were good: once a build after it is, its
                # own verdict changes nothing. It is probed only if every build after it fails
                # (and taken at its word if it cannot be tested).
                return (good, hi)
            if good not in sides:
                return _Probe(good, _Side.OLD)
            # The good bound could not be tested, nor any build after it before the first
            # failure: the boundary is among those, not "it always failed".
            return Outcome(Status.AMBIGUOUS, before=good, after=hi,
                           candidates=tuple(range(good + 1, hi + 1)),
                           note="the good end given and the builds after it could not be tested")
        explored = _explore(bad, hi, sides)
        if (isinstance(explored, Outcome) and explored.status is Status.NOT_A_REGRESSION
                and explored.after == self.good_index):
            return replace(explored, note=GOOD_END_FAILS)
        return explored

    @staticmethod
    def _settle(lo: int, hi: int, sides: Mapping[int, _Side]) -> Outcome | tuple[int, int]:
        interior = range(lo + 1, hi)
        if any(i not in sides for i in interior):
            return (lo, hi)
        skipped = tuple(i for i in interior if sides.get(i) is _Side.SKIP)
        if not skipped:
            return Outcome(Status.FOUND, before=lo, after=hi)
        note = f"{len(skipped)} untestable build(s) hide the exact boundary"
        return Outcome(Status.AMBIGUOUS, before=lo, after=hi, candidates=skipped + (hi,), note=note)

    @property
    def outcome(self) -> Outcome | None:
        """The final answer, or None while probes are still needed."""
        step = self._step(self._sides())
        return step if isinstance(step, Outcome) else None

    def bad_end_to_probe(self) -> int | None:
        """The build that must be probed as the bad end, while no failure has shown it yet
        (the newest one not known to be untestable); None once it is known, or the search
        has ended. Its failure is the one a search follows."""
        bad = _bad_end(self.size, self._sides())
        return bad.index if isinstance(bad, _Probe) else None

    def needs(self, index: int) -> bool:
        """Whether a verdict for build `index` can still change the outcome.

        A round's probes run side by side; once some of them are in, the others may lie
        outside the interval that is left (in 0..16 split at 4, 8 and 12, build 8 failing
        leaves 0..8, and 12 can no longer matter). Such a probe is stopped instead of
        waited for. While an endpoint or the exploration is still open every untested build
        may matter, so then it says True.
        """
        if not 0 <= index < self.size or index in self.verdicts:
            return False
        step = self._step(self._sides())
        if isinstance(step, Outcome):
            return False
        if isinstance(step, _Probe):
            return True
        lo, hi = step
        return lo <= index < hi  # lo untested is the user's good bound, which may decide

    def next_probes(
        self, width: int = 1, running: Iterable[int] = (), ready: Collection[int] = ()
    ) -> tuple[int, ...]:
        """Up to `width` builds to test next, in one round (empty when there is an outcome).

        With width > 1 the round also holds what the following steps would probe if the
        endpoints behave as expected: an endpoint check and the first splits run side by side.
        The splits cut the interval into parts sized by `_part_sizes` (not equal ones), which
        take the fewest rounds on average with the same worst case.

        `running` are builds being probed now, without a verdict yet: those still needed
        count toward the width as part of the round, and cut the interval as its probes
        would; the builds returned are the rest of the round (none of them running). So a
        worker that comes free while others run gets a build that splits what is left.

        `ready` are builds whose environments are already made (by prefetch, or by an
        earlier bisection sharing the cache): a split may move a little to use one
        (`_untested_nearest`) instead of waiting for an install. Endpoints never move.
        """
        if width < 1:
            raise ValueError("width must be at least 1")
        busy = [i for i in dict.fromkeys(running) if self.needs(i)]
        chosen: list[int] = list(busy)
        assumed: dict[int, _Side] = {}
        while len(chosen) < width:
            step = self._step(self._sides(assumed))
            if isinstance(step, Outcome):
                break
            if isinstance(step, _Probe):
                if step.index not in chosen:
                    chosen.append(step.index)
                assumed[step.index] = step.expected or _Side.SKIP
                continue
            lo, hi = step
            parts = width - len(chosen) + 1
            pool = [i for i in range(lo + 1, hi) if i not in self.verdicts and i not in chosen]
            if lo == self.good_index and lo not in self.verdicts and len(pool) < parts - 1:
                # The round holds every build left after the untested good bound, and one
                # more: the good bound too, or it would need a round of its own if all fail.
                chosen += pool + ([] if lo in chosen else [lo])
                break
            cuts = sorted(i for i in chosen if lo < i < hi)
            if cuts:
                targets = _between(lo, hi, cuts, parts - 1)
            else:
                sizes = _part_sizes(hi - lo, parts, width)
                targets = [lo + sum(sizes[:j]) for j in range(1, len(sizes))]
            chosen += _untested_nearest(targets, pool, set(chosen), ready, [lo, hi, *cuts])
            break
        return tuple(i for i in chosen if i not in busy)[: max(0, width - len(busy))]

    def to_json(self) -> str:
        return json.dumps(
            {
                "size": self.size,
                "good_index": self.good_index,
                "find_fix": self.find_fix,
                "results": [[index, verdict.value] for index, verdict in self.results],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Bisection:
        """The inverse of to_json; damaged text raises MalformedError (a ValueError, UserError)."""
        return parse_or_malformed("the saved bisection state", cls._from_json, text)

    @classmethod
    def _from_json(cls, text: str) -> Bisection:
        data = json.loads(text)
        state = cls(int(data["size"]), data.get("good_index"), bool(data.get("find_fix")))
        for index, verdict in data.get("results", []):
            state = state.record(int(index), Verdict(verdict))
        return state
