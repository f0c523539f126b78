"""Rolling workers: moot probes are stopped, held failures are not probed again."""

from __future__ import annotations

import sys
import time

from bot.adapters.environments import EnvironmentCache
from bot.adapters.runner import Runner
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection, Status
from bot.core.builds import Selection, select_builds
from bot.core.results import BisectResult
from bot.core.verdicts import Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.progress import TerminalProgress
from tests.processes import alive

# Fails from first_bad on; the builds named in hung first write their pid, then hang.
SCRIPT = """\
import os, sys, time, torch
if torch.__version__ in {hung!r}:
    open(os.path.join({pids!r}, torch.__version__), "w").write(str(os.getpid()))
    time.sleep(300)
raise SystemExit(torch.__version__ >= {first_bad!r})
"""


def _builds(index_server) -> list:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    links = WheelIndex(index_server.variant_url("cpu")).project_links("torch")
    return select_builds(links, Selection(tag, variant="cpu"))


def _bisect(builds, cache_dir, script, workers: int, progress, find_fix: bool = False
            ) -> BisectResult:
    """The real engine, cache and runner. A probe that is waited for instead of stopped
    hangs until the 60 s deadline and comes back SKIP (timed out)."""
    prober = Prober(EnvironmentCache(cache_dir, extra_packages=()), Runner(), script,
                    ProbeOptions(timeout_s=60), progress)
    start = BisectResult(builds=tuple(builds), probes=(), script_name=script.name,
                         bisection=Bisection(len(builds), 0, find_fix=find_fix))
    return Engine(builds, prober, workers, progress).run(start)


def _installs(started: list[str]):
    """A progress sink that lists the builds whose probes started."""
    def progress(event: str, **details) -> None:
        if event == "installing":
            started.append(details["build"].version)
    return progress


def test_a_probe_made_moot_is_stopped_at_once(index_server, cache_dir, tmp_path,
                                              capsys) -> None:
    """Two workers: the first round is the newest build and a middle one, which hangs. The
    regression is put where the free worker's next build lands next to it, on the far side
    from the middle one, so that build's verdict leaves the middle one outside what is left:
    the hung run is killed then, while the search goes on (the build on the other side of
    the boundary is still to be probed), not when the search ends."""
    builds = _builds(index_server)
    newest, middle = Bisection(len(builds), 0).next_probes(2)
    after_newest = Bisection(len(builds), 0).record(newest, Verdict.BAD)
    (free,) = after_newest.next_probes(2, [middle])
    first_bad = free if free < middle else free + 1
    assert 1 < first_bad < newest
    bad_version, hung = builds[first_bad].version, [builds[middle].version]
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "repro.py"
    script.write_text(SCRIPT.format(hung=hung, pids=str(pids), first_bad=bad_version))
    events: list[tuple[str, str]] = []
    terminal = TerminalProgress(len(builds), 2, stream=sys.stderr)

    def progress(event: str, **details) -> None:
        if "build" in details:
            events.append((event, details["build"].version))
        elif "record" in details:
            events.append((event, details["record"].version))
        terminal(event, **details)

    began = time.monotonic()
    result = _bisect(builds, cache_dir, script, 2, progress)
    # Stopped means killed: waiting for the hung run would take the 60 s deadline at least.
    assert time.monotonic() - began < 50

    assert result.outcome is not None and result.outcome.status is Status.FOUND
    assert result.version_at(result.outcome.after) == bad_version
    assert hung[0] not in {p.version for p in result.probes}
    stopped = events.index(("stopped", hung[0]))
    last_verdict = max(i for i, (event, _) in enumerate(events) if event == "probed")
    assert stopped < last_verdict, "the moot probe ran until the search ended"
    ran = [int(path.read_text()) for path in pids.iterdir()]
    assert ran and not [pid for pid in ran if alive(pid)], "a stopped run is still running"
    assert "made it moot" in capsys.readouterr().err


def test_a_failure_held_for_the_newest_build_is_not_probed_again(index_server, cache_dir,
                                                                 tmp_path) -> None:
    """The first round: the newest build (slow here) and two splits, the newer of which fails
    at once. Its failure waits for the newest build's (which defines the signature) before it
    is taken in; meanwhile the free workers must not probe it again."""
    builds = _builds(index_server)
    newest, lower, upper = Bisection(len(builds), 0).next_probes(3)
    bad_version = builds[(lower + upper) // 2].version
    script = tmp_path / "repro.py"
    script.write_text(
        "import time, torch\n"
        f"if torch.__version__ == {builds[newest].version!r}:\n"
        "    time.sleep(3)\n"
        f"raise SystemExit(torch.__version__ >= {bad_version!r})\n"
    )
    started: list[str] = []
    # A cache of its own: with the session's, the builds below `upper` were installed by
    # earlier tests, their verdicts settled the search while `upper` was still installing,
    # and it was stopped as moot before it could fail (and be held).
    result = _bisect(builds, tmp_path / "cache", script, 3, _installs(started))
    assert result.outcome is not None and result.version_at(result.outcome.after) == bad_version
    assert len(started) == len(set(started)), f"probed twice: {started}"
    assert builds[upper].version in {p.version for p in result.probes}


def test_three_workers_find_a_fix(index_server, cache_dir, tmp_path) -> None:
    """Find-the-fix mode with rolling workers: the old builds fail, the first passing build is
    the answer, and no build is probed twice (the failures that define the signature are the
    oldest ones here, so those held back wait for older probes)."""
    builds = _builds(index_server)
    fixed = builds[len(builds) // 3].version
    script = tmp_path / "repro.py"
    script.write_text(f"import torch\nraise SystemExit(torch.__version__ < {fixed!r})\n")
    started: list[str] = []
    result = _bisect(builds, cache_dir, script, 3, _installs(started), find_fix=True)
    assert result.outcome is not None and result.outcome.status is Status.FOUND
    assert result.version_at(result.outcome.after) == fixed
    assert len(started) == len(set(started)), f"probed twice: {started}"
    assert result.signature is not None


def test_an_untestable_newest_build_leaves_the_failure_to_the_next_newest(
        index_server, cache_dir, tmp_path) -> None:
    """The newest build cannot be tested (slowly, here), the newer builds fail one way and
    older ones another. One worker follows the newer failure; three workers used to fold a
    middle probe's older failure in as soon as the newest build came back untestable, before
    the new bad end was probed, and followed that one instead ("cannot test")."""
    builds = _builds(index_server)
    newest, lower, upper = Bisection(len(builds), 0).next_probes(3)
    assert lower < upper < newest - 2
    older_from, newer_from = builds[upper - 1].version, builds[upper + 2].version
    script = tmp_path / "repro.py"
    script.write_text(
        "import time, torch\n"
        f"if torch.__version__ == {builds[newest].version!r}:\n"
        "    time.sleep(3)\n"
        "    raise SystemExit(125)\n"
        f"if torch.__version__ >= {newer_from!r}:\n"
        "    raise RuntimeError('A newer failure')\n"
        f"if torch.__version__ >= {older_from!r}:\n"
        "    raise ValueError('B older failure')\n"
    )
    answers = {}
    for workers in (1, 3):
        result = _bisect(builds, cache_dir, script, workers, lambda event, **details: None)
        assert result.outcome is not None
        answers[workers] = (result.outcome.status, result.signature,
                            result.version_at(result.outcome.after))
    assert answers[3] == answers[1]
    assert answers[1][1] is not None and "A newer failure" in answers[1][1]
