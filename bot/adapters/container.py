"""Runs a reproducer in a throwaway container of the runner image, through the `docker` SDK."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import DockerException
from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from bot.adapters.runner import OutputTail, killed_on
from bot.adapters.sandbox import Limits, SandboxUnavailable, interpreter_prefix
from bot.adapters.sandbox_launcher import TMPFS_INODES, shm_limits
from bot.core.verdicts import RunResult, Stage

DEFAULT_IMAGE = "torch-bisect-bot:latest"  # built from ./Dockerfile (scripts/ci-docker.sh)
UNPRIVILEGED = "65534:65534"  # nobody, which every base image has
# Prefixes the image has itself: mounting the host's over them would replace the image's system.
SYSTEM_PREFIXES = (Path("/"), Path("/usr"), Path("/usr/local"))
LABEL = "torch-bisect-bot.probe"


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
    return [Mount(str(p), str(p), type="bind", read_only=True) for p in sorted(paths)]


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


def _pump(frames: Iterator[bytes], tail: OutputTail) -> None:
    try:
        for chunk in frames:
            tail.feed(chunk)
    except (DockerException, requests.RequestException, OSError):
        pass  # the container was killed or removed under us: keep what was read


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
    # A container outlives a bot that was killed (kill -9, a lost runner): its command is
    # wrapped in coreutils' `timeout`, so it dies this long after its own deadline anyway.
    orphan_grace_s: float = 30.0

    def _docker(self) -> Any:
        if self.client is None:
            self.client = docker.from_env()
        return self.client

    def available(self) -> None:
        """Raise SandboxUnavailable unless the engine answers and the runner image exists.
        Exited containers of ours (left by a bot that was killed) are removed here."""
        try:
            self._docker().ping()
            self._prune()
        except (DockerException, requests.RequestException) as exc:
            raise SandboxUnavailable(f"--sandbox docker: no Docker engine reachable ({exc})") \
                from exc
        try:
            self._docker().images.get(self.image)
        except DockerException as exc:
            raise SandboxUnavailable(
                f"--sandbox docker: image {self.image} not found; build it with "
                f"`docker build -t {self.image} .` (or scripts/ci-docker.sh)"
            ) from exc

    def _prune(self) -> None:
        for status in ("exited", "dead"):  # never a running one: another bot may own it
            for stale in self._docker().containers.list(
                    all=True, filters={"label": LABEL, "status": status}):
                with contextlib.suppress(DockerException):
                    stale.remove(force=True)

    def _create(self, argv: list[str], env: dict[str, str], workdir: Path,
                readonly: Sequence[Path], timeout_s: float = 3600.0) -> Any:
        tmpfs, files = workdir_mounts(workdir, self.limits.tmpfs_bytes)
        gpus = [DeviceRequest(count=-1, capabilities=[["gpu"]])] if self.gpus else []
        ulimits = [Ulimit(name="fsize", soft=self.limits.file_bytes, hard=self.limits.file_bytes),
                   Ulimit(name="nofile", soft=self.limits.open_files,
                          hard=self.limits.open_files),
                   Ulimit(name="core", soft=0, hard=0)]
        limit = f"{timeout_s + self.orphan_grace_s:.0f}"
        # Below the machine's memory, so that the cgroup's own OOM killer acts first (tmpfs
        # files count there too); and the container first to go when the machine's runs out.
        memory = min(self.limits.memory_bytes, physical_memory() * 3 // 4)
        wrapped = ["/usr/bin/timeout", "--signal=KILL", limit, *argv]
        return self._docker().containers.create(
            self.image, wrapped, environment=env, working_dir=str(workdir), user=UNPRIVILEGED,
            network_mode="none", read_only=True, tmpfs=tmpfs,
            mounts=[*environment_mounts(readonly), *files], device_requests=gpus,
            mem_limit=memory, memswap_limit=memory, oom_score_adj=1000,
            sysctls={f"kernel.{name}": str(value)
                     for name, value in shm_limits(self.limits.tmpfs_bytes).items()},
            pids_limit=self.limits.processes, ulimits=ulimits, cap_drop=["ALL"],
            security_opt=["no-new-privileges"], ipc_mode="private", init=True,
            log_config=LogConfig(type=LogConfig.types.NONE),  # attach carries the output
            labels={LABEL: "1"}, stdin_open=False, tty=False,
        )

    def execute(self, argv: list[str], env: dict[str, str], workdir: Path,
                readonly: Sequence[Path], timeout_s: float, tail: OutputTail,
                cancel: threading.Event | None = None) -> RunResult:
        started = time.monotonic()
        try:
            container = self._create(argv, env, workdir, readonly, timeout_s)
        except DockerException as exc:
            return RunResult(Stage.IMPORT, error=f"cannot create the container: {exc}")
        try:
            with killed_on(cancel, container.kill):
                return self._run(container, timeout_s, tail, started)
        finally:
            with contextlib.suppress(DockerException):  # already gone
                container.remove(force=True)

    def _run(self, container: Any, timeout_s: float, tail: OutputTail,
             started: float) -> RunResult:
        frames = container.attach(stdout=True, stderr=True, stream=True, logs=False)
        reader = threading.Thread(target=_pump, args=(frames, tail), daemon=True)
        reader.start()
        container.start()
        timed_out, code = False, -1
        try:
            code = int(container.wait(timeout=timeout_s)["StatusCode"])
        except (requests.RequestException, DockerException):
            timed_out = True
            container.kill()
            container.wait(timeout=30)
        reader.join(timeout=10)
        exit_code, signal = exit_status(code)
        return RunResult(
            Stage.RUN, exit_code=None if timed_out else exit_code,
            signal=None if timed_out else signal, timed_out=timed_out,
            seconds=time.monotonic() - started, output=tail.text(), output_dropped=tail.dropped,
        )
