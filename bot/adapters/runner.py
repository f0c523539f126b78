"""Runs a reproducer in an environment: a subprocess with a scrubbed environment and a deadline."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from bot.core.verdicts import RunResult, Stage

# Only these variables reach a reproducer, so no token or credential can (docs/security.md).
ENV_ALLOWLIST = (
    "LANG", "LC_ALL", "TERM", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH", "CUDA_HOME",  # existing interpreters (conda, modules) may need them
)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_USER = "tbb-probe"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def torchrun(processes: str | None) -> tuple[str, ...]:
    """The interpreter's arguments that run a script as `torchrun --nproc_per_node=N` does, on
    this machine alone (`--standalone`: its rendezvous on the run's own loopback); none for a
    script run by itself. The module form works wherever torch is, with no `torchrun` on PATH."""
    if processes is None:
        return ()
    return ("-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}")


@dataclass
class OutputTail:
    """Keeps the first and last `keep` bytes of a stream and counts what fell in between."""

    keep: int = 32_768
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def feed(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.keep:
            excess = len(self.tail) - self.keep
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes of output dropped ...]\n{tail}"
        return head + tail


class Sandbox(Protocol):
    """Turns a command into one that runs confined; `none` returns it as it is."""

    name: str

    def wrap(self, argv: list[str], workdir: Path, readonly: Sequence[Path]) -> list[str]: ...


@runtime_checkable
class Executor(Protocol):
    """A sandbox that runs the command itself (a container) instead of wrapping a subprocess."""

    name: str

    def execute(
        self, argv: list[str], env: dict[str, str], workdir: Path, readonly: Sequence[Path],
        timeout_s: float, tail: OutputTail, cancel: threading.Event | None = None,
    ) -> RunResult: ...


class NoSandbox:
    """Runs the command as it is: for debugging only, the reproducer can reach the network."""

    name = "none"

    def wrap(self, argv: list[str], workdir: Path, readonly: Sequence[Path]) -> list[str]:
        return argv


def scrubbed_env(
    workdir: Path, extra: Mapping[str, str], source: Mapping[str, str]
) -> dict[str, str]:
    """An environment built from an allowlist: nothing else of the bot's reaches the script."""
    env = {key: source[key] for key in ENV_ALLOWLIST if key in source}
    env.update(
        PATH=SAFE_PATH,
        HOME=str(workdir),
        TMPDIR=str(workdir / "tmp"),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        # A name for getpass.getuser(): a sandboxed run's random uid has no passwd entry, and
        # torch.compile needs one (Inductor's default cache dir is per user, found on the H200).
        USER=PROBE_USER,
        LOGNAME=PROBE_USER,
        # A fresh compile cache per run: a kernel cached by another build must not be reused.
        TORCHINDUCTOR_CACHE_DIR=str(workdir / "inductor-cache"),
        TRITON_CACHE_DIR=str(workdir / "triton-cache"),
    )
    env.update(extra)
    return env


def _pump(stream: IO[bytes], tail: OutputTail) -> None:
    for chunk in iter(lambda: stream.read(65536), b""):
        tail.feed(chunk)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the bot dies (kill -9, a lost runner), so no
    reproducer outlives the bisection; the namespace sandbox's --kill-child takes the rest."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def killed_on(cancel: threading.Event | None, kill: Callable[[], object]) -> Iterator[None]:
    """While the block runs, `kill()` whatever it waits for as soon as `cancel` is set (within
    50 ms); the block then finds its process gone and returns as it does after a crash."""
    if cancel is None:
        yield
        return
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            if cancel.wait(0.05):
                with contextlib.suppress(Exception):  # gone already: nothing left to stop
                    kill()
                return

    watcher = threading.Thread(target=watch, name="stop-on-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        finished.set()
        watcher.join()


RUN_PREFIX = "tbb-run-"
HELD = ".tbb-held"  # in a run's folder once its process holds the folder's lock
_swept = threading.Event()


def _own_workdir() -> tuple[Path, int]:
    """A run's own folder in the temporary directory, and the descriptor that holds its lock
    (flock on the folder) while the run lives. A run's folder holds what the reproducer
    wrote in its TMPDIR (Inductor's and Triton's caches: 100s of MB) and stayed for good
    when the bot was SIGKILLed; the first run of a process removes those no live one holds."""
    if not _swept.is_set():
        _swept.set()
        sweep_dead_workdirs(Path(tempfile.gettempdir()))
    workdir = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
    held = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # nobody sweeps a folder before its marker is there
    (workdir / HELD).touch()
    return workdir, held


def sweep_dead_workdirs(folder: Path) -> None:
    """Remove this user's run folders whose process died (their lock is free); a folder
    without the marker (being made, or by an older version) is left alone."""
    for workdir in folder.glob(f"{RUN_PREFIX}*/{HELD}"):
        with contextlib.suppress(OSError):
            held = os.open(workdir.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if os.fstat(held).st_uid == os.getuid():
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(workdir.parent, ignore_errors=True)
            finally:
                os.close(held)


@dataclass
class Runner:
    """Runs `python script` for one probe; the whole process group dies at the deadline."""

    sandbox: Sandbox | Executor = field(default_factory=NoSandbox)
    keep_output: int = 32_768
    source_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def run(
        self,
        python: Path,
        script: Path,
        *,
        timeout_s: float,
        extra_env: Mapping[str, str] | None = None,
        readonly: Sequence[Path] = (),
        args: Sequence[str] = (),
        cancel: threading.Event | None = None,
        launcher: Sequence[str] = (),
    ) -> RunResult:
        """`launcher` goes between the interpreter and the script (`torchrun(...)`).
        Setting `cancel` kills the run (its whole group, or its container) within 50 ms; the
        result is then a killed run's, which the caller, having asked for it, discards."""
        workdir, held = _own_workdir()
        try:
            (workdir / "tmp").mkdir()
            local_script = workdir / "repro.py"
            shutil.copyfile(script, local_script)
            # By its real folder: a sandbox shows an environment at its resolved path only, so
            # one reached through a link (~/.cache on another disk) was not found there.
            if python.parent != Path("."):  # not a bare name that PATH finds
                python = python.parent.resolve() / python.name
            argv = [str(python), *launcher, str(local_script), *args]
            env = scrubbed_env(workdir, extra_env or {}, self.source_env)
            if isinstance(self.sandbox, Executor):
                tail = OutputTail(self.keep_output)
                return self.sandbox.execute(argv, env, workdir, readonly, timeout_s, tail,
                                            cancel)
            command = self.sandbox.wrap(argv, workdir, readonly)
            return self._execute(command, env, workdir, timeout_s, cancel)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            os.close(held)

    def _execute(
        self, command: list[str], env: dict[str, str], workdir: Path, timeout_s: float,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        tail = OutputTail(self.keep_output)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                command, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            return RunResult(Stage.IMPORT, error=f"cannot start {command[0]}: {exc}")
        assert process.stdout is not None
        reader = threading.Thread(target=_pump, args=(process.stdout, tail), daemon=True)
        reader.start()
        timed_out = False
        try:
            with killed_on(cancel, lambda: _kill_group(process)):
                process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Children that outlive the main process (or a hung one) go with the whole group.
        _kill_group(process)
        process.wait()
        reader.join(timeout=5)
        seconds = time.monotonic() - started
        code = process.returncode
        return RunResult(
            Stage.RUN,
            exit_code=code if code >= 0 and not timed_out else None,
            signal=-code if code < 0 and not timed_out else None,
            timed_out=timed_out,
            seconds=seconds,
            output=tail.text(),
            output_dropped=tail.dropped,
        )
