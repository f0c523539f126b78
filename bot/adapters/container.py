"""Runs a reproducer in a throwaway container of the runner image, through the `docker` SDK."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import DockerException
from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from bot.adapters.runner import SAFE_PATH, OutputTail, killed_on
from bot.adapters.sandbox import (
    ALWAYS_HIDDEN,
    Limits,
    SandboxUnavailable,
    interpreter_prefix,
    narrowed,
)
from bot.adapters.sandbox_launcher import TMPFS_INODES, shm_limits
from bot.core.verdicts import EXIT_SKIP, RunResult, Stage

DEFAULT_IMAGE = "torch-bisect-bot:latest"  # built from ./Dockerfile (scripts/ci-docker.sh)
UNPRIVILEGED = "65534:65534"  # nobody, which every base image has
# Prefixes the image has itself: mounting the host's over them would replace the image's system.
SYSTEM_PREFIXES = (Path("/"), Path("/usr"), Path("/usr/local"))
LABEL = "torch-bisect-bot.probe"
# What a run that the sandbox could not start says, with exit 125 (as the namespace mode's
# launcher does): judged SKIP, "the sandbox could not run it", never BAD.
SANDBOX_FAILED = "torch-bisect-bot sandbox:"
GPU_UUID = re.compile(r"(?:GPU|MIG)-[\w-]+")
NVIDIA_VISIBLE = "NVIDIA_VISIBLE_DEVICES"
GPU_HINT = "; GPUs in Docker need the NVIDIA Container Toolkit"

# The container's command, run by the image's own Python (the Dockerfile's venv, whatever the
# base) as the only child of docker-init, with the standard library only. It starts the
# reproducer with its stderr joined to its stdout, as `UNPRIVILEGED`: the launcher and
# docker-init are root (with no capability but to change uid), so the reproducer cannot signal
# or trace them. As the same uid, it stopped its launcher with SIGSTOP, whose alarm then never
# ended the container of a killed bot (found by a red-team session). It keeps the container's
# stderr to itself, to tell the bot what docker's exit status cannot:
#   "started": before the reproducer (missing: the sandbox never ran it);
#   "returncode N": how the reproducer ended (`sys.exit(139)` is 139, a SIGSEGV is -11; docker's
#   status is 139 for both).
# A reproducer that cannot be started (an interpreter missing from the image) is exit 125 and a
# `torch-bisect-bot sandbox:` line. A container has no parent-death signal: the launcher ends the
# container itself at its own deadline (SIGALRM), in case the bot was killed mid-probe.
LAUNCHER_PYTHON = "/opt/torch-bisect-bot/venv/bin/python3"
LAUNCHER_SAYS = "torch-bisect-bot launcher: "
LAUNCHER = r"""
import os, resource, signal, subprocess, sys
def say(line):
    os.write(2, ("torch-bisect-bot launcher: %s\n" % line).encode())
limit, argv = float(sys.argv[1]), sys.argv[3:]
uid, gid = map(int, sys.argv[2].split(":"))
def unprivileged():
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
signal.signal(signal.SIGALRM, lambda *_: os._exit(124))  # docker-init then ends the rest
signal.alarm(max(1, int(limit + 0.999)))
say("started")
try:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                             preexec_fn=unprivileged)
except (OSError, subprocess.SubprocessError) as exc:
    print("torch-bisect-bot sandbox: cannot start %s: %s" % (argv[0], exc), flush=True)
    sys.exit(125)
code = child.wait()
say("returncode %d" % code)
if code < 0:  # die as the reproducer did, without a core: docker-init reports 128 + N
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), -code)
    sys.exit(128 - code)
sys.exit(code)
"""


def physical_memory() -> int:
    """The machine's memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _tmpfs(size: int, mode: str) -> str:
    # Docker's tmpfs default is noexec, but Triton and Inductor dlopen the kernels they compile.
    return f"rw,exec,nosuid,nodev,size={size},nr_inodes={TMPFS_INODES},mode={mode}"


