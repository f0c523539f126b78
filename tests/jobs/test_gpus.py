"""`--gpus 0,1`: one worker per GPU, and each run of a round sees only its own GPU."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from bot.core.errors import UserError
from bot.jobs.cli import main
from bot.jobs.gpu import gpu_slots
from bot.jobs.local import gpu_list

# Sleeps long enough that the two probes of a round overlap, then says what it saw.
REPRO = """\
import json, os, time, torch
began = time.time()
time.sleep(1.0)
print("SEEN " + json.dumps({"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "version": torch.__version__, "began": began, "ended": time.time()}))
raise SystemExit(torch.__version__ >= "2.13.0.dev20260521")
"""


def test_gpu_list_parses_and_rejects() -> None:
    assert gpu_list("0,1") == ("0", "1")
    assert gpu_list("GPU-8f3c2a1b-0000-1111-2222-333344445555,MIG-1a2b") == (
        "GPU-8f3c2a1b-0000-1111-2222-333344445555", "MIG-1a2b")
    for bad in ("0,,1", "1,1", "", "x,y", "0;rm -rf /"):
        with pytest.raises(argparse.ArgumentTypeError):
            gpu_list(bad)


def _seen(probe: dict) -> dict:
    line = next(ln for ln in probe["result"]["output"].splitlines() if ln.startswith("SEEN "))
    return json.loads(line[len("SEEN "):])


def test_concurrent_probes_of_a_round_see_different_gpus(index_server, cache_dir, tmp_path,
                                                        capsys) -> None:
    script = tmp_path / "gpu_repro.py"
    script.write_text(REPRO)
    report = tmp_path / "report.json"
    code = main(["bisect", str(script), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--good", "2026-05-02",
                 "--gpus", "0,1", "--json", str(report)])
    capsys.readouterr()
    assert code == 0
    data = json.loads(report.read_text())
    assert data["first_bad"] == "2.13.0.dev20260521+cpu"
    seen = [_seen(p) for p in data["probe_records"] if not p["variant_env"]]
    assert {s["gpu"] for s in seen} == {"0", "1"}
    overlapping = [(a, b) for i, a in enumerate(seen) for b in seen[i + 1:]
                   if a["began"] < b["ended"] and b["began"] < a["ended"]]
    assert overlapping, "no two probes ran at the same time"
    assert all(a["gpu"] != b["gpu"] for a, b in overlapping)


def test_a_probe_holds_its_gpu_for_its_runs_only(index_server, cache_dir, tmp_path) -> None:
    """The install takes no GPU: with one GPU per worker, a stopped probe still deleting its
    half-made environment (up to 1.8 s on the GPU host) used to keep the next probe waiting
    for that GPU before its own install could begin."""
    import contextlib
    import sys
    import time

    from bot.adapters.environments import EnvironmentCache
    from bot.adapters.runner import Runner
    from bot.adapters.wheel_index import WheelIndex
    from bot.core.builds import Selection, select_builds
    from bot.jobs.engine import ProbeOptions, Prober

    events: list[tuple[str, float]] = []
    cache = EnvironmentCache(cache_dir, extra_packages=())

    class Watched:
        @contextlib.contextmanager
        def using(self, build, cancel=None):
            events.append(("install", time.monotonic()))
            with cache.using(build, cancel) as env:
                events.append(("installed", time.monotonic()))
                yield env

    @contextlib.contextmanager
    def gpu():
        events.append(("gpu taken", time.monotonic()))
        yield {"CUDA_VISIBLE_DEVICES": "1"}
        events.append(("gpu back", time.monotonic()))

    script = tmp_path / "gpu_repro.py"
    script.write_text(REPRO)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    links = WheelIndex(index_server.variant_url("cpu")).project_links("torch")
    build = select_builds(links, Selection(tag, variant="cpu"))[3]
    prober = Prober(Watched(), Runner(), script, ProbeOptions(timeout_s=60, repeat=2))
    _, record = prober.probe(3, build, gpu)
    assert [name for name, _ in events] == ["install", "installed", "gpu taken", "gpu back"]
    assert _seen(record.to_dict())["gpu"] == "1"
    assert record.runs == 2


def test_a_worker_s_slot_holds_the_gpus_the_script_s_own_processes_take() -> None:
    script = ("import torch.multiprocessing as mp, torch.distributed as dist\n"
              "def run(rank):\n    dist.init_process_group('nccl', rank=rank, world_size=2)\n"
              "mp.spawn(run, nprocs=2)\n")
    assert gpu_slots(["0", "1", "2", "3"], None, script) == [
        {"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "2,3"}]
    with pytest.raises(UserError, match="runs on 2 processes"):
        gpu_slots(["0"], None, script)


# A torch of a machine with two GPUs, 0 and 1, that honours CUDA_VISIBLE_DEVICES as CUDA
# does: the devices listed, up to the first that is not there.
TWO_GPUS = '''import os
_MACHINE = ("0", "1")


def _visible():
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return list(_MACHINE)
    seen = []
    for device in listed.split(","):
        if device not in _MACHINE:
            break
        seen.append(device)
    return seen


def is_available():
    return bool(_visible())


def device_count():
    return len(_visible())
'''

CUDA_REPRO = """\
import torch
assert torch.cuda.is_available(), "No CUDA GPUs are available"
raise SystemExit(torch.__version__ >= "2.13.0.dev20260503")
"""


@pytest.fixture
def two_gpu_index(tmp_path):
    from bot.demo.synthetic_torch import package_files
    from bot.demo.wheels import build_wheel
    from tests.fakes.mirror import IndexServer

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for day in range(1, 6):
        version = f"2.13.0.dev2026050{day}+cpu"
        files = {**package_files(version, "0" * 40, None), "torch/cuda.py": TWO_GPUS}
        build_wheel(tmp_path / "mirror" / "cpu", "torch", version, files,
                    f"{tag}-{tag}-manylinux_2_28_x86_64")
    with IndexServer(tmp_path / "mirror") as server:
        yield server.variant_url("cpu")


@pytest.mark.parametrize(("gpus", "answer"), [("0,1", "found"), ("0,7", "cannot-test"),
                                              ("1,0,2", "cannot-test")])
def test_a_gpu_of_gpus_that_is_not_there_is_cannot_test_before_any_probe(
        two_gpu_index, tmp_path, capsys, gpus, answer) -> None:
    """Each worker's devices are asked before the bisection: GPU 7 on a machine with two
    used to pass the check (made without any worker's CUDA_VISIBLE_DEVICES) and then fail
    every probe its worker ran."""
    script = tmp_path / "cuda_repro.py"
    script.write_text(CUDA_REPRO)
    report = tmp_path / "report.json"
    code = main(["bisect", str(script), "--index", two_gpu_index, "--needs-cuda", "yes",
                 "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                 "--no-triage", "--no-bisector", "--no-commit-tier",
                 "--db", str(tmp_path / "db.sqlite"), "--gpus", gpus, "--json", str(report)])
    err = capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["status"] == answer, err
    if answer == "found":
        assert code == 0 and data["first_bad"] == "2.13.0.dev20260503+cpu"
    else:
        assert code == 6 and data["probe_records"] == []
        assert "--gpus: the worker given CUDA_VISIBLE_DEVICES=" in data["cannot_test"]
        assert "needs a CUDA GPU; torch.cuda.is_available() is False" in data["cannot_test"]


def test_gpus_for_a_reproducer_without_cuda_says_they_only_count_workers(
        index_server, cache_dir, tmp_path, capsys) -> None:
    script = tmp_path / "cpu_repro.py"
    script.write_text("import torch\nraise SystemExit(torch.__version__ >= '2.13.0.dev20260521')\n")
    code = main(["bisect", str(script), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--no-triage",
                 "--no-bisector", "--no-commit-tier", "--good", "2026-05-15",
                 "--db", str(tmp_path / "db.sqlite"), "--gpus", "0,1"])
    err = capsys.readouterr().err
    assert code == 0
    assert "--gpus: the reproducer does not use CUDA (give --needs-cuda yes if it does), so " \
           "the GPUs only set how many probes run at once: 2" in err
