"""A round's probes that its other verdicts make moot are stopped, not waited for."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bot.adapters.environments import EnvironmentCache
from bot.adapters.runner import Runner
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection, Status
from bot.core.builds import Selection, select_builds
from bot.core.results import BisectResult
from bot.core.verdicts import Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.progress import TerminalProgress

FIRST_BAD = "2.13.0.dev20260521+cpu"

# Fails from FIRST_BAD on; the builds named in SLOW first write their pid, then hang.
SCRIPT = """\
import os, sys, time, torch
if torch.__version__ in {slow!r}:
    open(os.path.join({pids!r}, torch.__version__), "w").write(str(os.getpid()))
    time.sleep(300)
raise SystemExit(torch.__version__ >= {first_bad!r})
"""


def _moot_in_each_round(size: int, first_bad: int, width: int) -> set[int]:
    """The probes of each round that the round's other verdicts make moot."""
    state, moot = Bisection(size, 0), set()
    while state.outcome is None:
        probes = state.next_probes(width)
        for index in probes:
            others = state
            for other in probes:
                if other != index:
                    others = others.record(other, Verdict.GOOD if other < first_bad
                                           else Verdict.BAD)
            if not others.needs(index):
                moot.add(index)
        for index in probes:
            state = state.record(index, Verdict.GOOD if index < first_bad else Verdict.BAD)
    return moot


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_moot_probes_are_stopped_and_the_answer_stands(index_server, cache_dir, tmp_path,
                                                      capsys) -> None:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    links = WheelIndex(index_server.variant_url("cpu")).project_links("torch")
    builds = select_builds(links, Selection(tag, variant="cpu"))
    first_bad = next(i for i, b in enumerate(builds) if b.version == FIRST_BAD)
    moot = _moot_in_each_round(len(builds), first_bad, 3)
    assert moot, "the plan has no moot probe, so this test would show nothing"
    slow = sorted(builds[i].version for i in moot)
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "repro.py"
    script.write_text(SCRIPT.format(slow=slow, pids=str(pids), first_bad=FIRST_BAD))
    events: list[tuple[str, str]] = []
    terminal = TerminalProgress(len(builds), 3, stream=sys.stderr)

    def progress(event: str, **details) -> None:
        if "build" in details:
            events.append((event, details["build"].version))
        terminal(event, **details)

    # A probe that is not stopped hangs until this deadline and comes back SKIP (timed out).
    prober = Prober(EnvironmentCache(cache_dir, extra_packages=()), Runner(), script,
                    ProbeOptions(timeout_s=60), progress)
    start = BisectResult(builds=tuple(builds), bisection=Bisection(len(builds), 0), probes=(),
                         script_name=script.name)
    began = time.monotonic()
    result = Engine(builds, prober, 3, progress).run(start)
    # Stopped means killed: waiting for the hung runs would take the 60 s deadline at least.
    assert time.monotonic() - began < 50

    assert result.outcome is not None and result.outcome.status is Status.FOUND
    assert result.version_at(result.outcome.after) == FIRST_BAD
    assert sorted(version for event, version in events if event == "stopped") == slow
    assert not set(slow) & {p.version for p in result.probes}
    assert all(p.verdict is not Verdict.SKIP for p in result.probes)
    started = [int(path.read_text()) for path in pids.iterdir()]
    assert not [pid for pid in started if _alive(pid)], "a stopped run is still running"
    assert "made it moot" in capsys.readouterr().err
