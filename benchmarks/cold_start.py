"""Round 1 on a cold cache: k environments made at once, as k workers (`--workers`, `--gpus`)
start a bisection on a fresh runner, with the dependency seed (`EnvironmentCache._seeder`) and
without it, side by side.

A CUDA nightly depends on GBs of `nvidia-*` wheels, the same for neighbouring builds. uv 0.13
lets processes that share a cache fetch and unpack the same wheel at once, so k installs that
start together fetched every dependency k times. Here k builds of the demo mirror require one
big dependency (`--dep-mb` of incompressible bytes, standing for the `nvidia-*` wheels); the
index is served on 127.0.0.1 through one link of `--link-mb-s` that every download shares
(a runner's network), and the k environments are made at once on a fresh cache, with and
without the seed, alternating, `--repeat` times each.

    python benchmarks/cold_start.py [--workers 3] [--dep-mb 200] [--build-mb 20]
        [--link-mb-s 100] [--repeat 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters.environments import EnvironmentCache  # noqa: E402
from bot.adapters.wheel_index import WheelIndex  # noqa: E402
from bot.core.builds import Build, Selection, select_builds  # noqa: E402
from bot.demo.index_server import IndexServer  # noqa: E402
from bot.demo.mirror import build_mirror  # noqa: E402
from bot.demo.wheels import build_wheel  # noqa: E402

DEP = "nvlike"


def round_one(server: IndexServer, work: Path, workers: int, seed: bool) -> tuple[float, int]:
    """Seconds until the `workers` newest builds are all made, and how many times the
    dependency's wheel was fetched."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    links = WheelIndex(server.variant_url("cpu")).project_links()
    builds = select_builds(links, Selection(f"cp{python.replace('.', '')}", variant="cpu"))
    cache = EnvironmentCache(root=work, python=python, index_url=server.variant_url("cpu"),
                             extra_packages=(), seed_dependencies=seed)
    before = len(server.requests)
    errors: list[BaseException] = []

    def make(build: Build) -> None:
        try:
            cache.provision(build)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=make, args=(b,)) for b in builds[-workers:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    if errors:
        raise SystemExit(f"an install failed: {errors[0]}")
    fetched = sum(path.endswith(".whl") and f"/{DEP}-" in path
                  for path in server.requests[before:])
    return wall, fetched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--dep-mb", type=float, default=200)
    parser.add_argument("--build-mb", type=float, default=20, help="payload of each torch build")
    parser.add_argument("--link-mb-s", type=float, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tbb-cold-") as tmp:
        root = Path(tmp) / "mirror"
        build_mirror(root, start=dt.date(2026, 5, 1), days=args.workers, missing=(),
                     requires=(DEP,), payload_bytes=int(args.build_mb * 2**20))
        size = int(args.dep_mb * 2**20)
        build_wheel(root / "cpu", DEP, "1.0", {f"{DEP}/__init__.py": "",
                                                f"{DEP}/lib.so": os.urandom(size)})
        print(f"{args.workers} installs at once on a cold cache; a {args.dep_mb:g} MB dependency;"
              f" one link of {args.link_mb_s:g} MB/s", flush=True)
        walls: dict[bool, list[float]] = {True: [], False: []}
        with IndexServer(root, link_bytes_s=args.link_mb_s * 1e6) as server:
            for trial in range(args.repeat):
                for seed in (trial % 2 == 0, trial % 2 == 1):
                    wall, fetched = round_one(server, Path(tmp) / f"cache-{trial}-{seed}",
                                              args.workers, seed)
                    walls[seed].append(wall)
                    print(f"  {'seed   ' if seed else 'no seed'}  {wall:6.1f} s  dependency "
                          f"fetched {fetched}x ({fetched * args.dep_mb:g} MB)", flush=True)
    seeded, plain = statistics.mean(walls[True]), statistics.mean(walls[False])
    print(f"mean: seed {seeded:.1f} s, no seed {plain:.1f} s, ratio {seeded / plain:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
