"""A model of a bisection's wall time on one machine, to compare scheduling policies over
every position of the regression without spending GPU-host time on each.

It is a model, not a measurement: the bot's own core (`Bisection.next_probes`, `needs`) and
prefetch line (`upcoming`) decide what runs, as in `Engine`; time passes in a small loop in
which installs share the machine's install throughput as measured on the 16-core GPU host
(`install_throughput.py`: 0.64 environments a second alone, 1.60 at 4 at once, 1.96 at 8;
with `--derive`, those made after the first environment are derivations, 0.83 / 2.44 / 4.89),
plus a fixed 0.2 s per install for the venv, the index and the `import torch` check, plus
torch's dependencies, unpacked once by the first installs. Runs take `--run-seconds`.
Policies compared: the prefetch order (`--order`), how far a split may move to use a made
build (`--slack`, 0 for not at all), and the prefetch threads.

    python benchmarks/schedule_model.py [--run-seconds 2] [--builds 64]

Checked against `bisect_speed.py` on the GPU host in docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bot.core.bisection as core  # noqa: E402
from bot.core.bisection import Bisection  # noqa: E402
from bot.core.verdicts import Verdict  # noqa: E402
from bot.jobs import prefetch  # noqa: E402

RATE = ((1, 0.64), (4, 1.60), (8, 1.96), (12, 2.21))  # installs at once, environments a second
# Derived from a made environment (`delta_install`), measured the same way on the same host.
DERIVED_RATE = ((1, 0.83), (4, 2.44), (8, 4.89), (12, 4.89))
FIXED_S = 0.2  # per install, outside the shared unpacking
DEPS = 0.2  # extra work (environments) for installs that start before any is made
STEP = 0.01

Order = Callable[[Bisection, Sequence[int], int], Sequence[int]]


def rate(n: int, table: Sequence[tuple[int, float]] = RATE) -> float:
    """Environments a second with n installs at once (linear between measured points)."""
    for (n0, r0), (n1, r1) in zip(table, table[1:], strict=False):
        if n <= n1:
            return r0 + (r1 - r0) * (max(n, n0) - n0) / (n1 - n0)
    return table[-1][1]


@dataclass
class Install:
    work: float
    fixed: float = FIXED_S
    for_probe: bool = False
    derived: bool = False


@dataclass
class Model:
    size: int
    width: int
    first_bad: int
    run_s: float
    order: Order
    slack: int  # 0: splits never move for a made build
    threads: int = 4
    derive: bool = False
    first_s: float = 0.0  # round 1's installs take this long, when set
    fixed_s: float = FIXED_S
    derived_rate: Sequence[tuple[int, float]] = DERIVED_RATE
    made: set[int] = field(default_factory=set)
    installs: dict[int, Install] = field(default_factory=dict)
    running: dict[int, float] = field(default_factory=dict)  # probe -> when its run ends
    waiting: set[int] = field(default_factory=set)  # probes waiting for their install
    pending: list[int] = field(default_factory=list)
    now: float = 0.0
    probes: int = 0

    def live(self) -> list[int]:
        return [*self.running, *self.waiting]

    def start(self, index: int) -> None:
        self.probes += 1
        if index in self.made:
            self.running[index] = self.now + self.run_s
            return
        self.waiting.add(index)
        install = self.installs.setdefault(index, self.new_install())
        install.for_probe = True

    def new_install(self) -> Install:
        if self.first_s and not self.made:
            return Install(0.0, fixed=self.first_s)
        return Install(1.0 + (DEPS if not self.made else 0.0), fixed=self.fixed_s,
                       derived=self.derive and bool(self.made))

    def plan(self, state: Bisection) -> None:
        live = self.live()
        ready = self.made if self.slack else ()
        for index in state.next_probes(self.width, live, ready)[: self.width - len(live)]:
            self.start(index)
        wanted = [i for i in self.order(state, self.live(), self.width)]
        keep = set(wanted) | set(self.live())
        for index in [i for i, inst in self.installs.items() if i not in keep]:
            del self.installs[index]  # a prefetch no longer needed is called off
        self.pending = [i for i in wanted if i not in self.made and i not in self.installs]

    def tick(self) -> None:
        prefetching = sum(not i.for_probe for i in self.installs.values())
        while self.made and self.pending and prefetching < self.threads:
            self.installs[self.pending.pop(0)] = self.new_install()
            prefetching += 1
        n = max(1, len(self.installs))
        for index, install in list(self.installs.items()):
            if install.fixed > 0:
                install.fixed -= STEP
                continue
            install.work -= rate(n, self.derived_rate if install.derived else RATE) / n * STEP
            if install.work <= 0:
                del self.installs[index]
                self.made.add(index)
                if index in self.waiting:
                    self.waiting.discard(index)
                    self.running[index] = self.now + self.run_s
        self.now += STEP

    def run(self) -> float:
        saved, core.READY_SLACK = core.READY_SLACK, self.slack or core.READY_SLACK
        try:
            return self._run()
        finally:
            core.READY_SLACK = saved

    def _run(self) -> float:
        state = Bisection(self.size, 0)
        self.plan(state)
        while state.outcome is None:
            self.tick()
            done = [i for i, end in self.running.items() if end <= self.now]
            for index in done:
                if self.running.pop(index, None) is None:
                    continue  # stopped by a verdict of the same moment
                verdict = Verdict.BAD if index >= self.first_bad else Verdict.GOOD
                state = state.record(index, verdict)
                for other in [i for i in self.live() if not state.needs(i)]:
                    self.running.pop(other, None)
                    self.waiting.discard(other)
                    if other in self.installs and other not in self.made:
                        self.installs[other].for_probe = False
            if done and state.outcome is None:
                self.plan(state)
        assert state.outcome is not None and state.outcome.after == self.first_bad
        return self.now


def singles_only(state: Bisection, probes: Sequence[int], width: int) -> list[int]:
    """The prefetch line before the joint outcomes were in it."""
    return prefetch.interleaved(prefetch.successor_plans(state, probes, width)[0], probes)


def whole_outcomes(state: Bisection, probes: Sequence[int], width: int) -> list[int]:
    """Every build of each joint outcome, the widest first, then the single verdicts'."""
    singles, joint = prefetch.successor_plans(state, probes, width)
    whole = [i for plan in sorted(joint, key=len, reverse=True) for i in plan if i not in probes]
    return list(dict.fromkeys([*whole, *prefetch.interleaved(singles, probes)]))


