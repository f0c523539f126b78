"""Prefetch: which builds the next round may need, and that they are installed before it runs."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.adapters.environments import Cancelled, EnvironmentCache, ProvisionError, env_size
from bot.adapters.runner import Runner
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection
from bot.core.builds import Build, Selection, select_builds
from bot.core.results import BisectResult
from bot.core.verdicts import Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.prefetch import Prefetcher, default_threads, upcoming
from tests.fakes.mirror import Fault, IndexServer
from tests.processes import gone

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
       known=st.booleans(), order=st.data())
def test_what_starts_next_is_always_prefetched(size, first_bad, width, known, order) -> None:
    """Whichever running probe's verdict comes first, the probes that start next are ones
    prefetched for it (the engine's loop: fold one verdict, stop what is moot, fill up)."""
    boundary = first_bad.draw(st.integers(1, size - 1))
    state = Bisection(size, 0 if known else None)
    running: list[int] = []
    ahead: tuple[int, ...] = ()
    while state.outcome is None:
        new = state.next_probes(width, running)
        if ahead or running:  # the first probes cannot have been foreseen
            assert set(new) <= set(ahead)
        running += new
        ahead = upcoming(state, running, width)
        assert not set(ahead) & (set(running) | set(state.verdicts))
        index = running.pop(order.draw(st.integers(0, len(running) - 1)))
        state = state.record(index, G if index < boundary else B)
        running = [i for i in running if state.needs(i)]


def _builds(index_server):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    links = WheelIndex(index_server.variant_url("cpu")).project_links("torch")
    return select_builds(links, Selection(tag, variant="cpu"))


class _PacedPrefetcher(Prefetcher):
    """Starts a round only once every build the round before named as a successor is made, so
    that a loaded machine (where an install can outlast the run) does not decide the test."""

    expected: tuple[Build, ...] = ()

    def ahead(self, bisection, probes, width):
        deadline = time.monotonic() + 60
        while any(self.cache.lookup(b) is None for b in self.expected):
            assert time.monotonic() < deadline, "prefetch never made the next round's builds"
            time.sleep(0.05)
        self.expected = tuple(self.builds[i] for i in upcoming(bisection, probes, width))
        super().ahead(bisection, probes, width)


def _bisect(builds, cache: EnvironmentCache, script: Path, kind: type[Prefetcher] = Prefetcher
            ) -> tuple[BisectResult, Prefetcher]:
    prober = Prober(cache, Runner(), script, ProbeOptions(timeout_s=60))
    prefetcher = kind(cache, builds)
    start = BisectResult(builds=tuple(builds), bisection=Bisection(len(builds), 0), probes=(),
                         script_name=script.name, index_url="")
    return Engine(builds, prober, 1, prefetch=prefetcher).run(start), prefetcher


def test_later_rounds_find_their_environments_made(index_server, tmp_path) -> None:
    builds = _builds(index_server)
    script = tmp_path / "slow.py"
    script.write_text("import time, torch\ntime.sleep(1.5)\n"
                      "raise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
    result, prefetcher = _bisect(builds, cache, script, _PacedPrefetcher)
    assert result.outcome is not None and result.version_at(result.outcome.after) == (
        "2.13.0.dev20260521+cpu")
    # Round 1 checks the bad end (nothing runs before it); every later probe's build was made
    # by the prefetcher while the round before it ran.
    later = [p.version for p in result.probes[1:]]
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


def test_a_cache_an_earlier_bisection_filled_still_prefetches(index_server, tmp_path) -> None:
    """A cache at its budget (an earlier bisection's environments) stayed there: a probe's
    install evicts only down to the budget before adding its own, and prefetch, which
    never evicted, wanted room for one more on top, so it made nothing for good. Now it
    evicts what this bisection does not need, least recently used first."""
    builds = _builds(index_server)
    root = tmp_path / "cache"
    size = env_size(EnvironmentCache(root, extra_packages=()).provision(builds[0]).path)
    budget = int(size * 4.5)
    cache = EnvironmentCache(root, extra_packages=(), budget_bytes=budget)
    for build in builds[1:4]:  # with builds[0]: four environments, the budget is reached
        cache.provision(build)
    earlier = [cache.path_for(b) for b in builds[:4]]
    window = builds[10:]
    script = tmp_path / "slow.py"
    script.write_text("import time, torch\ntime.sleep(1.5)\n"
                      "raise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    result, prefetcher = _bisect(window, cache, script)
    assert result.outcome is not None and result.version_at(result.outcome.after) == (
        "2.13.0.dev20260521+cpu")
    assert prefetcher.installed, "nothing was prefetched"
    assert not earlier[0].exists(), "the least recently used environment went first"
    left = [p for p in cache.envs.glob("tbb-py*") if p.is_dir()]
    # Within the budget, but for the one environment a probe's install adds beyond it.
    assert sum(env_size(p) for p in left) <= budget + max(env_size(p) for p in left)


def test_room_is_made_only_from_what_the_bisection_does_not_need(index_server,
                                                                 tmp_path) -> None:
    builds = _builds(index_server)
    root = tmp_path / "cache"
    # uv makes every one: environments derived from another count only their own files, and
    # this is about three of one size filling a budget of three and a half.
    size = env_size(EnvironmentCache(root, extra_packages=(), derive=False)
                    .provision(builds[0]).path)
    cache = EnvironmentCache(root, extra_packages=(), budget_bytes=int(size * 3.5),
                             derive=False)
    for build in builds[1:3]:
        cache.provision(build)
    made = [cache.path_for(b) for b in builds[:3]]
    # Every environment there is one of the bisection's builds: no room, nothing goes.
    assert Prefetcher(cache, builds[:3], threads=1)._wait_for_room() is False
    assert all(path.exists() for path in made)
    # builds[0] is not among this bisection's: it goes, and there is room for one more.
    assert Prefetcher(cache, builds[1:5], threads=1)._wait_for_room() is True
    assert [path.exists() for path in made] == [False, True, True]


def test_cancel_stops_a_download_and_leaves_the_cache_as_it_was(mirror, tmp_path) -> None:
    with IndexServer(mirror.root) as server:
        builds = _builds(server)
        server.faults.append(Fault(path_contains=".whl", delay_s=1.5))  # a slow download
        cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        with pytest.raises(Cancelled):
            cache.provision(builds[3], cancel)
        assert cache.lookup(builds[3]) is None
        gone(cache.envs, "tbb-trash-*")
        assert [p.name for p in cache.envs.iterdir() if not p.name.endswith(".lock")] == []
        assert cache.provision(builds[3]).info["torch"] == builds[3].version  # made again


def test_a_prefetch_the_next_round_does_not_need_is_called_off(mirror, tmp_path) -> None:
    with IndexServer(mirror.root) as server:
        builds = _builds(server)
        cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
        state = Bisection(len(builds), 0).record(len(builds) - 1, B)
        middle = state.next_probes(1)[0]
        cache.provision(builds[-1])  # the size the room check needs
        cache.provision(builds[middle])  # the round's own build, as its probe would make it
        server.faults.append(Fault(path_contains=".whl", delay_s=3.0, times=5))
        prefetcher = Prefetcher(cache, builds, threads=1)
        try:
            prefetcher.ahead(state, (middle,), 1)  # makes both successors, one at a time
            in_flight = upcoming(state, (middle,), 1)[0]
            deadline = time.monotonic() + 10
            while builds[in_flight].version not in prefetcher._flight:  # its download stalls
                assert time.monotonic() < deadline, "the first successor never started"
                time.sleep(0.02)
            after = state.record(middle, G if in_flight < middle else B)
            # The middle build was GOOD or BAD so that the in-flight build is not needed.
            prefetcher.ahead(after, after.next_probes(1), 1)
            deadline = time.monotonic() + 10
            while builds[in_flight].version not in prefetcher.cancelled:
                assert time.monotonic() < deadline, "the stale install was not called off"
                time.sleep(0.05)
        finally:
            prefetcher.close()
        assert builds[in_flight].version not in prefetcher.installed
        assert cache.lookup(builds[in_flight]) is None


def _after_the_bad_end(server, tmp_path):
    """Builds, a cache holding the bad end's environment, and the state after it was BAD."""
    builds = _builds(server)
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
    cache.provision(builds[-1])
    state = Bisection(len(builds), 0).record(len(builds) - 1, B)
    return builds, cache, state, state.next_probes(1)[0]


def test_nothing_is_prefetched_while_the_round_installs_its_own_build(mirror, tmp_path) -> None:
    with IndexServer(mirror.root) as server:
        builds, cache, state, middle = _after_the_bad_end(server, tmp_path)
        prefetcher = Prefetcher(cache, builds, threads=1)
        try:
            prefetcher.ahead(state, (middle,), 1)
            time.sleep(1.0)
            assert prefetcher.installed == [] and not prefetcher._flight  # waits for the probe
            cache.provision(builds[middle])  # the probe's own install
            deadline = time.monotonic() + 30
            while not prefetcher.installed:
                assert time.monotonic() < deadline, "prefetch never started after the probe's"
                time.sleep(0.05)
        finally:
            prefetcher.close()
        assert set(prefetcher.installed) <= {builds[i].version
                                             for i in upcoming(state, (middle,), 1)}


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 2), (8, 2), (16, 4),
                                                 (32, 8), (128, 8)])
