"""How long the stored reproducers run, as a probe runs them.

Each case of `repro_suites/` (the demo suite aside) runs through the bot's own `Runner`: a fresh
process, a scrubbed environment, fresh Inductor and Triton caches, so every compile is cold as it
is in a bisection. Cases that need CUDA are left out where the interpreter has none. The median
is what `bisect_speed.py`'s fixed run time stands for.

    python benchmarks/reproducer_times.py --python /path/to/python-with-torch [--repeat 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from bot.adapters.runner import Runner
from bot.core.suite import Case, Requires
from bot.jobs.sweep_probe import load_suite

SUITES = Path(__file__).resolve().parent.parent / "repro_suites"


def has_cuda(python: str) -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([python, "-c", probe], check=False,
                          stderr=subprocess.DEVNULL).returncode == 0


def cases(cuda: bool) -> list[Case]:
    """The stored cases as the sweep loads them, but the demo suite's."""
    found, _ = load_suite(SUITES)  # a malformed case is the sweep's tests' business
    return [case for case in found if not case.case_id.startswith("demo/")
            and (cuda or case.meta.requires is not Requires.CUDA)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="an interpreter with torch")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case")
    args = parser.parse_args(argv)
    cuda = has_cuda(args.python)
    runner = Runner()
    seconds: list[float] = []
    print(f"{'case':<48}{'exit':>5}  seconds")
    for case in cases(cuda):
        for _ in range(args.repeat):
            result = runner.run(Path(args.python), Path(case.path), timeout_s=case.meta.timeout)
            seconds.append(result.seconds)
            print(f"{case.case_id:<48}{result.exit_code!s:>5}  {result.seconds:7.2f}",
                  flush=True)
    if not seconds:
        print("no case could run here")
        return 1
    print(f"{len(seconds)} runs (cuda: {cuda}): median {statistics.median(seconds):.2f} s, "
          f"min {min(seconds):.2f} s, max {max(seconds):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
