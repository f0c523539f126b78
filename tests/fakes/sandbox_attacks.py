"""Hostile reproducers and the checks that nothing escaped, shared by both sandbox modes' tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.adapters.environments import require_uv
from bot.adapters.runner import Runner
from bot.adapters.sandbox import GiB, Limits
from bot.adapters.sandbox_launcher import TMPFS_INODES
from bot.core.verdicts import RunResult

SECRET = "ghs_tbbSandboxTestSecret0123456789"
MiB = 2**20
TIMEOUT_S = 4.0
# Small bounds, so each attack hits them within the test's few seconds.
TEST_LIMITS = Limits(processes=64, file_bytes=32 * MiB, open_files=256,
                     address_space_bytes=4 * GiB, tmpfs_bytes=256 * MiB, memory_bytes=1 * GiB)

# Each prints LEAK: when an attack worked; the tests also check the host afterwards.
READ_TOKEN = 'import os\nprint("token:", os.environ.get("GITHUB_TOKEN", "no token"))\n'
READ_ENVIRON = """import glob, sys
for path in glob.glob("/proc/*/environ"):
    try:
        if sys.argv[1].encode() in open(path, "rb").read():
            print("LEAK:", path)
    except OSError:
        pass
print("scanned")
"""
CONNECT = """import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).sendall(b"hello")
    print("LEAK: connected")
except OSError as exc:
    print("no network:", exc)
"""
# A distributed reproducer's ranks meet on 127.0.0.1 (torchrun's rendezvous, gloo): the run's
# own loopback must work, and must not be the host's (the listener there must not hear it).
OWN_LOOPBACK = """import socket, sys
with socket.create_server(("127.0.0.1", 0)) as server:
    port = server.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=2) as client:
        peer, _ = server.accept()
        client.sendall(b"ping")
        print("own loopback:", peer.recv(4).decode())
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).sendall(b"hello")
    print("LEAK: connected")
except OSError as exc:
    print("host's loopback unreachable:", exc)
"""
FORK_BOMB = """import os, sys, time
forks = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
        forks += 1
except OSError as exc:
    print("forks", forks, exc, flush=True)
time.sleep(1000)
"""
BIG_FILE = """import sys
with open(sys.argv[1], "wb") as out:
    for _ in range(8 * 1024):
        out.write(b"x" * 2**20)
print("LEAK: wrote 8 GiB")
"""
FLOOD = 'import sys\nfor _ in range(100):\n    sys.stdout.buffer.write(b"y" * 2**20)\n'
SLEEP_FOREVER = """import subprocess, sys, time
# A grandchild in its own session escapes the process group: only the namespace can kill it.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", sys.argv[1]],
                 start_new_session=True)
print("sleeping", flush=True)
time.sleep(1000)
"""
WRITE_OUTSIDE = """import sys
for target in sys.argv[1:]:
    try:
        with open(target, "w") as out:
            out.write("pwned")
        print("LEAK: wrote", target)
    except OSError as exc:
        print("refused", target, exc.strerror)
"""
DELETE_CACHE = """import os, shutil, sys
cache, env = sys.argv[1], sys.argv[2]
for victim in (os.path.join(env, "bin", "python"), os.path.join(env, "pyvenv.cfg")):
    try:
        os.unlink(victim)
        print("LEAK: deleted", victim)
    except OSError as exc:
        print("refused", victim, exc.strerror)
shutil.rmtree(cache, ignore_errors=True)
shutil.rmtree(env, ignore_errors=True)
"""
# Raise the System V shared memory caps of its IPC namespace, then print what they are.
RAISE_SHM = """for name in ("shmmax", "shmall"):
    path = "/proc/sys/kernel/" + name
    try:
        with open(path, "w") as out:
            out.write(str(2**62))
        print("LEAK: raised", name)
    except OSError as exc:
        print("refused", name, exc.errno)
    print(name + "=" + open(path).read().strip())
