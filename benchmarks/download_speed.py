"""Wheel downloads: one connection against the bot's ranges over several, side by side.

A nightly is fetched by `WheelStore` in ranges of 32 MB over 4 connections (each range resumed
where a cut leaves it). This serves one wheel-sized file on 127.0.0.1, optionally holding each
connection to a rate (what one TCP connection gets from a CDN far away, when that is less than
the link), and times the store with 1 connection and with N, alternating, from empty stores:

    python benchmarks/download_speed.py [--mb 200] [--rate-mb-s 40] [--connections 4]

`--rate-mb-s 0` serves as fast as the machine can: then the figure is the cost of the ranges
themselves (their requests, and hashing behind the writers instead of while reading).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters.wheel_index import WheelIndex  # noqa: E402
from bot.adapters.wheel_store import WheelStore  # noqa: E402
from bot.core.builds import Build, Selection, select_builds  # noqa: E402
from bot.demo.index_server import IndexServer  # noqa: E402

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def make_wheel(root: Path, megabytes: int) -> None:
    """Incompressible bytes, stored in a wheel under a nightly's file name (the store checks
    that what it keeps reads as a wheel: a zip with a `.dist-info/WHEEL`)."""
    folder = root / "cpu"
    folder.mkdir(parents=True)
    name = f"torch-2.13.0.dev20260101+cpu-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"
    block = (bytes(range(256)) * 3907)[:1_000_000]  # varied: nothing on the way compresses it
    with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_STORED) as wheel:
        wheel.writestr("torch-2.13.0.dev20260101+cpu.dist-info/WHEEL",
                       f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}-{TAG}-any\n")
        with wheel.open("torch/payload.bin", "w", force_zip64=True) as out:
            for number in range(megabytes):
                out.write(number.to_bytes(4, "little") + block[4:])


def timed_fetch(build: Build, work: Path, connections: int) -> float:
    store_root = Path(tempfile.mkdtemp(prefix="store-", dir=work))
    try:
        started = time.monotonic()
        WheelStore(store_root, connections=connections).fetch(build)
        return time.monotonic() - started
    finally:
        shutil.rmtree(store_root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="the wheel's size")
    parser.add_argument("--rate-mb-s", type=float, default=40.0,
                        help="each connection at most this fast; 0: unlimited")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tbb-dl-") as scratch:
        work = Path(scratch)
        make_wheel(work / "index", args.mb)
        with IndexServer(work / "index", rate_bytes_s=args.rate_mb_s * 1e6) as server:
            links = WheelIndex(server.variant_url("cpu")).project_links()
            build = select_builds(links, Selection(TAG, variant="cpu"))[0]
            one: list[float] = []
            many: list[float] = []
            for _ in range(args.repeat):  # alternating, so drift touches both alike
                one.append(timed_fetch(build, work, 1))
                many.append(timed_fetch(build, work, args.connections))
    limit = f"{args.rate_mb_s:g} MB/s a connection" if args.rate_mb_s else "no rate limit"
    print(f"{args.mb} MB wheel, {limit}, median of {args.repeat}:")
    for label, runs in ((" 1 connection", one), (f" {args.connections} connections", many)):
        median = statistics.median(runs)
        print(f"  {label:<15} {median:6.2f} s  {args.mb / median:7.1f} MB/s  "
              f"({', '.join(f'{r:.2f}' for r in runs)})")
    print(f"  ratio {args.connections}/1: {statistics.median(many) / statistics.median(one):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
