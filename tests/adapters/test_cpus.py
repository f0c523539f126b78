"""The CPUs a process may use, from real files laid out as /proc/self and /sys/fs/cgroup are."""

from __future__ import annotations

import os

from bot.adapters.cpus import usable_cores


def _proc(tmp_path, cgroup: str, mounts: list[str]):
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("".join(f"{n} 1 0:{n} {m}\n" for n, m in
                                            enumerate(mounts, 20)))
    return proc


def test_a_cpu_quota_on_the_cgroup_or_above_it_caps_theusable_cores(tmp_path) -> None:
    """A pod limited to half a CPU on a host whose cores are all in its affinity mask
    (cgroup v2, the limit on the pod's cgroup above the runner's own): one prefetch thread.
    Files laid out as /proc/self/cgroup, /proc/self/mountinfo and /sys/fs/cgroup are."""
    mask = len(os.sched_getaffinity(0))
    cgroups = tmp_path / "cgroup"
    runner = cgroups / "kubepods" / "pod1" / "runner"
    runner.mkdir(parents=True)
    (runner / "cpu.max").write_text("max 100000\n")
    (runner.parent / "cpu.max").write_text("50000 100000\n")
    proc = _proc(tmp_path, "0::/kubepods/pod1/runner\n",
                 [f"/ {cgroups} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate",
                  f"/ {tmp_path} rw - ext4 /dev/vda rw"])
    assert usable_cores(proc) == 1
    (runner.parent / "cpu.max").write_text("max 100000\n")
    assert usable_cores(proc) == mask


def test_a_v1_cpu_quota_seen_from_inside_a_container_caps_theusable_cores(tmp_path) -> None:
    """cgroup v1 as Docker shows it to a container: the cpu hierarchy's mount is rooted at
    the container's own cgroup, which /proc/self/cgroup names from the host's root."""
    cpu = tmp_path / "cgroup" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("100000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    proc = _proc(tmp_path, "2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n0::/docker/abc\n",
                 [f"/docker/abc {cpu} ro,nosuid - cgroup cgroup rw,cpu",
                  f"/docker/abc {tmp_path / 'cgroup' / 'memory'} ro - cgroup cgroup rw,memory"])
    assert usable_cores(proc) == 1
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert usable_cores(proc) >= 1 and usable_cores(proc) == usable_cores(tmp_path / "no-such-proc")
