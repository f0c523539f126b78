"""Bisection speed: the plain way (venv + pip per probe) against the bot, side by side."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_mirror import build_bench_mirror  # noqa: E402
from bot.demo.index_server import IndexServer  # noqa: E402

START = dt.date(2026, 1, 1)
CONFIGS = {"a": "plain: venv + pip, sequential", "b": "bot, 1 worker",
           "c": "bot, 3 workers", "d": "bot, 1 worker, no prefetch",
           "e": "bot, 3 workers, no prefetch", "f": "bot, 1 worker, uv installs only",
           "g": "bot, 3 workers, uv installs only"}

REPRO = """\
import re, sys, time
import torch
stamp = re.search(r"dev(\\d{{8}})", torch.__version__)[1]
time.sleep({bad_seconds} if stamp >= "{first_bad}" else {seconds})
print("torch", torch.__version__, "bad" if stamp >= "{first_bad}" else "good")
sys.exit(1 if stamp >= "{first_bad}" else 0)
"""


@dataclass(frozen=True)
class Sizes:
    builds: int
    payload_mb: float
    run_s: float


def sizes_for(args: argparse.Namespace) -> Sizes:
    if args.tiny:
        base = Sizes(8, 1, 0.3)
    elif args.quick:
        base = Sizes(16, 20, 1.0)
    else:
        # 5 s: shorter than every stored reproducer measured on the GPU host (9-62 s) and
        # inside the run times at which b/a and c/b can both hold (docs/performance.md,
        # "The reproducer's run time"); `--run-seconds 2` is the harder case for c/b.
        base = Sizes(64, 100, 5.0)
    return Sizes(args.builds or base.builds,
                 base.payload_mb if args.payload_mb is None else args.payload_mb,
                 base.run_s if args.run_seconds is None else args.run_seconds)


def mirror_for(sizes: Sizes, cache: Path, real_deps: bool,
               deps_from: Path | None = None) -> tuple[Path, list[str]]:
    """The regression lives in the reproducer, so one mirror serves every seed: keep it."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    deps = "deps" if real_deps else "stub-deps"
    root = cache / f"mirror-v3-{sizes.builds}x{sizes.payload_mb:g}MB-{tag}-{deps}"
    stamp = root / "versions.json"
    if not stamp.exists():
        made = build_bench_mirror(root, start=START, days=sizes.builds,
                                  wheel_mb=sizes.payload_mb, python_tag=tag, real_deps=real_deps,
                                  deps_from=deps_from)
        stamp.write_text(json.dumps(made))
    return root, json.loads(stamp.read_text())


