"""Prefetch: while a round runs, provision what the next round will probe, whatever it finds."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.adapters.environments import PREFIX, EnvironmentCache, ProvisionError
from bot.adapters.environments import _tree_size as tree_size
from bot.core.bisection import Bisection
from bot.core.builds import Build
from bot.core.verdicts import Verdict


def upcoming(bisection: Bisection, probes: Sequence[int], width: int) -> tuple[int, ...]:
    """The builds the round after `probes` may ask for, over every outcome the round can have.

    The builds are ordered, so a round of k probes ends one of k + 1 ways: the oldest j of
    them on the old side, the rest on the new side (all GOOD and all BAD are the two extremes).
    Their next probes are interleaved, so each outcome's first build comes before any second.
    """
    old, new = (Verdict.BAD, Verdict.GOOD) if bisection.find_fix else (Verdict.GOOD, Verdict.BAD)
    ordered = sorted(probes)
    plans: list[tuple[int, ...]] = []
    for split in range(len(ordered) + 1):
        state = bisection
        for position, index in enumerate(ordered):
            state = state.record(index, old if position < split else new)
        if state.outcome is None:
            plans.append(state.next_probes(width))
    chosen: list[int] = []
    for rank in range(max((len(p) for p in plans), default=0)):
        for plan in plans:
            if rank < len(plan) and plan[rank] not in chosen and plan[rank] not in probes:
                chosen.append(plan[rank])
    return tuple(chosen)


@dataclass
class Prefetcher:
    """Installs upcoming builds on one background thread, never beyond the cache's budget."""

    cache: EnvironmentCache
    builds: Sequence[Build]
    limit: int = 0  # most environments made ahead per round; 0 means twice the width
    installed: list[str] = field(default_factory=list)  # versions this prefetcher made
    _pending: list[Build] = field(default_factory=list)
    _wake: threading.Condition = field(default_factory=threading.Condition)
    _closed: bool = False
    _thread: threading.Thread | None = None

    def ahead(self, bisection: Bisection, probes: Sequence[int], width: int) -> None:
        """Replace the queue with what follows this round; the round's own builds are left out."""
        indices = upcoming(bisection, probes, width)[: self.limit or 2 * width]
        wanted = [self.builds[i] for i in indices if self.builds[i].python is None]
        with self._wake:
            self._pending = [b for b in wanted if self.cache.lookup(b) is None]
            self._wake.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="prefetch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._pending = []
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()

    def _next(self) -> Build | None:
        with self._wake:
            while not self._pending and not self._closed:
                self._wake.wait()
            return None if self._closed else self._pending.pop(0)

    def _work(self) -> None:
        while (build := self._next()) is not None:
            if not self._wait_for_room():
                continue  # a prefetch must never evict what a probe may be about to use
            with contextlib.suppress(ProvisionError):  # the probe itself reports it as SKIP
                self.cache.provision(build)
                self.installed.append(build.version)

    def _wait_for_room(self) -> bool:
        """Room for one more environment about as big as the biggest one there is.

        Until one exists (the first round's probe is making it) its size is unknown: wait.
        """
        while True:
            ready = [p for p in self.cache.envs.glob(f"{PREFIX}py*") if p.is_dir()]
            sizes = [tree_size(p) for p in ready]
            if sizes:
                return sum(sizes) + max(sizes) <= self.cache.budget_bytes
            with self._wake:
                if self._closed or self._wake.wait(timeout=0.1) and self._closed:
                    return False