def test_prefetch_threads_grow_with_the_cores(cores, threads) -> None:
    assert default_threads(cores) == threads


def test_prefetch_installs_run_below_the_reproducer_s_priority(index_server, tmp_path) -> None:
    """uv of a prefetch runs under `nice`; the round's own install does not."""
    seen = tmp_path / "niceness"
    fake_uv = tmp_path / "uv"
    # Field 19 of /proc/PID/stat is the niceness; the fake then fails like a broken uv.
    fake_uv.write_text(f"#!/bin/sh\ncut -d' ' -f19 /proc/$$/stat >> {seen}\nexit 3\n")
    fake_uv.chmod(0o755)
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=(), uv=str(fake_uv))
    build = _builds(index_server)[5]  # downloaded first, then uv makes its venv
    base = os.nice(0)
    for background in (False, True):
        with pytest.raises(ProvisionError, match="uv venv failed"):
            cache.provision(build, background=background)
    assert [int(n) for n in seen.read_text().split()] == [base, min(19, base + 10)]


def test_a_big_runner_prefetches_while_the_round_installs(mirror, tmp_path) -> None:
    """With cores to spare the successors are made beside the round's own install."""
    with IndexServer(mirror.root) as server:
        builds, cache, state, middle = _after_the_bad_end(server, tmp_path)
        prefetcher = Prefetcher(cache, builds, threads=2, yield_to_round=False)
        try:
            prefetcher.ahead(state, (middle,), 1)
            deadline = time.monotonic() + 30
            while len(prefetcher.installed) < 2:
                assert time.monotonic() < deadline, "nothing was prefetched"
                time.sleep(0.05)
            assert cache.lookup(builds[middle]) is None  # the round's own is still not made
        finally:
            prefetcher.close()
        assert set(prefetcher.installed) == {builds[i].version
                                             for i in upcoming(state, (middle,), 1)}


