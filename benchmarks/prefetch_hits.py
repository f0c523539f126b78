"""How often the builds a bisection asks for after its first round were made ahead of time.

Counted with the bot's own core and prefetch order, no installs: round 1's verdicts come in
one at a time, in a random order and all before any new install is done (as when round 1's
probes run equally long); the engine stops what they made moot and starts new probes, with
the first K builds of the prefetch line made (K: what prefetch finishes during round 1's run,
4-6 on the 16-core GPU host at 2-5 s runs). A hit is a build running once every verdict is in
that was made; "all made" counts the positions where no probe had to wait for an install.

    python benchmarks/prefetch_hits.py [--builds 64] [--width 3] [--trials 4]

`--ignore-made` plans as the engine did before it knew which builds were made.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.bisection import Bisection  # noqa: E402
from bot.core.verdicts import Verdict  # noqa: E402
from bot.jobs.prefetch import upcoming  # noqa: E402


def after_round_one(size: int, width: int, first_bad: int, made: int, rng: random.Random,
                    use_made: bool) -> tuple[int, int]:
    """(builds running once round 1's verdicts are in, how many of them were made)."""
    state = Bisection(size, 0)
    first = list(state.next_probes(width))
    ready = frozenset(upcoming(state, first, width)[:made])
    running = list(first)
    arrival = first[:]
    rng.shuffle(arrival)
    for index in arrival:
        if index not in running:
            continue  # stopped: an earlier verdict made it moot
        running.remove(index)
        state = state.record(index, Verdict.BAD if index >= first_bad else Verdict.GOOD)
        running = [i for i in running if state.needs(i)]
        if state.outcome is not None:
            break
        new = state.next_probes(width, running, ready if use_made else ())
        running += list(new[: width - len(running)])
    return len(running), sum(i in ready for i in running)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", type=int, default=64)
    parser.add_argument("--width", type=int, default=3)
    parser.add_argument("--trials", type=int, default=4, help="arrival orders per position")
    parser.add_argument("--made", default="2,4,6,10", help="builds made ahead, K")
    parser.add_argument("--ignore-made", action="store_true")
    args = parser.parse_args(argv)
    print(f"{args.builds} builds, {args.width} probes at once, every position of the "
          f"regression, {args.trials} arrival orders each")
    print(f"{'made ahead':>10} {'hits':>6} {'all made':>9}")
    for made in (int(k) for k in args.made.split(",")):
        rng = random.Random(1)
        running = hits = whole = cases = 0
        for first_bad in range(1, args.builds):
            for _ in range(args.trials):
                count, hit = after_round_one(args.builds, args.width, first_bad, made, rng,
                                             not args.ignore_made)
                running, hits, cases = running + count, hits + hit, cases + 1
                whole += hit == count
        print(f"{made:>10} {hits / max(1, running):6.2f} {whole / cases:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
