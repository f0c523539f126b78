"""Ctrl-C stops a bisection at once: the reproducer running then is killed, not left to its
deadline, and the bisection can be resumed. A real bot process, a real SIGINT to its process
group (what a terminal sends), the real namespace sandbox."""

from __future__ import annotations

import os
import pty
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


def test_a_hung_up_terminal_stops_every_probe_at_once(index_server, cache_dir, tmp_path):
    """The terminal closed under a bisection with two probes running: SIGHUP stops it as
    Ctrl-C does, but every line written to the dead terminal raises EIO. The first stopped
    probe's line raised before the second was told to stop, and the bot waited for that one's
    reproducer to end (up to --timeout)."""
    token = f"hang_{uuid.uuid4().hex[:12]}"
    script = tmp_path / f"{token}.py"
    script.write_text("import time\nimport torch\ntime.sleep(120)\n")
    argv = [BISECT_BOT, "bisect", str(script), "--index", index_server.variant_url("cpu"),
            "--cache-dir", str(cache_dir), "--no-default-packages", "--db",
            str(tmp_path / "h.db"), "--good", "2026-05-02", "--no-commit-tier", "--no-triage",
            "--no-prefetch", "--timeout", "300", "--workers", "2"]
    pid, terminal = pty.fork()
    if pid == 0:  # the bot, on the terminal
        os.execv(argv[0], argv)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while seen.count(b": running") < 2 and time.monotonic() < deadline:
            seen += os.read(terminal, 4096)
        deadline = time.monotonic() + 30
        while len(_running(token)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen.count(b": running") >= 2, seen.decode(errors="replace")
    finally:
        os.close(terminal)  # the terminal goes away: the kernel hangs up its session
    started = time.monotonic()
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() - started > 40:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.1)
    took = time.monotonic() - started
    assert took < 20, f"the bot took {took:.0f} s to stop after the hang-up"
    deadline = time.monotonic() + 15
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(token) == [], "a reproducer was left running"
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(tmp_path / "h.db")],
                            capture_output=True, text=True, check=True)
    assert token in listed.stdout  # resumable
