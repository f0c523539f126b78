"""The builds a bisection runs over: the nightlies the index lists, older ones it no longer
lists found by the file names they would have, and the window between the good and bad ends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from packaging.version import Version

from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import (
    Build,
    Reach,
    Selection,
    WheelLink,
    Window,
    line_before,
    names_exactly,
    reach_for,
    select_builds,
    unlisted_link,
    version_line,
    window,
    yanked_builds,
)
from bot.core.errors import NoBuilds, UserError
from bot.core.results import BisectResult

MAX_DAYS = 366  # how far before the oldest listed nightly the bot looks, at most
MIN_STEP_DAYS = 30  # a search carried past the listed nightlies steps back at least this far
_BLOCK = 8  # days asked about at once
_YANKED_SHOWN = 5  # yanked builds named in the note that says they were left out
MISSING_DAYS = 7  # how far past a day without a nightly the walk back looks for an older one
T = TypeVar("T")


def reach_back(index: WheelIndex, reach: Reach, max_days: int = MAX_DAYS) -> list[WheelLink]:
    """The nightlies before `reach.oldest` that are still on the server, newest first.

    It walks back a day at a time, asking (with HEAD) for the wheel of each day under the
    version line it is on. A day without one is asked again under the line before: main's
    nightlies move to the next minor version when a release branch is cut, so walking back
    they move to the previous one, once a cut. It stops at `reach.until`, or at the first
    nightly of an older line than `reach.release`'s (where that release left main). A day
    `reach.until` without a nightly is passed, for up to a week, to the nearest older one: the
    window then holds the day asked for, as it does among listed nightlies.
    """
    oldest = reach.oldest
    assert oldest.date is not None
    line = version_line(oldest.version)
    stop = oldest.date - dt.timedelta(days=max_days)
    if reach.until is not None:
        stop = max(stop, reach.until - dt.timedelta(days=MISSING_DAYS))
    days = [oldest.date - dt.timedelta(days=k) for k in range(1, (oldest.date - stop).days + 1)]
    found: list[WheelLink] = []
    for start in range(0, len(days), _BLOCK):
        block = days[start:start + _BLOCK]
        asked = index.present([unlisted_link(oldest, line, day) for day in block])
        line_of = {day: line for day, hit in zip(block, asked, strict=True) if hit}
        earlier = line_before(line)
        missed = [day for day in block if day not in line_of]
        if earlier is not None and missed:
            again = index.present([unlisted_link(oldest, earlier, day) for day in missed])
            moved = [day for day, hit in zip(missed, again, strict=True) if hit]
            line_of.update(dict.fromkeys(moved, earlier))
            line = earlier if moved else line
        for day in block:  # newest first
            if day not in line_of:
                continue  # no nightly that day (or it was deleted)
            found.append(unlisted_link(oldest, line_of[day], day))
            if reach.until is not None and day <= reach.until:
                return found
            if reach.release is not None and (  # a nightly of the release's line, or older
                    Version(line_of[day]) <= Version(version_line(str(reach.release)))):
                return found
    return found


def widen(index: WheelIndex, links: Sequence[WheelLink], selection: Selection,
          good: str | None, say: Callable[[str], None], from_words: bool = False,
          name: str = "good", ends: Mapping[str, str | None] | None = None) -> list[Build]:
    """The builds on the page, and, when the end `good` (called `name`: the bad end when it
    is the older one, `end_to_reach`) is older than all of them, the older nightlies still on
    the server back to it. An end further back than the bot looks is an error, unless it is
    the issue's words (`from_words`), which the window then drops. Yanked builds are left
    out, unless one of `ends` (the good and bad ends given, by name) names one exactly, and
    `say` hears of both (`say_yanked`)."""
    ends = ends or {}
    pinned = list(ends.values())
    say_yanked(links, selection, ends, say)
    builds = one_variant(select_builds(links, selection, pinned), selection)
    reach = reach_for(builds, good)
    if reach is None:
        return builds
    assert reach.oldest.date is not None
    furthest = reach.oldest.date - dt.timedelta(days=MAX_DAYS)
    if reach.until is not None and reach.until < furthest:
        # Said before walking a year of days in vain; it was "no build on or before that
        # date", as if the wheels were gone, after ~340 requests.
        beyond = (f"{name}={good} is more than {MAX_DAYS} days before the oldest nightly the "
                  f"index lists ({reach.oldest.version}), further back than the bot looks for "
                  f"unlisted ones: give a good end from {furthest} on")
        if not from_words:
            raise NoBuilds(beyond)
        say(beyond)
        return builds
    found = reach_back(index, reach)
    widened = select_builds([*links, *found], selection, pinned)
    if found:  # when none is, the window says that no build is there
        say(f"{name}={good} is older than the nightlies the index lists (from "
            f"{reach.oldest.version}); found {len(found)} older ones on its server, back to "
            f"{widened[0].version}")
    return widened


def say_yanked(links: Sequence[WheelLink], selection: Selection,
                ends: Mapping[str, str | None], say: Callable[[str], None]) -> None:
    """Say which builds the index marks as yanked (PEP 592: withdrawn by whoever published
    them): those left out of the bisection, and those kept because an end names them."""
    left_out: list[str] = []
    for build in yanked_builds(links, selection):
        why = f" ({build.wheel.yanked})" if build.wheel.yanked else ""
        named = [f"{name}={spec}" for name, spec in ends.items()
                 if spec and names_exactly(spec, build.version)]
        if named:
            say(f"{' and '.join(named)}: {build.version} is yanked on the index{why}; testing "
                "it all the same, as it was named exactly (pip and uv install a yanked build "
                "only when pinned with ==)")
        else:
            left_out.append(f"{build.version}{why}")
    if left_out:
        shown = ", ".join(left_out[:_YANKED_SHOWN]) + (
            f" and {len(left_out) - _YANKED_SHOWN} more" if len(left_out) > _YANKED_SHOWN else "")
        count = "1 build" if len(left_out) == 1 else f"{len(left_out)} builds"
        say(f"left out {count} the index marks as yanked (withdrawn; pip and uv skip them): "
            f"{shown}; name one exactly as the good or bad end to test it anyway")


def one_variant(builds: list[Build], selection: Selection) -> list[Build]:
    """`builds`, unless a page of several variants (a mirror's, `.../whl/nightly`) gave
    builds of more than one: the newest of each day would then mix them (cu130 one day, cpu
    the next), and a regression would be the change of variant."""
    variants = sorted({b.variant for b in builds if b.variant})
    if selection.variant is None and len(variants) > 1:
        raise UserError(f"the index lists torch builds of {len(variants)} variants "
                        f"({', '.join(variants)}): name one with --variant (variant= in a "
                        "command)")
    return builds


def bad_from_report(reported: str | None, builds: Sequence[Build],
                    say: Callable[[str], None] | None = None) -> str | None:
    """The nightly an issue reports as failing, as the bad end, when the index still lists it:
    the exact build, or the one build of that nightly where the report names no variant
    ("2.13.0.dev20260521" of a `+cu130` index). One it does not list is said to `say`."""
    if not reported or ".dev" not in reported:
        return None
    if any(build.version == reported for build in builds):
        return reported
    if "+" not in reported:
        same = [b.version for b in builds if b.version.partition("+")[0] == reported]
        if len(same) == 1:
            return same[0]
    if say is not None and builds:
        say(f"the issue reports {reported}, which the index does not list (its builds run "
            f"from {builds[0].version} to {builds[-1].version}): it is not taken as the bad "
            "end")
    return None


def window_from(builds: Sequence[Build], good: str | None, bad: str | None,
                good_said: str | None, say: Callable[[str], None],
                find_fix: bool = False) -> Window:
    """The window between the ends (`window`). A good end taken from the issue's words
    (`good_said`) that names no usable build is dropped, with a word why, and the search
    starts from the bad end instead: what a reporter wrote must not stop a bisection an option
    would not."""
    try:
        chosen = window(builds, good, bad, find_fix)
    except UserError as problem:
        if good_said is None:
            raise
        say(f'the issue says "{good_said}", but {problem}; searching back from the bad end')
        chosen = window(builds, None, bad, find_fix)
    for note in chosen.notes:
        say(note)
    return chosen


def with_default_python(python: str, default: str, from_issue: bool,
                        builds_for: Callable[[str], T], say: Callable[[str], None]
                        ) -> tuple[str, T]:
    """`builds_for(python)`, where a Python taken from the issue that the index has no builds
    for gives way to the default one; and the Python it took."""
    try:
        return python, builds_for(python)
    except NoBuilds:
        if not from_issue or python == default:
            raise
    say(f"no builds for the issue's Python {python}; bisecting with {default}")
    return default, builds_for(default)


def search_further_back(result: BisectResult, selection: Selection,
                        run: Callable[[BisectResult], BisectResult],
                        say: Callable[[str], None]) -> BisectResult:
    """A search without a good end that failed back to its oldest nightly goes on past it,
    a step at a time (`step_back`), `run` continuing it over each step's older nightlies."""
    while True:
        result, grown = step_back(result, selection, say)
        if not grown:
            return result
        result = run(result)


def step_back(result: BisectResult, selection: Selection,
              say: Callable[[str], None]) -> tuple[BisectResult, bool]:
    """The search with older nightlies put before its builds, and True; or as it is, and False.

    Only a search without a good end that failed back to its oldest nightly takes a step. It
    steps back as far again as its nightlies span (at least MIN_STEP_DAYS), not beyond MAX_DAYS
    before the oldest one it began with, and finds the older nightlies on the server as `widen`
    does: the search's own doubling, carried past the two months the index lists. The result
    records that it looked (the report says so) and how far it may go (for the next step).
    """
    if not result.failed_back_to_the_oldest:
        return result, False
    oldest = result.builds[0].date
    assert oldest is not None
    saved = result.options.get("back_to")  # set by the first step: the limit stays put
    floor = (dt.date.fromisoformat(str(saved)) if saved
             else oldest - dt.timedelta(days=MAX_DAYS))
    older = _older(WheelIndex(result.index_url), result.builds, selection, floor)
    marked = replace(result, options={**result.options, "looked_back": True,
                                      "back_to": floor.isoformat()})
    if not older:
        return marked, False
    say(f"every build back to {result.builds[0].version} fails; found {len(older)} older "
        f"nightlies on the index's server, back to {older[0].version}; searching them")
    return marked.with_older(older), True


def _older(index: WheelIndex, builds: Sequence[Build], selection: Selection,
           floor: dt.date) -> list[Build]:
    oldest, newest = builds[0], builds[-1]
    if oldest.date is None or newest.date is None or oldest.date <= floor:
        return []
    step = max(newest.date - oldest.date, dt.timedelta(days=MIN_STEP_DAYS))
    # every day reach_back asks about is before `oldest`, and `until` is within MAX_DAYS of it
    return select_builds(reach_back(index, Reach(oldest, until=max(floor, oldest.date - step))),
                         selection)
