"""Prefetch: which builds the next round may need, and that they are installed before it runs."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.adapters.environments import EnvironmentCache
from bot.adapters.runner import Runner
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection
from bot.core.builds import Selection, select_builds
from bot.core.results import BisectResult
from bot.core.verdicts import Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.prefetch import Prefetcher, upcoming

G, B = Verdict.GOOD, Verdict.BAD


def test_both_outcomes_of_a_split_are_prefetched() -> None:
    state = Bisection(9, 0).record(0, G).record(8, B)
    assert state.next_probes(1) == (4,)
    # 4 BAD -> split 0..4 at 2; 4 GOOD -> split 4..8 at 6.
    assert upcoming(state, (4,), 1) == (2, 6)


def test_nothing_follows_the_last_round() -> None:
    state = Bisection(3, 0).record(0, G).record(2, B)
    assert upcoming(state, (1,), 1) == ()


def test_find_fix_mode_flips_the_sides() -> None:
    state = Bisection(9, 0, find_fix=True).record(0, B).record(8, G)
    assert upcoming(state, (4,), 1) == (2, 6)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(3, 80), first_bad=st.data(), width=st.integers(1, 4),
       known=st.booleans())
def test_the_next_round_is_always_prefetched(size, first_bad, width, known) -> None:
    """Whatever a round finds, the round after it asks only for builds prefetched for it."""
    boundary = first_bad.draw(st.integers(1, size - 1))
    state = Bisection(size, 0 if known else None)
    while state.outcome is None:
        probes = state.next_probes(width)
        ahead = upcoming(state, probes, width)
        assert not set(ahead) & (set(probes) | set(state.verdicts))
        for index in probes:
            state = state.record(index, G if index < boundary else B)
        assert set(state.next_probes(width)) <= set(ahead)


def _builds(index_server):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    links = WheelIndex(index_server.variant_url("cpu")).project_links("torch")
    return select_builds(links, Selection(tag, variant="cpu"))


def _bisect(builds, cache: EnvironmentCache, script: Path) -> tuple[BisectResult, Prefetcher]:
    prober = Prober(cache, Runner(), script, ProbeOptions(timeout_s=60))
    prefetcher = Prefetcher(cache, builds)
    start = BisectResult(builds=tuple(builds), bisection=Bisection(len(builds), 0), probes=(),
                         script_name=script.name, index_url="")
    return Engine(builds, prober, 1, prefetch=prefetcher).run(start), prefetcher


def test_later_rounds_find_their_environments_made(index_server, tmp_path) -> None:
    builds = _builds(index_server)
    script = tmp_path / "slow.py"
    script.write_text("import time, torch\ntime.sleep(1.5)\n"
                      "raise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
    result, prefetcher = _bisect(builds, cache, script)
    assert result.outcome is not None and result.version_at(result.outcome.after) == (
        "2.13.0.dev20260521+cpu")
    # Rounds 1 and 2 are the endpoint checks (the first has nothing before it); every later
    # probe's build was made by the prefetcher while the round before it ran.
    later = [p.version for p in result.probes[2:]]
    assert later and set(later) <= set(prefetcher.installed)
    assert len(prefetcher.installed) <= 2 * len(result.probes)


def test_a_full_cache_prefetches_nothing(index_server, tmp_path) -> None:
    builds = _builds(index_server)
    script = tmp_path / "quick.py"
    script.write_text("import torch\nraise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=(), budget_bytes=1)
    result, prefetcher = _bisect(builds, cache, script)
    assert result.outcome is not None
    assert prefetcher.installed == []