def child(config: str, setup: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in a fresh process, so peak RSS is its own. The disk is synced
    first: each configuration writes gigabytes, and the kernel throttles the writers that
    come after a backlog of dirty pages (a 0.9 s install took 2-3 s after one)."""
    os.sync()
    command = [sys.executable, __file__, "--child", config, "--setup", json.dumps(setup)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"configuration {config} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_child(config: str, setup: dict[str, Any]) -> dict[str, Any]:
    from benchmarks import speed_configs

    work = Path(setup["work"])
    if config == "a":
        return speed_configs.run_plain(setup["versions"], setup["index"],
                                       Path(setup["script"]), work)
    argv = [setup["script"], "--index", setup["index"], "--good", setup["versions"][0],
            "--bad", setup["versions"][-1], "--python", setup["python"],
            "--no-default-packages", "--cache-dir", str(work / f"cache-{config}")]
    workers = {"b": 1, "c": 3, "d": 1, "e": 3, "f": 1, "g": 3}[config]
    if config in "fg":
        argv.append("--no-derive")
    return speed_configs.run_bot(argv, workers, prefetch=config in "bcfg")


def figures(raw: dict[str, Any], run_s: float) -> dict[str, float]:
    rounds = raw["rounds"]
    probes = sum(len(r) for r in rounds)
    # The bot's own time: the wall time in which no probe was installing or running.
    busy = raw.get("busy", sum(max(i + r for i, r in rnd) for rnd in rounds if rnd))
    # What each round waited for its installs: the first round's cannot be hidden behind
    # anything; the later ones are what prefetch did not make in time.
    waits = [max((i for i, _ in rnd), default=0.0) for rnd in rounds] or [0.0]
    return {"wall": raw["wall"], "probes": probes, "rounds": len(rounds),
            "overhead": (raw["wall"] - busy) / max(1, probes), "rss": raw["rss_mb"],
            "efficiency": len(rounds) * run_s / raw["wall"], "wait_first": waits[0],
            "wait_later": sum(waits[1:]), "first_bad": raw["first_bad"],
            "stopped": raw.get("stopped", 0)}


def verdict(value: float, limit: float, most: bool = True) -> str:
    good = value <= limit if most else value >= limit
    return "met" if good else "MISSED"


def report(results: dict[str, dict[str, float]], sizes: Sizes, targets: bool = True) -> None:
    print(f"{'config':<32}{'wall s':>8}{'probes':>8}{'rounds':>8}{'ovh/probe s':>13}"
          f"{'peak RSS MB':>13}{'efficiency':>12}{'first bad':>11}"
          f"{'install wait s: round 1':>25}{'later':>7}{'stopped':>9}")
    for key, f in results.items():
        print(f"({key}) {CONFIGS[key]:<28}{f['wall']:>8.1f}{f['probes']:>8.3g}"
              f"{f['rounds']:>8.3g}{f['overhead']:>13.2f}{f['rss']:>13.1f}"
              f"{f['efficiency']:>12.2f}{f.get('first_bad', '-')!s:>11}"
              f"{f['wait_first']:>25.1f}{f['wait_later']:>7.1f}{f.get('stopped', 0):>9.3g}")
    if not targets:
        return
    wall = {k: f["wall"] for k, f in results.items()}
    lines = []
    if "a" in wall and "b" in wall:
        lines.append(("b/a", wall["b"] / wall["a"], 0.25, True))
    if "b" in wall and "c" in wall:
        lines.append(("c/b", wall["c"] / wall["b"], 0.6, True))
    if "b" in wall and "d" in wall:
        lines.append(("b/d (prefetch)", wall["b"] / wall["d"], 1.0, True))
    if "g" in wall and "c" in wall:
        lines.append(("c/g (derived envs)", wall["c"] / wall["g"], 1.0, True))
    if "b" in results:
        b = results["b"]
        lines += [("probes of (b)", b["probes"], math.ceil(math.log2(sizes.builds)) + 2, True),
                  ("efficiency of (b)", b["efficiency"], 0.7, False)]
    for key, f in results.items():
        if key != "a":
            lines += [(f"overhead/probe ({key}) s", f["overhead"], 0.3, True),
                      (f"peak RSS ({key}) MB", f["rss"], 200, True)]
    for name, value, limit, most in lines:
        sign, met = ("<=" if most else ">="), verdict(value, limit, most)
        print(f"  {name:<26}{value:>8.2f}   target {sign} {limit:<6g} {met}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="16 builds of 20 MB, 1 s runs")
    parser.add_argument("--tiny", action="store_true", help="8 builds of 1 MB (smoke test)")
    parser.add_argument("--seed", type=int, help="where the regression is planted")
    parser.add_argument("--positions", type=int, default=1,
                        help="plant the regression at this many builds (drawn from the seed) "
                        "and run every configuration at each; the report adds the means. "
                        "With 3 workers a position takes 3 or 4 rounds, so one position "
                        "alone makes c/b a matter of luck")
    parser.add_argument("--at", help="plant the regression at these builds (comma-separated) "
                        "instead of drawing them from the seed")
    parser.add_argument("--builds", type=int)
    parser.add_argument("--payload-mb", type=float)
    parser.add_argument("--run-seconds", type=float)
    parser.add_argument("--bad-run-seconds", type=float,
                        help="what a failing build runs instead (a crash comes early)")
    # The plain way runs last. Each configuration should start from the same machine, and the
    # one right after (a)'s 150 s of pip writing ~3 GB was measured slower on the GPU host:
    # (b) took 19.9 and 20.1 s there, against 16.6-17.5 s in four runs where it came first.
    # (a)'s own 150 s are not moved by a few seconds either way.
    parser.add_argument("--configs", default="bcdea",
                        help="which of a, b, c, d, e to run, in this order")
    parser.add_argument("--deps-from", type=Path,
                        help="a folder holding torch's dependency wheels (pip download), for a "
                        "machine without network")
    parser.add_argument("--stub-deps", action="store_true",
                        help="small stand-ins for torch's dependencies instead of the real "
                        "wheels (which are downloaded from PyPI once)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tbb-bench",
                        help="where the generated mirror is kept between runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--timeline", action="store_true",
                        help="print when each bot configuration's installs and runs happened")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--setup", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def planted(seed: int, builds: int, count: int) -> list[int]:
    """Where the regression goes: `count` distinct builds, the first as before `--positions`."""
    rng = random.Random(seed)
    chosen: list[int] = []
    while len(chosen) < min(count, builds - 1):
        position = rng.randrange(1, builds)
        if position not in chosen:
            chosen.append(position)
    return chosen


def run_position(first_bad: int, configs: str, base: dict[str, Any], run_s: float,
                 timeline: bool = False, bad_s: float | None = None
                 ) -> dict[str, dict[str, float]]:
    """Every configuration, side by side, with the regression at `first_bad`, each from an
    empty cache of its own. The caches stay until the run ends (about 5 GB for (b) and 10 GB
    for (c) at the full size): deleting them between configurations made the ones after it
    slower on the GPU host ((b) 16.5 s, then 30.6 and 35.5 s), whose disk is mounted with
    `discard`."""
    work = Path(base["work"]) / f"at-{first_bad}"
    work.mkdir()
    script = work / "repro.py"
    stamp = (START + dt.timedelta(days=first_bad)).strftime("%Y%m%d")
    script.write_text(REPRO.format(seconds=run_s, first_bad=stamp,
                                   bad_seconds=run_s if bad_s is None else bad_s))
    results: dict[str, dict[str, float]] = {}
    for config in configs:
        setup = {**base, "work": str(work), "script": str(script)}
        raw = child(config, setup)
        results[config] = figures(raw, run_s)
        print(f"({config}) {CONFIGS[config]}: {results[config]['wall']:.1f} s", flush=True)
        if timeline:
            for seconds, what, version in raw.get("timeline", []):
                print(f"    {seconds:7.2f} s  {what:<15} {version}")
    return results


def mean_over(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each figure's mean over the positions; peak RSS is the highest."""
    merged: dict[str, dict[str, float]] = {}
    for config in runs[0]:
        rows = [run[config] for run in runs]
        merged[config] = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]
                          if key != "first_bad"}
        merged[config]["rss"] = max(r["rss"] for r in rows)
    return merged


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args.child, json.loads(args.setup))))
        return 0
    sizes = sizes_for(args)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    positions = ([int(n) for n in args.at.split(",")] if args.at
                 else planted(seed, sizes.builds, args.positions))
    print(f"seed {seed}: {sizes.builds} builds of {sizes.payload_mb:g} MB, reproducer runs "
          f"{sizes.run_s:g} s, regression planted at build "
          f"{', '.join(map(str, positions))}", flush=True)
    started = time.monotonic()
    root, versions = mirror_for(sizes, args.cache, real_deps=not (args.stub_deps or args.tiny),
                                deps_from=args.deps_from)
    print(f"mirror ready in {time.monotonic() - started:.1f} s: {root}", flush=True)
    runs: list[dict[str, dict[str, float]]] = []
    several = len(positions) > 1
    with tempfile.TemporaryDirectory(prefix="tbb-bench-") as work, IndexServer(root) as server:
        base = {"work": work, "index": server.variant_url("cpu"), "versions": versions,
                "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
        for number, first_bad in enumerate(positions, 1):
            if several:
                print(f"position {number} of {len(positions)}: build {first_bad}", flush=True)
            runs.append(run_position(first_bad, args.configs, base, sizes.run_s,
                                     args.timeline, args.bad_run_seconds))
        # Reported before the caches go: deleting them takes a minute at the full size.
        for first_bad, results in zip(positions, runs, strict=True):
            if several:
                print(f"\nregression at build {first_bad}:")
            report(results, sizes, targets=not several)
        if several:
            print(f"\nmean over the {len(positions)} positions (the targets on the means):")
            report(mean_over(runs), sizes)
        sys.stdout.flush()
    wrong = [f"{k} (at {p})" for p, results in zip(positions, runs, strict=True)
             for k, f in results.items() if f["first_bad"] != p]
    if args.json:
        record = {"seed": seed, "positions": positions, "results": runs[0],
                  "by_position": [dict(results) for results in runs]}
        if several:
            record["mean"] = mean_over(runs)
        args.json.write_text(json.dumps(record, indent=2))
    if wrong:
        print(f"WRONG first bad build from {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
