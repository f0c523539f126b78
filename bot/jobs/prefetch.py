"""Prefetch: while a round runs, provision what the next round will probe, whatever it finds."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.adapters.cpus import usable_cores
from bot.adapters.environments import (
    MARKER,
    PREFIX,
    Cancelled,
    EnvironmentCache,
    ProvisionError,
    env_size,
)
from bot.core.bisection import Bisection
from bot.core.builds import Build
from bot.core.verdicts import Verdict


def upcoming(bisection: Bisection, probes: Sequence[int], width: int) -> tuple[int, ...]:
    """The builds that may be asked for next, over every verdict of the probes running now.

    Each verdict is taken in as it comes, and free workers start new probes at once (see
    `Engine`): what may follow is the next probes after any one of `probes` says GOOD or
    BAD, the others still running, the first started (likely the first done) first; and,
    since verdicts of probes that started together often come within moments of each
    other, the next probes after all of them. Every outcome's first build comes before any
    outcome's second.
    """
    singles, joint = successor_plans(bisection, probes, width)
    return tuple(interleaved([*singles, *joint], probes))


def successor_plans(bisection: Bisection, probes: Sequence[int], width: int
                    ) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """The next probes after each single verdict of `probes` (the others still running), and
    after all of them at once, for each outcome where the old behaviour comes first."""
    old, new = (Verdict.BAD, Verdict.GOOD) if bisection.find_fix else (Verdict.GOOD, Verdict.BAD)
    singles: list[tuple[int, ...]] = []
    for index in probes:
        others = [i for i in probes if i != index]
        for verdict in (new, old):
            state = bisection.record(index, verdict)
            if state.outcome is None:
                singles.append(state.next_probes(width, others))
    joint: list[tuple[int, ...]] = []
    ordered = sorted(probes)
    for olds in range(len(ordered) + 1):
        state = bisection
        for rank, index in enumerate(ordered):
            state = state.record(index, old if rank < olds else new)
        if state.outcome is None:
            joint.append(state.next_probes(width))
    return singles, joint


def interleaved(plans: Sequence[Sequence[int]], skip: Sequence[int]) -> list[int]:
    """Every plan's first build, then every plan's second, and so on, each build once."""
    chosen: list[int] = []
    for rank in range(max((len(p) for p in plans), default=0)):
        for plan in plans:
            if rank < len(plan) and plan[rank] not in chosen and plan[rank] not in skip:
                chosen.append(plan[rank])
    return chosen


def default_threads(cores: int) -> int:
    """How many environments are made at once ahead of the rounds.

    Unpacking a torch wheel is CPU work (inflating ~100 MB into ~370 MB and creating ~6,000
    files: about 0.9 s user and 0.9 s system time on this project's VM, spread over two
    cores by uv). On 2 cores one at a time is fastest, and the first successor is ready when
    the round ends. A round of k probes has up to (k + 1) * k successors (9 for 3 workers),
    which a GPU host's cores (16-32 on the ones we measured) can make side by side: one per
    four cores, at most 8.
    """
    return 1 if cores <= 2 else min(8, max(2, cores // 4))


@dataclass
class Prefetcher:
    """Installs upcoming builds on background threads, never beyond the cache's budget.

    Prefetch installs run at a lower CPU priority (`nice`), so that they take what the
    reproducer leaves idle (torch.compile's own compile workers come first). An install that
    the new round no longer needs is called off when the round starts, so it does not slow
    the ones that are. On a small runner (4 cores or fewer) nothing starts while the round
    installs its own builds, which are what the round waits for.
    """

    cache: EnvironmentCache
    builds: Sequence[Build]
    limit: int = 0  # most environments made ahead per round; 0 means every possible successor
    threads: int = field(default_factory=lambda: default_threads(usable_cores()))
    yield_to_round: bool = field(default_factory=lambda: usable_cores() <= 4)
    installed: list[str] = field(default_factory=list)  # versions this prefetcher made
    cancelled: list[str] = field(default_factory=list)  # versions called off while in flight
    _pending: list[Build] = field(default_factory=list)
    _wake: threading.Condition = field(default_factory=threading.Condition)
    _closed: bool = False
    _busy: int = 0  # installs in flight
    _flight: dict[str, threading.Event] = field(default_factory=dict)
    _round: list[Build] = field(default_factory=list)  # the builds the running round probes
    _workers: list[threading.Thread] = field(default_factory=list)

    def ahead(self, bisection: Bisection, probes: Sequence[int], width: int) -> None:
        """Replace the queue with what may follow the probes running now (see `upcoming`);
        their own builds are left out."""
        indices = upcoming(bisection, probes, width)[: self.limit or None]
        wanted = [self.builds[i] for i in indices if self.builds[i].python is None]
        needed = {b.version for b in wanted} | {self.builds[i].version for i in probes}
        with self._wake:
            self._round = [self.builds[i] for i in probes if self.builds[i].python is None]
            for version, cancel in self._flight.items():
                if version not in needed:
                    cancel.set()
            self._pending = [b for b in wanted if b.version not in self._flight
                             and self.cache.lookup(b) is None]
            self._wake.notify_all()
        while len(self._workers) < max(1, self.threads):
            worker = threading.Thread(target=self._work, name="prefetch", daemon=True)
            self._workers.append(worker)
            worker.start()

    def ready(self) -> frozenset[int]:
        """The builds whose environments are made (by this prefetcher, a probe, or an earlier
        bisection sharing the cache), or that run on an interpreter of their own."""
        return frozenset(i for i, b in enumerate(self.builds)
                         if b.python is not None or (self.cache.path_for(b) / MARKER).exists())

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._pending = []
            for cancel in self._flight.values():
                cancel.set()
            self._wake.notify_all()
        for worker in self._workers:
            worker.join()

    def _next(self) -> Build | None:
        """The next build to make, once there is one and the round's own installs are done."""
        with self._wake:
            while not self._closed and (not self._pending or (self.yield_to_round
                                                              and self._round_installing())):
                self._wake.wait(timeout=0.05)
            return None if self._closed else self._pending.pop(0)

    def _round_installing(self) -> bool:
        """Whether a probe of the running round is still installing its own build: that
        install is what the round waits for (on 2 cores a prefetch beside it made it take
        3.2 s instead of 1.9 s), so nothing new starts meanwhile. Called holding the lock."""
        return any(not (self.cache.path_for(b) / MARKER).exists() and b.version not in self._flight
                   for b in self._round)

    def _work(self) -> None:
        while (build := self._next()) is not None:
            if not self._wait_for_room():
                continue  # no room, even without what others need: this one is not made
            cancel = threading.Event()
            with self._wake:
                self._flight[build.version] = cancel
            try:
                self.cache.provision(build, cancel, background=True)
                self.installed.append(build.version)
            except Cancelled:
                self.cancelled.append(build.version)
            except ProvisionError:
                pass  # the probe itself reports it as SKIP
            finally:
                with self._wake:
                    self._busy -= 1
                    del self._flight[build.version]

    def _wait_for_room(self) -> bool:
        """Room for one more environment about as big as the biggest one there is, besides
        those other threads are making; on success this thread counts as busy.

        Until one exists (the first round's probe is making it) its size is unknown: wait.
        Without room, least-recently-used environments go as a probe's install would evict
        them, except those of this bisection's builds (it may still need any of them) and
        those something runs in: before, a cache that had once reached its budget (an earlier
        bisection's environments) stayed at it, since a probe's install evicts only down to
        the budget before adding its own, and prefetch made nothing for good.
        """
        evicted_nothing = False
        while True:
            ready = [p for p in self.cache.envs.glob(f"{PREFIX}py*") if p.is_dir()]
            sizes = [env_size(p) for p in ready]
            with self._wake:
                if self._closed:
                    return False
                if not sizes:
                    self._wake.wait(timeout=0.1)
                    continue
                room = (self._busy + 1) * max(sizes)
                if sum(sizes) + room <= self.cache.budget_bytes:
                    self._busy += 1
                    return True
                if evicted_nothing:
                    return False
            evicted_nothing = not self.cache.evict(protect=self._needed(), room=room)

    def _needed(self) -> set[Path]:
        """The environments of this bisection's builds: never evicted to make room."""
        return {self.cache.path_for(b) for b in self.builds if b.python is None}
