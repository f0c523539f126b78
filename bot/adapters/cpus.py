"""How many CPUs this process may use: the affinity mask, capped by a cgroup CPU quota."""

from __future__ import annotations

import math
import os
from pathlib import Path


def usable_cores(proc: Path = Path("/proc/self")) -> int:
    """The cores this process may use: its affinity mask, or fewer where a CPU quota on its
    cgroup or any cgroup above it allows fewer (cgroup v2 `cpu.max`, v1
    `cpu.cfs_quota_us`). A container's CPU limit (`docker run --cpus`, a runner pod's
    limit under actions-runner-controller) leaves every core of the host in the mask."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    try:
        quota = _cpu_quota(proc)
    except (OSError, ValueError):
        quota = None  # unreadable: trust the mask
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def _cpu_quota(proc: Path) -> float | None:
    """The tightest CPU quota (in CPUs) on this process's cgroup and those above it that
    are visible, found through the cgroup mounts in `proc`/mountinfo; None if none."""
    membership = {}
    for line in (proc / "cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else ["(v2)"]:
            membership[name] = path
    tightest: float | None = None
    files: tuple[str, ...]
    for line in (proc / "mountinfo").read_text().splitlines():
        fields = line.split()
        root, point = fields[3], Path(fields[4])
        fstype, options = fields[-3], fields[-1].split(",")
        if fstype == "cgroup2":
            own, files = membership.get("(v2)"), ("cpu.max",)
        elif fstype == "cgroup" and "cpu" in options:
            own, files = membership.get("cpu"), ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        if own is None or not (own == root or own.startswith(root.rstrip("/") + "/")):
            continue
        folder = point / own[len(root):].lstrip("/")
        while True:
            texts = [(folder / name).read_text() if (folder / name).exists() else ""
                     for name in files]
            numbers = " ".join(texts).split()
            if len(numbers) >= 2 and numbers[0] not in ("max", "-1"):
                cpus = int(numbers[0]) / int(numbers[1])
                tightest = cpus if tightest is None else min(tightest, cpus)
            if folder == point:
                break
            folder = folder.parent
    return tightest
