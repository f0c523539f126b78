"""The progress lines: probes side by side keep one number each, from install to verdict."""

from __future__ import annotations

import io
from types import SimpleNamespace

from bot.core.results import ProbeRecord
from bot.core.verdicts import Verdict
from bot.jobs.progress import TerminalProgress


def test_probes_side_by_side_keep_their_own_numbers():
    stream = io.StringIO()
    progress = TerminalProgress(64, 2, stream=stream)
    a, b = SimpleNamespace(version="2.13.0.dev20260531"), SimpleNamespace(version="2.13.0.dev20260510")
    progress("installing", build=a)
    progress("installing", build=b)
    progress("running", build=b)
    progress("running", build=a)
    progress("probed", record=ProbeRecord(index=1, version=b.version, verdict=Verdict.GOOD,
                                          reason="exit 0", seconds=1.0))
    progress("stopped", build=a, why="interrupted")
    assert stream.getvalue().splitlines() == [
        "[probe 1/~7] 2.13.0.dev20260531: installing",
        "[probe 2/~7] 2.13.0.dev20260510: installing",
        "[probe 2/~7] 2.13.0.dev20260510: running",
        "[probe 1/~7] 2.13.0.dev20260531: running",
        "[probe 2] 2.13.0.dev20260510: GOOD (exit 0; 0.0 s install, 1.0 s run)",
        "2.13.0.dev20260531: stopped, interrupted",
    ]


def test_a_reason_s_control_characters_are_written_out():
    stream = io.StringIO()
    progress = TerminalProgress(64, 1, stream=stream)
    progress.live = True  # as on a terminal
    progress("probed", record=ProbeRecord(index=1, version="2.13.0.dev20260510",
                                          verdict=Verdict.BAD, reason="x\x1b[2J\ry",
                                          seconds=1.0))
    # the progress line's own "\r\x1b[K" and nothing of the reproducer's
    assert stream.getvalue() == ("\r\x1b[K[probe 1] 2.13.0.dev20260510: BAD "
                                 "(x\\x1b[2J\\x0dy; 0.0 s install, 1.0 s run)\n")


def test_a_terminal_that_hung_up_is_not_an_error():
    """Writes to a hung-up terminal raise EIO: a progress line is not worth the bisection."""
    import errno

    class HungUp(io.StringIO):
        def write(self, text):
            raise OSError(errno.EIO, "Input/output error")

    progress = TerminalProgress(64, 2, stream=HungUp())
    build = SimpleNamespace(version="2.13.0.dev20260531")
    progress("running", build=build)
    progress("stopped", build=build, why="interrupted")
    progress("message", text="bisecting")