def environment_mounts(readonly: Sequence[Path]) -> list[Mount]:
    """Read-only binds of each environment at its host path, and of the interpreter it links to.

    A uv environment's bin/python is a symlink to the host's base interpreter (pyvenv.cfg `home`,
    e.g. /root/.pyenv/versions/3.11.7/bin), so that prefix is mounted at the same path too,
    unless it is a system prefix: then the image must ship the same Python there.
    """
    paths = {Path(p).resolve() for p in readonly}
    prefixes = {interpreter_prefix(p) for p in paths}
    paths |= {p for p in prefixes if p is not None and p not in SYSTEM_PREFIXES}
    # Never a path that is or holds the bot's home (an interpreter in ~/bin: its prefix is ~)
    # or /run (the Docker socket): only the parts of a prefix a run needs, as the namespace
    # mode shows. The whole home was mounted, its world-readable files (a checkout's
    # .git/config with a persisted token, ~/.pypirc) open to the run (found by an audit).
    hidden = {Path(h) for h in (*ALWAYS_HIDDEN, str(Path.home()))}
    shown = narrowed(sorted(paths), sorted(hidden | {h.resolve() for h in hidden}))
    return [Mount(str(p), str(p), type="bind", read_only=True) for p in sorted(set(shown))]


def workdir_mounts(workdir: Path, tmpfs_bytes: int) -> tuple[dict[str, str], list[Mount]]:
    """The workdir and its subfolders as tmpfs (nothing it writes reaches the host's disk);
    the files the runner put there (the script) bound in read-only."""
    tmpfs = {"/tmp": _tmpfs(tmpfs_bytes, "1777"), str(workdir): _tmpfs(tmpfs_bytes, "1777")}
    mounts = []
    for path in sorted(workdir.rglob("*")):
        if path.is_dir():
            tmpfs[str(path)] = _tmpfs(tmpfs_bytes, "1777")
        elif path.is_file():
            mounts.append(Mount(str(path), str(path), type="bind", read_only=True))
    return tmpfs, mounts


def gpu_requests(env: Mapping[str, str]) -> tuple[list[DeviceRequest], dict[str, str]]:
    """The device request of a GPU run, and the variables it changes: only the worker's own
    GPUs when CUDA_VISIBLE_DEVICES names them (indices or UUIDs), so that a reproducer cannot
    use another worker's; every GPU when it names none. The container sees its GPUs numbered
    from 0, so indices are renumbered there. NVIDIA_VISIBLE_DEVICES names the same GPUs: the
    NVIDIA runtime also reads it, and the bot's own (a GPU runner pod's) or the CUDA base
    image's `all` must not widen the request."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    names = [name.strip() for name in visible.split(",")] if visible else []
    if names and len(set(names)) == len(names):
        if all(name.isdigit() for name in names):
            inside = ",".join(str(index) for index in range(len(names)))
            return ([DeviceRequest(device_ids=names, capabilities=[["gpu"]])],
                    {"CUDA_VISIBLE_DEVICES": inside, NVIDIA_VISIBLE: ",".join(names)})
        if all(GPU_UUID.fullmatch(name) for name in names):
            return ([DeviceRequest(device_ids=names, capabilities=[["gpu"]])],
                    {NVIDIA_VISIBLE: ",".join(names)})
    return [DeviceRequest(count=-1, capabilities=[["gpu"]])], {NVIDIA_VISIBLE: "all"}


def _pump(frames: Iterator[tuple[bytes | None, bytes | None]], tail: OutputTail,
          launcher: OutputTail) -> None:
    try:
        for out, err in frames:
            if out:
                tail.feed(out)
            if err:
                launcher.feed(err)
    except (DockerException, requests.RequestException, OSError):
        pass  # the container was killed or removed under us: keep what was read


@dataclass(frozen=True)
class LauncherReport:
    """What the launcher said on the container's stderr, and anything else found there."""

    started: bool = False
    returncode: int | None = None
    other: str = ""

    @classmethod
    def parse(cls, text: str) -> LauncherReport:
        started, returncode, other = False, None, []
        for line in text.splitlines():
            said = line.removeprefix(LAUNCHER_SAYS) if line.startswith(LAUNCHER_SAYS) else None
            if said == "started":
                started = True
            elif said is not None and re.fullmatch(r"returncode -?\d+", said):
                returncode = int(said.split()[1])
            elif line.strip():
                other.append(line)
        return cls(started, returncode, "\n".join(other))


