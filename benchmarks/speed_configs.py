"""What one benchmark configuration runs, in its own process: the plain way or the bot."""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_mirror import pip_environment
from bot.adapters.runner import Runner
from bot.core.bisection import Bisection
from bot.core.results import BisectResult
from bot.jobs import local
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.prefetch import Prefetcher


def _peak_rss_mb() -> float:
    """This process's peak RSS. Linux carries ru_maxrss over from the parent across fork and
    exec (exec_mmap's setmax_mm_hiwater_rss), so the driver's peak would leak into it; VmHWM is
    the high-water mark of this process's own memory map, and ru_maxrss the fallback."""
    with contextlib.suppress(OSError, StopIteration, ValueError):
        lines = Path("/proc/self/status").read_text().splitlines()
        return int(next(ln for ln in lines if ln.startswith("VmHWM:")).split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                          env=env)
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])
    return time.monotonic() - started, done.returncode


def plain_probe(version: str, index: str, script: Path, work: Path) -> tuple[float, float, bool]:
    """What a person does by hand: a fresh venv, `pip install --pre torch==V --index-url ...`
    (which brings torch's dependencies, from pip's cache after the first time), run."""
    folder = Path(tempfile.mkdtemp(prefix="plain-", dir=work))
    env = pip_environment(PIP_CACHE_DIR=str(work / "pip-cache"))
    try:
        venv_s, _ = _timed([sys.executable, "-m", "venv", str(folder / "venv")], env)
        pip = [str(folder / "venv/bin/pip"), "install", "-q", "--pre", f"torch=={version}",
               "--index-url", index]
        pip_s, code = _timed(pip, env)
        if code != 0:
            raise SystemExit(f"plain install of torch=={version} failed")
        run_s, code = _timed([str(folder / "venv/bin/python"), str(script)], env)
        return venv_s + pip_s, run_s, code == 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_plain(versions: list[str], index: str, script: Path, work: Path) -> dict[str, Any]:
    """Sequential binary search between known ends: first is good, last is bad."""
    started = time.monotonic()
    good, bad = 0, len(versions) - 1
    rounds: list[list[tuple[float, float]]] = []
    while bad - good > 1:
        middle = (good + bad) // 2
        install_s, run_s, passed = plain_probe(versions[middle], index, script, work)
        rounds.append([(install_s, run_s)])
        good, bad = (middle, bad) if passed else (good, middle)
    return {"wall": time.monotonic() - started, "rounds": rounds, "first_bad": bad,
            "rss_mb": _peak_rss_mb()}


class RoundLog:
    """A progress sink that remembers which builds each batch started, how many probes were
    stopped because other verdicts made them moot, and when each probe was under way."""

    def __init__(self) -> None:
        self.rounds: list[tuple[int, ...]] = []
        self.stopped = 0
        self.began: dict[str, float] = {}
        self.spans: list[tuple[float, float]] = []
        self.start = time.monotonic()
        self.timeline: list[tuple[float, str, str]] = []  # (seconds, what, version)

    def note(self, what: str, version: str) -> None:
        self.timeline.append((round(time.monotonic() - self.start, 2), what, version))

    def timed(self, provision: Any) -> Any:
        """`provision` that notes when each environment was asked for and when it was there."""
        def wrapper(build: Any, cancel: Any = None, background: bool = False) -> Any:
            kind = "prefetch" if background else "install"
            self.note(f"{kind} start", build.version)
            try:
                return provision(build, cancel, background)
            finally:
                self.note(f"{kind} end", build.version)
        return wrapper

    def __call__(self, event: str, **details: Any) -> None:
        now = time.monotonic()
        if event in ("running", "probed", "stopped"):
            build = details.get("build") or details["record"]
            self.note(event, build.version)
        if event == "round":
            self.rounds.append(tuple(details["indices"]))
        elif event == "installing":
            self.began[details["build"].version] = now
        elif event in ("probed", "stopped"):
            version = details["record"].version if event == "probed" else details["build"].version
            self.spans.append((self.began.pop(version, now), now))
            self.stopped += event == "stopped"

    def busy(self) -> float:
        """Seconds in which some probe was installing or running: the rest of the wall time
        is the bot's own (the probes of (c) overlap, so their sum would say too much)."""
        total, reach = 0.0, float("-inf")
        for start, end in sorted(self.spans):
            total += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        return total


def run_bot(argv: list[str], workers: int, prefetch: bool) -> dict[str, Any]:
    """The real bot: index listing, window, Engine, EnvironmentCache and Runner."""
    started = time.monotonic()
    parser = argparse.ArgumentParser()
    local.add_bisect_arguments(parser)
    args = parser.parse_args([*argv, "--workers", str(workers)])
    plan = local.plan_from_args(args)
    log = RoundLog()
    options = ProbeOptions(timeout_s=args.timeout)
    cache = local.make_cache(args, plan)
    cache.provision = log.timed(cache.provision)  # type: ignore[method-assign]
    prober = Prober(cache, Runner(), plan.script, options, log)
    start = BisectResult(builds=plan.builds, bisection=Bisection(len(plan.builds), 0),
                         probes=(), script_name=plan.script.name, index_url=plan.index_url)
    ahead = Prefetcher(prober.cache, plan.builds) if prefetch else None
    result = Engine(plan.builds, prober, workers, log, prefetch=ahead).run(start)
    by_index = {p.index: p for p in result.probes}
    # A stopped probe has no record: a round is what its verdicts took, and a batch whose
    # probes were all stopped gave none, so it is no round.
    rounds = [batch for batch in ([(by_index[i].install_seconds or 0.0, by_index[i].seconds)
                                   for i in r if i in by_index] for r in log.rounds) if batch]
    outcome = result.outcome
    return {"wall": time.monotonic() - started, "rounds": rounds, "stopped": log.stopped,
            "busy": log.busy(), "timeline": log.timeline,
            "first_bad": outcome.after if outcome else None, "rss_mb": _peak_rss_mb()}