ORDERS: dict[str, Order] = {"bot": prefetch.upcoming, "singles": singles_only,
                            "whole": whole_outcomes}


def mean_wall(size: int, width: int, run_s: float, order: str, slack: int, threads: int,
              **options: Any) -> float:
    walls = [Model(size, width, bad, run_s, ORDERS[order], slack, threads, **options).run()
             for bad in range(1, size)]
    return sum(walls) / len(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", type=int, default=64)
    parser.add_argument("--run-seconds", type=float, default=2.0)
    parser.add_argument("--orders", default="singles,bot,whole")
    parser.add_argument("--slacks", default="0,3,2")
    parser.add_argument("--threads", default="4")
    parser.add_argument("--derive", action="store_true",
                        help="installs after the first made environment are derivations "
                             "(DERIVED_RATE), as the bot makes them by default")
    parser.add_argument("--first-seconds", type=float, default=0.0,
                        help="round 1's installs of (c) take this long (0: from the rates)")
    parser.add_argument("--instant", action="store_true",
                        help="every install after round 1 takes no time: the floor")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {"derive": args.derive or args.instant}
    if args.instant:
        options.update(fixed_s=0.0, derived_rate=((1, 1e4), (12, 1e5)))
    print(f"{args.builds} builds, {args.run_seconds:g} s runs, mean over every position")
    b = mean_wall(args.builds, 1, args.run_seconds, "bot", 3, 4, **options)
    print(f"(b) 1 worker: {b:.1f} s")
    print(f"{'order':<9}{'slack':>6}{'threads':>8}{'(c) s':>8}{'c/b':>6}")
    for order in args.orders.split(","):
        for slack in (int(s) for s in args.slacks.split(",")):
            for threads in (int(t) for t in args.threads.split(",")):
                c = mean_wall(args.builds, 3, args.run_seconds, order, slack, threads,
                              first_s=args.first_seconds, **options)
                print(f"{order:<9}{slack or '-':>6}{threads:>8}{c:8.1f}{c / b:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