def _explain(exc: Exception) -> str:
    """The engine's own words for an API error (the URL and container id left out)."""
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc).strip()


def _no_engine(exc: Exception, docker_host: str | None) -> str:
    """What to do when no engine answers at DOCKER_HOST (or the default socket)."""
    if docker_host:
        at = f" at DOCKER_HOST={docker_host}"
        fix = "check that DOCKER_HOST names a running engine (unset, the default socket is used)"
    else:
        at = ""
        fix = ("start dockerd (its default socket is /var/run/docker.sock), or set DOCKER_HOST "
               "to where an engine listens")
    return f"--sandbox docker: no Docker engine reachable{at} ({exc}): {fix}; or use --sandbox " \
        "namespace"


def exit_status(code: int) -> tuple[int | None, int | None]:
    """(exit code, signal): docker-init (tini) reports a child killed by signal N as 128 + N."""
    if 128 < code <= 128 + 64:
        return None, code - 128
    return code, None


@dataclass
class ContainerSandbox:
    """Each run in a fresh container: no network, read-only root, unprivileged, bounded."""

    image: str = DEFAULT_IMAGE
    limits: Limits = field(default_factory=Limits)
    gpus: bool = False
    name: str = "docker"
    client: Any = None  # a docker.DockerClient; made from the environment when None
    # A container outlives a bot that was killed (kill -9, a lost runner): its launcher ends
    # it this long after its own deadline anyway.
    orphan_grace_s: float = 30.0
    # A container of ours still "created" this long after it was made is one that a bot
    # killed between create and start left behind, not one another bot is starting now.
    created_grace_s: float = 600.0
    clock: Callable[[], float] = time.time

    def _docker(self) -> Any:
        if self.client is None:
            self.client = docker.from_env()
        return self.client

    def available(self, python: Path | None = None) -> None:
        """Raise SandboxUnavailable unless the engine answers, the runner image exists and a
        trial container runs as a probe's would (with GPUs, for a CUDA reproducer: an engine
        without the NVIDIA Container Toolkit says so here, not in every probe), and `python`
        (default: the bot's own, which environments are made from unless --python names
        another) starts in it as a run would start it, so an interpreter the image cannot run
        is said here once, not as every probe's SKIP. Exited containers of ours (left by a bot
        that was killed), and ones never started for over `created_grace_s`, are removed here."""
        try:
            self._docker().ping()
            self._prune()
        except (DockerException, requests.RequestException) as exc:
            raise SandboxUnavailable(_no_engine(exc, os.environ.get("DOCKER_HOST"))) from exc
        try:
            self._docker().images.get(self.image)
        except DockerException as exc:
            raise SandboxUnavailable(
                f"--sandbox docker: image {self.image} not found; build it from the "
                f"repository with `docker build -t {self.image} .` (pulls the CUDA base "
                f"image), or where no registry can be reached `sudo scripts/ci-docker.sh`"
                f" (a Debian base made with debootstrap, which needs a Debian mirror)"
            ) from exc
        failed = self._trial(["/bin/sh", "-c", "echo ok"], ())
        if failed is not None:
            failed = failed.removesuffix(GPU_HINT)  # said below, with what to do
            gpu = (" A CUDA reproducer needs GPUs in the container: install the NVIDIA "
                   "Container Toolkit and configure Docker for it (`nvidia-ctk runtime configure "
                   "--runtime=docker`, then restart dockerd), or use --sandbox namespace."
                   if self.gpus else "")
            raise SandboxUnavailable(f"--sandbox docker: a trial container did not run "
                                     f"({failed}).{gpu}")
        self._starts(Path(python) if python else Path(sys.executable).resolve())

    def _starts(self, python: Path) -> None:
        """Raise SandboxUnavailable unless `python` starts in a container as a run starts an
        environment's interpreter: its prefix mounted read-only at its own path (a system
        prefix never: the image's own is used), as the container's unprivileged user."""
        prefix = python.parent.parent  # a venv (its pyvenv.cfg names the base) or a prefix
        failed = self._trial([str(python), "-I", "-S", "-c", "print('ok')"], (prefix,))
        if failed is None:
            return
        base = interpreter_prefix(prefix) or prefix
        if base.resolve() in SYSTEM_PREFIXES:
            how = (f"{base} is the system's, which the container does not mount over the "
                   f"image's own: the image must ship this Python at the same path (build it "
                   f"from a base with the same Python version), or make the environments "
                   f"from a Python outside {base} (`uv python install`, pyenv)")
        else:
            how = (f"{base} is mounted read-only at its own path and run as uid "
                   f"{UNPRIVILEGED.split(':')[0]}, who must be able to read it (`chmod -R "
                   f"o+rX {base}`); and the image's glibc must be at least as new as this "
                   "machine's, whose Python and wheels were built against it")
        raise SandboxUnavailable(f"--sandbox docker cannot start {python} in a container of "
                                 f"{self.image} ({failed}). Every run starts the environment's "
                                 f"Python so: {how}.")

    def _trial(self, argv: list[str], readonly: Sequence[Path]) -> str | None:
        """Why `argv` did not print "ok" in a container configured as a probe's; None when
        it did."""
        with tempfile.TemporaryDirectory(prefix="tbb-preflight-") as folder:
            result = self.execute(argv, {"PATH": SAFE_PATH}, Path(folder), readonly, 120.0,
                                  OutputTail(4096))
        if result.exit_code == 0 and result.output.strip() == "ok":
            return None
        said = result.output.strip().removeprefix(SANDBOX_FAILED).strip()
        return said[-500:] or ("timed out" if result.timed_out else
                               f"exit {result.exit_code}, signal {result.signal}")

    def _prune(self) -> None:
        # Never a running one: another bot may own it. A "created" one was never started: a
        # bot killed between create and start left it, or another bot is starting it now,
        # so only one older than `created_grace_s` is taken as left behind.
        # sparse: the list API's own entries, whose "Created" is in Unix seconds.
        for status in ("exited", "dead", "created"):
            for stale in self._docker().containers.list(
                    all=True, sparse=True, filters={"label": LABEL, "status": status}):
                if status == "created" and not self._abandoned(stale.attrs.get("Created")):
                    continue
                with contextlib.suppress(DockerException):
                    stale.remove(force=True)

    def _abandoned(self, created: object) -> bool:
        """Made at `created` (Unix seconds) over `created_grace_s` ago; no time is no age."""
        if not isinstance(created, int | float):
            return False
        return self.clock() - created > self.created_grace_s

    def arguments(self, argv: list[str], env: dict[str, str], workdir: Path,
                  readonly: Sequence[Path], timeout_s: float = 3600.0) -> dict[str, Any]:
        """The keyword arguments of `containers.create` for one run."""
        tmpfs, files = workdir_mounts(workdir, self.limits.tmpfs_bytes)
        # /dev/shm as the namespace mode has it: DataLoader workers and torch.multiprocessing
        # pass tensors through it, and docker's default of 64 MiB made them die of SIGBUS.
        tmpfs["/dev/shm"] = _tmpfs(self.limits.tmpfs_bytes, "1777")
        # No GPU unless asked for: the NVIDIA runtime (the default runtime on many GPU hosts)
        # gives a container the GPUs its NVIDIA_VISIBLE_DEVICES names, device request or not;
        # "void" is none (nvidia-container-toolkit).
        gpus: list[DeviceRequest] = []
        changed = {NVIDIA_VISIBLE: "void"}
        if self.gpus:
            gpus, changed = gpu_requests(env)
        env = {**env, **changed}
        ulimits = [Ulimit(name="fsize", soft=self.limits.file_bytes, hard=self.limits.file_bytes),
                   Ulimit(name="nofile", soft=self.limits.open_files,
                          hard=self.limits.open_files),
                   Ulimit(name="core", soft=0, hard=0)]
        limit = f"{timeout_s + self.orphan_grace_s:.0f}"
        # Below the machine's memory, so that the cgroup's own OOM killer acts first (tmpfs
        # files count there too); and the container first to go when the machine's runs out.
        memory = min(self.limits.memory_bytes, physical_memory() * 3 // 4)
        command = [LAUNCHER_PYTHON, "-I", "-S", "-c", LAUNCHER, limit, UNPRIVILEGED, *argv]
        return dict(
            image=self.image, command=command, environment=env, working_dir=str(workdir),
            user="0:0", network_mode="none", read_only=True, tmpfs=tmpfs,
            mounts=[*environment_mounts(readonly), *files], device_requests=gpus,
            mem_limit=memory, memswap_limit=memory, oom_score_adj=1000,
            shm_size=self.limits.tmpfs_bytes,  # where an engine ignores the tmpfs above
            sysctls={f"kernel.{name}": str(value)
                     for name, value in shm_limits(self.limits.tmpfs_bytes).items()},
            pids_limit=self.limits.processes, ulimits=ulimits, cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID"],  # the launcher's, to become UNPRIVILEGED
            security_opt=["no-new-privileges"], ipc_mode="private", init=True,
            log_config=LogConfig(type=LogConfig.types.NONE),  # attach carries the output
            labels={LABEL: "1"}, stdin_open=False, tty=False,
        )

    def _failed(self, why: str, started: float, tail: OutputTail | None = None) -> RunResult:
        """A run the sandbox could not make: exit 125 and the line that says why (SKIP)."""
        if self.gpus and "device driver" in why:
            why += GPU_HINT
        before = tail.text() if tail is not None else ""
        return RunResult(Stage.RUN, exit_code=EXIT_SKIP, seconds=time.monotonic() - started,
                         output=f"{before}{SANDBOX_FAILED} {why}\n")

    def execute(self, argv: list[str], env: dict[str, str], workdir: Path,
                readonly: Sequence[Path], timeout_s: float, tail: OutputTail,
                cancel: threading.Event | None = None) -> RunResult:
        started = time.monotonic()
        try:
            container = self._docker().containers.create(
                **self.arguments(argv, env, workdir, readonly, timeout_s))
        except (DockerException, requests.RequestException) as exc:
            return self._failed(f"cannot create the container: {_explain(exc)}", started)
        try:
            with killed_on(cancel, container.kill):
                return self._run(container, timeout_s, tail, started)
        finally:
            with contextlib.suppress(DockerException, requests.RequestException):  # gone
                container.remove(force=True)

    def _run(self, container: Any, timeout_s: float, tail: OutputTail,
             started: float) -> RunResult:
        launcher = OutputTail(4096)
        try:
            frames = container.attach(stdout=True, stderr=True, stream=True, logs=False,
                                      demux=True)
            reader = threading.Thread(target=_pump, args=(frames, tail, launcher), daemon=True)
            reader.start()
            container.start()
        except (DockerException, requests.RequestException) as exc:
            return self._failed(f"cannot start the container: {_explain(exc)}", started)
        timed_out, code = False, -1
        waited = time.monotonic()
        try:
            code = int(container.wait(timeout=timeout_s)["StatusCode"])
        except (requests.RequestException, DockerException) as exc:
            if time.monotonic() - waited < timeout_s:  # not the deadline: the engine failed
                with contextlib.suppress(DockerException, requests.RequestException):
                    container.kill()
                return self._failed(f"lost the container: {_explain(exc)}", started, tail)
            timed_out = True
            with contextlib.suppress(DockerException, requests.RequestException):
                container.kill()  # it may have ended by itself meanwhile
                container.wait(timeout=30)
        reader.join(timeout=10)
        seconds = time.monotonic() - started
        if timed_out:
            return RunResult(Stage.RUN, timed_out=True, seconds=seconds, output=tail.text(),
                             output_dropped=tail.dropped)
        report = LauncherReport.parse(launcher.text())
        if not report.started:
            said = f": {report.other[-300:]}" if report.other else ""
            return self._failed(f"its launcher ({LAUNCHER_PYTHON} in {self.image}) did not "
                                f"start (exit {code}){said}", started, tail)
        output = tail.text() + (f"\n{report.other}\n" if report.other else "")
        if report.returncode is not None:  # exact: an exit 139 is not a SIGSEGV
            rc = report.returncode
            exit_code, signal = (rc, None) if rc >= 0 else (None, -rc)
        else:  # the launcher itself was killed (the OOM killer, the reproducer)
            exit_code, signal = exit_status(code)
        return RunResult(Stage.RUN, exit_code=exit_code, signal=signal, seconds=seconds,
                         output=output, output_dropped=tail.dropped)
