"""Confines a reproducer: Linux namespaces and rlimits, or a container; picked by `make_sandbox`."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.adapters.runner import Executor, NoSandbox, Sandbox
from bot.core.errors import UserError

LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
GiB = 2**30
# Paths no reproducer may see: the host's shared temporary and runtime directories (/run holds
# the Docker socket, which is root on the host) are replaced by empty ones inside the sandbox.
ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/dev/shm", "/run")
# Each run gets its own uid from this range when the bot is root, so RLIMIT_NPROC (counted per
# real uid) bounds this run alone and concurrent probes cannot signal or read each other.
UID_BASE, UID_SPAN = 2_000_000_000, 100_000_000
# The device nodes a GPU run needs: bound into its minimal /dev (and their groups kept).
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd")
# What an interpreter's prefix holds that a run needs: all that is shown of a prefix (or an
# environment) that is, or holds, a hidden path (an interpreter in ~/bin: the prefix is $HOME).
PREFIX_PARTS = ("bin", "include", "lib", "lib64", "pyvenv.cfg")


class SandboxUnavailable(UserError):
    """The chosen sandbox cannot run on this machine; the message says what to do."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one run. None turns a bound off."""

    processes: int = 4096  # RLIMIT_NPROC: threads count too, and Inductor forks compile workers
    file_bytes: int = 4 * GiB  # RLIMIT_FSIZE: the largest file it may write
    open_files: int = 4096  # RLIMIT_NOFILE
    # RLIMIT_AS: off when CUDA is used, because the CUDA driver reserves terabytes of virtual
    # address space for unified addressing and fails to initialise under a smaller limit.
    address_space_bytes: int | None = 64 * GiB
    tmpfs_bytes: int = 2 * GiB  # each of its workdir and private /tmp, /var/tmp, /dev/shm
    memory_bytes: int = 32 * GiB  # container mode only: the cgroup memory limit

    def for_cuda(self) -> Limits:
        return replace(self, address_space_bytes=None)

    def rlimits(self, processes: int | None) -> dict[str, int]:
        chosen = {"NPROC": processes, "FSIZE": self.file_bytes, "NOFILE": self.open_files,
                  "AS": self.address_space_bytes, "CORE": 0}
        return {name: value for name, value in chosen.items() if value is not None}