def test_what_follows_all_of_a_round_s_verdicts_at_once_is_prefetched() -> None:
    """Probes that start together often finish together; then the engine plans from all of
    their verdicts, and those builds are in the line too, for every outcome."""
    state = Bisection(64, 0)
    first = state.next_probes(3)
    ahead = set(upcoming(state, first, 3))
    outcomes = 0
    for olds in range(len(first) + 1):
        after = state
        for rank, index in enumerate(sorted(first)):
            after = after.record(index, G if rank < olds else B)
        if after.outcome is None:
            outcomes += 1
            assert set(after.next_probes(3)) <= ahead
    assert outcomes == 3  # 63 must fail (or nothing is reproduced); 19 and 41 cut 0..63


class _Made:
    """A prefetch that makes nothing itself and reports `made` as made."""

    def __init__(self, made: set[int]) -> None:
        self.made = frozenset(made)

    def ahead(self, bisection, probes, width) -> None:
        return None

    def ready(self) -> frozenset[int]:
        return self.made

    def close(self) -> None:
        return None


def test_the_engine_moves_a_split_to_a_build_that_is_made(index_server, cache_dir,
                                                          tmp_path) -> None:
    builds = _builds(index_server)
    first_bad = next(i for i, b in enumerate(builds) if b.version >= "2.13.0.dev20260521")
    (middle,) = Bisection(len(builds), 0).record(len(builds) - 1, B).next_probes(1)
    near = middle + 2  # within a third of the way to either end
    script = tmp_path / "repro.py"
    script.write_text("import torch\n"
                      "raise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    started: list[str] = []

    def progress(event: str, **details) -> None:
        if event == "installing":
            started.append(details["build"].version)

    prober = Prober(EnvironmentCache(cache_dir, extra_packages=()), Runner(), script,
                    ProbeOptions(timeout_s=60), progress)
    start = BisectResult(builds=tuple(builds), bisection=Bisection(len(builds), 0), probes=(),
                         script_name=script.name, index_url="")
    result = Engine(builds, prober, 1, progress, prefetch=_Made({near})).run(start)
    assert started[:2] == [builds[-1].version, builds[near].version]
    assert result.outcome is not None and result.outcome.after == first_bad


def test_ready_lists_the_builds_whose_environments_are_made(index_server, tmp_path) -> None:
    builds = _builds(index_server)
    cache = EnvironmentCache(tmp_path / "cache", extra_packages=())
    prefetcher = Prefetcher(cache, builds, threads=1)
    assert prefetcher.ready() == frozenset()
    cache.provision(builds[3])
    assert prefetcher.ready() == {3}
