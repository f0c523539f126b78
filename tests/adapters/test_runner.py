"""The runner with real subprocesses: deadlines, process groups, capped output, scrubbed env."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from pathlib import Path

from bot.adapters.runner import HELD, OutputTail, Runner, sweep_dead_workdirs
from bot.core.verdicts import Stage
from tests.processes import alive

PYTHON = Path(sys.executable)


def run(tmp_path: Path, code: str, timeout: float = 10, **kwargs) -> object:
    script = tmp_path / "repro.py"
    script.write_text(code)
    runner = Runner(source_env={"GITHUB_TOKEN": "ghp_secret", "LANG": "C.UTF-8"}, **kwargs)
    return runner.run(PYTHON, script, timeout_s=timeout)


def test_exit_code_and_output_are_recorded(tmp_path):
    result = run(tmp_path, "print('hello'); raise SystemExit(3)")
    assert result.stage is Stage.RUN and result.exit_code == 3
    assert "hello" in result.output and not result.timed_out


def test_environment_is_an_allowlist(tmp_path):
    result = run(tmp_path, "import os; print(sorted(os.environ))")
    assert "GITHUB_TOKEN" not in result.output
    assert "LANG" in result.output and "TORCHINDUCTOR_CACHE_DIR" in result.output


def test_a_signal_is_recorded(tmp_path):
    result = run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert result.signal == signal.SIGSEGV and result.exit_code is None


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    started = time.monotonic()
    result = run(tmp_path, code, timeout=2)
    assert result.timed_out and time.monotonic() - started < 20
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not alive(child), "the reproducer's child outlived the deadline"


def test_output_flood_keeps_head_and_tail(tmp_path):
    code = "import sys\nfor i in range(200000): print(f'line {i}')\n"
    result = run(tmp_path, code, keep_output=4096)
    assert result.output.startswith("line 0\n")
    assert "line 199999" in result.output
    assert result.output_dropped > 1_000_000 and "bytes of output dropped" in result.output
    assert len(result.output) < 10_000


def test_workdir_is_removed_afterwards(tmp_path):
    result = run(tmp_path, "import os; print(os.getcwd())")
    workdir = result.output.strip()
    assert workdir.startswith("/") and not Path(workdir).exists()


def test_output_tail_counts_dropped_bytes():
    tail = OutputTail(keep=4)
    for chunk in (b"abc", b"defgh", b"ijkl"):
        tail.feed(chunk)
    assert tail.text() == "abcd\n[... 4 bytes of output dropped ...]\nijkl"


def test_a_cancelled_run_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child.pid"
    script = tmp_path / "repro.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    cancel = threading.Event()

    def cancel_once_started() -> None:
        while not marker.exists() or not marker.read_text():
            time.sleep(0.02)
        cancel.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    result = Runner().run(PYTHON, script, timeout_s=120, cancel=cancel)
    # Killed, not timed out: the 120 s deadline would have said timed_out.
    assert result.signal == signal.SIGKILL and not result.timed_out
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not alive(child), "the reproducer's child outlived the cancel"


def test_a_run_that_is_never_cancelled_is_left_alone(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text("import time; time.sleep(0.3); raise SystemExit(4)")
    result = Runner().run(PYTHON, script, timeout_s=30, cancel=threading.Event())
    assert result.exit_code == 4 and result.signal is None


def test_only_run_folders_no_live_process_holds_are_swept(tmp_path):
    """A killed bot's run folder goes; a running one's, and one without the marker (being
    made, or by an older version that holds no lock), stay."""
    dead, live, unmarked = (tmp_path / f"tbb-run-{name}" for name in ("dead", "live", "new"))
    for folder in (dead, live, unmarked):
        (folder / "tmp").mkdir(parents=True)
    (dead / HELD).touch()
    (live / HELD).touch()
    held = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        sweep_dead_workdirs(tmp_path)
    finally:
        os.close(held)
    assert not dead.exists() and live.exists() and unmarked.exists()
