"""Ctrl-C stops a bisection at once: the reproducer running then is killed, not left to its
deadline, and the bisection can be resumed. A real bot process, a real SIGINT to its process
group (what a terminal sends), the real namespace sandbox."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.faults.helpers import BISECT_BOT


def test_ctrl_c_kills_the_running_reproducer_and_says_so(index_server, cache_dir, tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import sys, time\nimport torch\nprint('started', flush=True)\n"
                      "time.sleep(600)\n")
    argv = [BISECT_BOT, "bisect", str(script), "--index", index_server.variant_url("cpu"),
            "--cache-dir", str(cache_dir), "--no-default-packages", "--db",
            str(tmp_path / "h.db"), "--good", "2026-05-02", "--no-commit-tier", "--no-triage",
            "--timeout", "300"]
    bot = subprocess.Popen(argv, text=True,
                           stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           start_new_session=True)
    assert bot.stderr is not None
    lines = []
    for line in bot.stderr:  # until the first probe's reproducer runs
        lines.append(line)
        if ": running" in line:
            break
    time.sleep(1.0)  # into the reproducer's sleep
    started = time.monotonic()
    os.killpg(bot.pid, signal.SIGINT)
    rest = bot.stderr.read()
    code = bot.wait(timeout=60)
    took = time.monotonic() - started
    assert code == 130, "".join(lines) + rest
    assert took < 20, f"Ctrl-C took {took:.0f} s: the run was left to its 300 s deadline"
    assert "stopped, interrupted" in rest and "made it moot" not in rest
    again = re.search(r"`bisect-bot resume ([0-9a-f]{16}) --db (\S+)` continues it", rest)
    assert again and again[2] == str(tmp_path / "h.db"), rest
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(tmp_path / "h.db")],
                            capture_output=True, text=True, check=True)
    assert "hang.py" in listed.stdout + listed.stderr


def _running(token: str) -> list[int]:
    """The processes whose command line holds `token`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda sent: sent.name)
def test_a_bot_stopped_by_a_signal_leaves_no_reproducer_running(index_server, cache_dir,
                                                                tmp_path, sent):
    """A cancelled job (SIGTERM), a closed terminal (SIGHUP) or kill -9 sent to the bot alone,
    not its group: the sandboxed reproducer must not run on to its deadline."""
    token = f"hang_{uuid.uuid4().hex[:12]}"
    script = tmp_path / f"{token}.py"
    script.write_text("import time\nimport torch\nprint('started', flush=True)\n"
                      "time.sleep(600)\n")
    argv = [BISECT_BOT, "bisect", str(script), "--index", index_server.variant_url("cpu"),
            "--cache-dir", str(cache_dir), "--no-default-packages", "--db",
            str(tmp_path / "h.db"), "--good", "2026-05-02", "--no-commit-tier", "--no-triage",
            "--no-prefetch", "--timeout", "300"]
    bot = subprocess.Popen(argv, text=True, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           start_new_session=True)
    assert bot.stderr is not None
    for line in bot.stderr:
        if ": running" in line:
            break
    deadline = time.monotonic() + 30
    while not _running(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(token), "the reproducer never started"
    os.kill(bot.pid, sent)  # the bot alone
    rest = bot.stderr.read()
    code = bot.wait(timeout=60)
    deadline = time.monotonic() + 15
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(token) == [], f"left running after {sent.name}"
    if sent is not signal.SIGKILL:  # the bot stopped as for Ctrl-C, and says how to go on
        assert code == 130 and re.search(r"`bisect-bot resume [0-9a-f]{16} --db \S+` "
                                         r"continues it", rest), rest
