"""How many torch environments a second this machine makes, by installs at once and by the
threads each uv install may use (`UV_CONCURRENT_INSTALLS`, uv's unzip and link pool); with
`--derive`, also how many the bot derives from a made one (`bot.adapters.delta_install`).

uv unpacks a local wheel on a thread pool as large as the machine. Several installs at once
(a round's probes plus prefetch) each start such a pool; this measures whether capping each
one's pool makes more environments a second than letting them all take every core.

    python benchmarks/install_throughput.py [--at-once 1,4,8] [--threads 0,1,4]

Every trial installs distinct builds of the speed benchmark's index (`bisect_speed.py`'s
mirror, made on first use) into fresh environments sharing one uv cache, as the bot's
`EnvironmentCache` does; `--threads 0` is uv's default.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bisect_speed import Sizes, mirror_for  # noqa: E402
from bot.adapters.delta_install import read_wheel, remember  # noqa: E402
from bot.adapters.environments import require_uv  # noqa: E402


def install(uv: str, wheel: Path, venv: Path, cache: Path, threads: int) -> float:
    env = {**os.environ, "UV_CACHE_DIR": str(cache), "UV_NO_CONFIG": "1",
           "UV_PYTHON_DOWNLOADS": "never"}
    if threads:
        env["UV_CONCURRENT_INSTALLS"] = str(threads)
    started = time.perf_counter()
    for args in (["venv", "--python", sys.executable, str(venv)],
                 ["pip", "install", "--no-deps", "--python", str(venv / "bin" / "python"),
                  str(wheel)]):
        subprocess.run([uv, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def derive(donor: Path, wheel: Path, venv: Path) -> float:
    """The bot's derived install (`bot.adapters.delta_install`), in its own process as the
    environment cache runs it."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bot.adapters.delta_install", str(donor), str(wheel),
                    str(venv)], check=True, capture_output=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at-once", default="1,4,8")
    parser.add_argument("--threads", default="0,1,4")
    parser.add_argument("--payload-mb", type=float, default=100)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tbb-bench")
    parser.add_argument("--work", type=Path, help="where the environments go (default: --cache)")
    parser.add_argument("--derive", action="store_true",
                        help="also derive as many environments at once from one uv made, "
                        "as the bot does for a build whose neighbour is made")
    args = parser.parse_args(argv)
    at_once = [int(n) for n in args.at_once.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    needed = sum(at_once) * (len(threads) + args.derive) + 1
    root, _ = mirror_for(Sizes(max(64, needed), args.payload_mb, 2.0), args.cache,
                         real_deps=False)
    wheels = sorted((root / "cpu").glob("torch-*.whl"))
    uv = require_uv()
    work = Path(tempfile.mkdtemp(prefix="install-throughput-", dir=args.work or args.cache))
    print(f"{os.cpu_count()} cores, uv at {uv}, {len(wheels)} builds of {args.payload_mb:g} MB")
    print(f"{'uv threads':>10} {'at once':>8} {'wall s':>7} {'each s':>13} {'envs/s':>7}")
    donor: Path | None = None
    try:
        for count in at_once:
            for pool in threads:
                batch, wheels = wheels[:count], wheels[count:]
                cache = work / f"uv-cache-{count}-{pool}"
                os.sync()
                started = time.perf_counter()
                with ThreadPoolExecutor(count) as executor:
                    each = list(executor.map(
                        install, [uv] * count, batch, [work / w.stem for w in batch],
                        [cache] * count, [pool] * count))
                wall = time.perf_counter() - started
                print(f"{pool or 'default':>10} {count:>8} {wall:7.2f} "
                      f"{min(each):6.2f}-{max(each):<6.2f} {count / wall:7.2f}", flush=True)
            if args.derive:
                if donor is None:
                    first, wheels = wheels[0], wheels[1:]
                    donor = work / "donor"
                    install(uv, first, donor, work / "uv-cache-donor", 0)
                    remember(donor, read_wheel(first))
                batch, wheels = wheels[:count], wheels[count:]
                os.sync()
                started = time.perf_counter()
                with ThreadPoolExecutor(count) as executor:
                    each = list(executor.map(derive, [donor] * count, batch,
                                             [work / f"derived-{w.stem}" for w in batch]))
                wall = time.perf_counter() - started
                print(f"{'derived':>10} {count:>8} {wall:7.2f} "
                      f"{min(each):6.2f}-{max(each):<6.2f} {count / wall:7.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