"""


@dataclass(frozen=True)
class Env:
    """A real uv environment inside a cache root, as the environment cache lays them out."""

    cache_root: Path
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def make_env(root: Path) -> Env:
    path = root / "cache" / "envs" / "tbb-sandbox-test"
    subprocess.run([require_uv(), "venv", "--quiet", "--relocatable", "--python", sys.executable,
                    str(path)], check=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    return Env(root / "cache", path)


def survivors(marker: str) -> list[int]:
    """Host processes whose command line carries `marker` (every attack passes one)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@dataclass
class Listener:
    """A TCP server on 127.0.0.1 that counts who reached it."""

    connections: list[str] = field(default_factory=list)

    def serve(self) -> Iterator[int]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            server.settimeout(0.2)
            stop = threading.Event()

            def accept() -> None:
                while not stop.is_set():
                    try:
                        conn, peer = server.accept()
                    except OSError:
                        continue
                    self.connections.append(str(peer))
                    conn.close()

            thread = threading.Thread(target=accept, daemon=True)
            thread.start()
            yield server.getsockname()[1]
            stop.set()
            thread.join()


@pytest.fixture
def token_holder() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the bot's user with the token in its environment, like the Actions runner;
    a variable set later with os.environ would not show in /proc/<pid>/environ."""
    process = subprocess.Popen(["sleep", "60"], env={"GITHUB_TOKEN": SECRET})
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def listener() -> Iterator[tuple[Listener, int]]:
    server = Listener()
    for port in server.serve():
        yield server, port


def run(runner: Runner, env: Env, tmp_path: Path, code: str, *args: str) -> RunResult:
    script = tmp_path / f"repro-{uuid.uuid4().hex[:8]}.py"
    script.write_text(code)
    return runner.run(env.python, script, timeout_s=TIMEOUT_S, readonly=[env.path], args=args)


class Attacks:
    """Each test is one stranger's reproducer; subclasses provide `runner` and `env` fixtures."""

    def test_an_honest_run_has_a_user_name(self, runner: Runner, env: Env,
                                           tmp_path: Path) -> None:
        """torch.compile asks for one (Inductor's default cache dir calls getpass.getuser()
        at import); the sandbox's random uid has no passwd entry (found on the H200)."""
        result = run(runner, env, tmp_path, "import getpass\nprint('user', getpass.getuser())\n")
        assert result.exit_code == 0, result.output
        assert "user tbb-probe" in result.output

    def test_the_reproducer_is_the_first_the_oom_killer_takes(
            self, runner: Runner, env: Env, tmp_path: Path) -> None:
        """Memory held outside its processes (tmpfs files, memfds, shared memory) is not its
        own to the OOM killer: at the bot's score of 0, the bot was killed instead of it."""
        result = run(runner, env, tmp_path, "print('adj', open('/proc/self/oom_score_adj')"
                     ".read().strip())\nimport os\nprint('tmp', os.statvfs('/tmp').f_files)\n")
        assert "adj 1000" in result.output, result.output
        inodes = int(result.output.split("tmp ")[1].split()[0])
        assert 0 < inodes <= TMPFS_INODES, result.output

    def test_shared_memory_is_capped_like_a_tmpfs(self, runner: Runner, env: Env,
                                                  tmp_path: Path) -> None:
        """The cap holds even when the reproducer tries to raise it (a GPU run's /proc is
        writable; its /proc/sys must not be)."""
        result = run(runner, env, tmp_path, RAISE_SHM)
        assert "LEAK" not in result.output, result.output
        for name in ("shmmax", "shmall"):
            value = int(result.output.split(f"{name}=")[1].split()[0])
            assert 0 < value * (1 if name == "shmmax" else os.sysconf("SC_PAGE_SIZE")) \
                <= TEST_LIMITS.tmpfs_bytes, result.output

    def test_a_reproducer_killed_by_sigkill_is_a_crash_by_sigkill(
            self, runner: Runner, env: Env, tmp_path: Path) -> None:
        """As the OOM killer ends one: the launcher's own error was taken for its failure."""
        result = run(runner, env, tmp_path, "import os, signal\nprint('x', flush=True)\n"
                     "os.kill(os.getpid(), signal.SIGKILL)\n")
        assert result.signal == signal.SIGKILL, result
        assert "Error" not in result.output and "Traceback" not in result.output, result.output

    def test_token_in_environment(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        result = run(runner, env, tmp_path, READ_TOKEN)
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output and "no token" in result.output

    def test_token_in_other_processes(self, runner: Runner, env: Env, tmp_path: Path,
                                      token_holder: subprocess.Popen[bytes]) -> None:
        result = run(runner, env, tmp_path, READ_ENVIRON, SECRET)
        assert "scanned" in result.output and "LEAK" not in result.output

    def test_network(self, runner: Runner, env: Env, tmp_path: Path,
                     listener: tuple[Listener, int]) -> None:
        server, port = listener
        result = run(runner, env, tmp_path, CONNECT, str(port))
        assert "no network" in result.output and server.connections == []

    def test_own_loopback_only(self, runner: Runner, env: Env, tmp_path: Path,
                               listener: tuple[Listener, int]) -> None:
        server, port = listener
        result = run(runner, env, tmp_path, OWN_LOOPBACK, str(port))
        assert result.exit_code == 0, result.output
        assert "own loopback: ping" in result.output
        assert "host's loopback unreachable" in result.output and server.connections == []

    def test_fork_bomb(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        marker = uuid.uuid4().hex
        result = run(runner, env, tmp_path, FORK_BOMB, marker)
        assert result.timed_out and result.seconds < TIMEOUT_S + 10
        forks = int(result.output.split("forks ")[1].split()[0])
        assert forks < TEST_LIMITS.processes
        assert survivors(marker) == []

    def test_huge_file(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        result = run(runner, env, tmp_path, BIG_FILE, "big.bin")
        # RLIMIT_FSIZE: Python ignores SIGXFSZ, so the write past the limit fails with EFBIG.
        assert result.signal == signal.SIGXFSZ or "File too large" in result.output, result
        assert "LEAK" not in result.output

    def test_output_flood(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        result = run(runner, env, tmp_path, FLOOD)
        assert result.exit_code == 0
        assert result.output_dropped == 100 * MiB - 2 * runner.keep_output
        assert len(result.output) < 2 * runner.keep_output + 100
        assert f"[... {result.output_dropped} bytes of output dropped ...]" in result.output

    def test_sleep_forever(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        marker = uuid.uuid4().hex
        result = run(runner, env, tmp_path, SLEEP_FOREVER, marker)
        assert result.timed_out and TIMEOUT_S <= result.seconds < TIMEOUT_S + 10
        assert "sleeping" in result.output
        assert survivors(marker) == []

    def test_write_outside(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        host_tmp = Path("/tmp") / f"tbb-escape-{uuid.uuid4().hex}"
        targets = [env.path / "evil.py", env.path / "bin" / "evil", env.cache_root / "evil",
                   tmp_path / "evil", host_tmp, Path.home() / f"tbb-evil-{uuid.uuid4().hex}"]
        try:
            result = run(runner, env, tmp_path, WRITE_OUTSIDE, *map(str, targets))
            # A write into its own private /tmp may succeed; none may reach the host's files.
            assert [t for t in targets if t.exists()] == [], result.output
            assert f"refused {env.path / 'evil.py'}" in result.output
        finally:
            for target in targets:
                target.unlink(missing_ok=True)

    def test_delete_environment_cache(self, runner: Runner, env: Env, tmp_path: Path) -> None:
        before = sorted(p.relative_to(env.cache_root) for p in env.cache_root.rglob("*"))
        result = run(runner, env, tmp_path, DELETE_CACHE, str(env.cache_root), str(env.path))
        assert "LEAK" not in result.output
        assert sorted(p.relative_to(env.cache_root) for p in env.cache_root.rglob("*")) == before
        assert subprocess.run([env.python, "-c", "pass"], check=False).returncode == 0