def interpreter_prefix(env_path: Path) -> Path | None:
    """The base interpreter's prefix a uv environment links to (pyvenv.cfg `home` is its bin/)."""
    try:
        text = (env_path / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve().parent
    return None


def gpu_groups(devices: Sequence[str] = GPU_DEVICES) -> list[int]:
    """Groups the unprivileged run needs to open GPU device nodes that are not world-writable
    (e.g. crw-rw---- root:video); the CUDA driver reports error 304 when it cannot open them."""
    groups: set[int] = set()
    for pattern in devices:
        for node in glob.glob(pattern):
            try:
                st = os.stat(node)
            except OSError:
                continue
            if st.st_mode & 0o006 != 0o006 and st.st_mode & 0o060 == 0o060:
                groups.add(st.st_gid)
    return sorted(groups)


def _holds(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def narrowed(expose: Sequence[Path], hide: Sequence[Path]) -> list[Path]:
    """`expose` without undoing `hide`: a path that is, or holds, a hidden one (the bot's home,
    when the interpreter is ~/bin/python and its prefix is ~) is replaced by the parts of a
    prefix a run needs (`PREFIX_PARTS`); one of those that still holds a hidden path is
    refused. The launcher binds each exposed path back over what hides it, so exposing ~
    showed ~/.config/gh/hosts.yml (found by an audit)."""
    kept: list[Path] = []
    for path in expose:
        if not any(_holds(path, hidden) for hidden in hide):
            kept.append(path)
            continue
        for part in PREFIX_PARTS:
            if not (path / part).exists():
                continue
            inside = (path / part).resolve()
            clash = next((hidden for hidden in hide if _holds(inside, hidden)), None)
            if clash is not None:
                raise SandboxUnavailable(
                    f"the sandbox cannot show the reproducer {path} (for its interpreter): "
                    f"{inside} is or holds {clash}, which it hides. Use an interpreter or "
                    "environment outside it.")
            kept.append(inside)
    return kept


def closed_parents(expose: Sequence[Path]) -> list[Path]:
    """Folders above the exposed paths that others may not pass through: pyenv's Python under
    /root (0700) while $HOME, which is hidden, is elsewhere. A root bot's run has a throwaway
    uid, so it could not reach the interpreter it is given (every probe SKIP, "Permission
    denied"). Hidden as $HOME is (an empty tmpfs that others may pass through, the exposed
    paths bound back), they show the run nothing more than those paths."""
    closed: set[Path] = set()
    for path in expose:
        for parent in path.parents:
            with contextlib.suppress(OSError):
                if not os.stat(parent).st_mode & stat.S_IXOTH and parent not in expose:
                    closed.add(parent)
    return sorted(closed)


def _tasks_of(uid: int) -> int:
    """Threads owned by `uid` on the host: RLIMIT_NPROC counts them all, not just this run's."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(entry / "task"))
            except OSError:
                continue
    return count


@dataclass
class NamespaceSandbox:
    """New net, PID, mount, IPC and UTS namespaces via `unshare`; a read-only view; rlimits."""

    limits: Limits = field(default_factory=Limits)
    hide: Sequence[Path] = ()  # e.g. the environment cache: invisible, except the env in use
    name: str = "namespace"
    gpu: bool = False  # keep the groups that may open the GPU device nodes

    def _unshare(self) -> list[str]:
        command = ["unshare", "--net", "--pid", "--fork", "--mount", "--mount-proc",
                   "--ipc", "--uts", "--kill-child"]
        # Without root, a user namespace grants the mounts; we stay the bot's uid on the host.
        return command if os.geteuid() == 0 else [*command, "--user", "--map-root-user"]

    def _config(
        self, argv: list[str], workdir: Path, readonly: Sequence[Path]
    ) -> dict[str, object]:
        root = os.geteuid() == 0
        expose = [Path(p).resolve() for p in readonly]
        expose += [p for p in map(interpreter_prefix, expose) if p is not None]
        hide = [*ALWAYS_HIDDEN, str(Path.home()), *(str(Path(p).resolve()) for p in self.hide)]
        if root:  # the run's throwaway uid passes only through what others may
            hide += [str(p) for p in closed_parents(expose)]
        # compared resolved too: the launcher's tmpfs over a link hides the link's target
        expose = narrowed(expose, sorted({Path(h) for h in hide} | {Path(h).resolve()
                                                                      for h in hide}))
        processes = self.limits.processes
        if not root:  # the count is shared with the bot's own uid, so leave room for it
            processes += _tasks_of(os.getuid())
        return {
            "unshare": self._unshare(), "argv": argv, "workdir": str(workdir.resolve()),
            "expose": sorted({str(p) for p in expose}), "hide": sorted(set(hide)),
            "uid": UID_BASE + secrets.randbelow(UID_SPAN) if root else None,
            "groups": gpu_groups() if self.gpu else [],
            "devices": list(GPU_DEVICES) if self.gpu else [],
            # The CUDA driver fails to initialise (error 304) under a read-only /proc, measured on
            # an H200 (scripts/sandbox_gpu_diag2.sh); /proc is this PID namespace's own mount.
            # /proc/sys in it stays read-only (the launcher's PROC_READONLY).
            "writable": ["/proc"] if self.gpu else [],
            "rlimits": self.limits.rlimits(processes), "tmpfs_bytes": self.limits.tmpfs_bytes,
        }

    def wrap(self, argv: list[str], workdir: Path, readonly: Sequence[Path]) -> list[str]:
        config = self._config(argv, workdir, readonly)
        return [sys.executable, "-I", "-S", str(LAUNCHER), "outer", json.dumps(config)]

    def available(self, python: Path | None = None) -> None:
        """Raise SandboxUnavailable, with the reason and a way out, unless a trial run works:
        a shell, then `python` (default: the bot's own, which environments are made from
        unless --python names another) as a run would start it, so an interpreter the run
        cannot start is said here once, not as every probe's SKIP."""
        if shutil.which("unshare") is None:
            raise SandboxUnavailable("--sandbox namespace needs `unshare` (util-linux)")
        failed = self._trial(["/bin/sh", "-c", "echo ok"], ())
        if failed is not None:
            raise SandboxUnavailable(
                f"--sandbox namespace does not work here ({failed})."
                " Without root it needs unprivileged user namespaces (on Ubuntu 24.04: sysctl "
                "kernel.apparmor_restrict_unprivileged_userns=0); or use --sandbox docker."
            )
        # The bot's own resolved: the base interpreter its venv links to, which uv makes the
        # environments from (the venv's own folder may be one a run is never shown).
        python = Path(python) if python else Path(sys.executable).resolve()
        prefix = python.parent.parent  # a venv (its pyvenv.cfg names the base) or a prefix
        failed = self._trial([str(python), "-I", "-S", "-c", "print('ok')"], (prefix,))
        if failed is not None:
            base = interpreter_prefix(prefix) or prefix
            raise SandboxUnavailable(
                f"--sandbox namespace cannot start {python} ({failed}). A run starts it as a "
                f"user of its own, who must be able to read {base} and pass through the "
                f"folders above it (`chmod -R o+rX {base}`, and o+x on those folders), or "
                "install the bot with a Python such a user can run.")

    def _trial(self, argv: list[str], readonly: Sequence[Path]) -> str | None:
        """Why `argv` did not print "ok" in this sandbox; None when it did."""
        workdir = Path(tempfile.mkdtemp(prefix="tbb-preflight-"))
        try:
            done = subprocess.run(self.wrap(argv, workdir, readonly), capture_output=True,
                                  text=True, timeout=60, env={"PATH": "/usr/bin:/bin"},
                                  check=False)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if done.returncode == 0 and done.stdout.strip() == "ok":
            return None
        return (done.stderr.strip() or done.stdout.strip())[-500:] or f"exit {done.returncode}"


def _warn_unsafe() -> None:
    print("\n".join([
        "!" * 78,
        "WARNING: --sandbox none runs the reproducer UNCONFINED, with the network, your files",
        "and your processes in reach. Reproducers come from strangers: use it only to debug",
        "a reproducer you have read and trust.",
        "!" * 78,
    ]), file=sys.stderr)


def make_sandbox(name: str | None = None, *, cuda: bool = False, hide: Sequence[Path] = (),
                 limits: Limits | None = None, python: Path | None = None) -> Sandbox | Executor:
    """The sandbox called `name` (default: namespace on Linux), checked to work on this machine:
    that it starts `python`, the interpreter environments are made from (default: the bot's)."""
    chosen = name or ("namespace" if sys.platform.startswith("linux") else "none")
    bounds = limits or Limits()
    if cuda:
        bounds = bounds.for_cuda()
    if chosen == "none":
        _warn_unsafe()
        return NoSandbox()
    if chosen == "namespace":
        sandbox = NamespaceSandbox(bounds, tuple(hide), gpu=cuda)
        sandbox.available(python)
        return sandbox
    if chosen == "docker":
        from bot.adapters.container import ContainerSandbox

        container = ContainerSandbox(limits=bounds, gpus=cuda)
        container.available(python)
        return container
    raise UserError(f"--sandbox {chosen}: expected none, namespace or docker")
