"""Real torch wheels (opt-in: `make test-real`). Downloads: see the module's DOWNLOADS note.

DOWNLOADS: about 6 GB from PyPI into a temporary uv cache (torch 2.5.1 and 2.6.0 for Linux are
CUDA builds, and each pulls its pinned nvidia-* libraries and triton), plus nothing for the CPU
torch 2.13 wheel, which pip installs from this machine's own wheel folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.adapters.environments import EnvironmentCache
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, select_builds
from bot.jobs.cli import main

pytestmark = pytest.mark.real

# torch 2.6 changed torch.load's default to weights_only=True (PyTorch 2.6 release notes), so a
# checkpoint holding an arbitrary object loads on 2.5.1 and fails on 2.6.0.
WEIGHTS_ONLY_REPRO = """
import io
import torch


class Box:
    def __init__(self, value):
        self.value = value


buffer = io.BytesIO()
torch.save({"box": Box(3)}, buffer)
buffer.seek(0)
assert torch.load(buffer)["box"].value == 3
print("loaded", torch.__version__)
"""


def test_bisects_real_releases_from_pypi(tmp_path, capsys):
    print(__doc__, file=sys.stderr)
    script = tmp_path / "repro.py"
    script.write_text(WEIGHTS_ONLY_REPRO)
    report = tmp_path / "r.json"
    code = main(["bisect", str(script), "--channel", "release", "--python", "3.11",
                 "--good", "2.5.1", "--bad", "2.6.0", "--cache-dir", str(tmp_path / "cache"),
                 "--timeout", "300", "--json", str(report)])
    data = json.loads(report.read_text())
    assert code == 0 and data["status"] == "found", data
    assert (data["last_good"], data["first_bad"]) == ("2.5.1", "2.6.0")
    bad = next(p for p in data["probe_records"] if p["version"] == "2.6.0")
    assert "UnpicklingError" in bad["reason"] or "Weights only load failed" in bad["reason"]
    for field in ("torch", "git_version", "cuda", "triton", "sha256"):
        assert bad["info"].get(field), f"{field} not recorded"


def test_a_second_environment_from_a_warm_cache_takes_seconds(tmp_path):
    cache = EnvironmentCache(tmp_path / "cache", python="3.11", index_url="https://pypi.org/simple")
    links = WheelIndex("https://pypi.org/simple").project_links("torch")
    build = next(b for b in select_builds(links, Selection("cp311", channel="release"))
                 if b.version == "2.6.0")
    started = time.monotonic()
    first = cache.provision(build)
    cold = time.monotonic() - started
    shutil.rmtree(first.path)  # the environment goes; uv's cache stays
    started = time.monotonic()
    cache.provision(build)
    warm = time.monotonic() - started
    print(f"\nfirst environment: {cold:.1f} s, second from a warm cache: {warm:.1f} s",
          file=sys.stderr)
    assert warm < cold


@pytest.fixture(scope="module")
def torch213(tmp_path_factory):
    """A venv with this machine's CPU torch 2.13 wheel (pip's find-links folder)."""
    venv = tmp_path_factory.mktemp("t213") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "torch==2.13.0"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"pip could not install the CPU torch 2.13 wheel: {done.stderr[-500:]}")
    return venv


def test_runs_under_the_cpu_torch_213_wheel_of_this_machine(torch213, tmp_path, capsys):
    venv = torch213
    script = tmp_path / "repro.py"
    script.write_text(
        "import torch\n"
        "def f(x):\n    return torch.sin(x) * 2 + x.cumsum(0)\n"
        "x = torch.randn(64)\n"
        "torch.testing.assert_close(torch.compile(f, backend='aot_eager')(x), f(x))\n"
    )
    report = tmp_path / "r.json"
    code = main(["bisect", str(script), "--builds-from-python", str(venv / "bin" / "python"),
                 str(venv / "bin" / "python"), "--json", str(report)])
    data = json.loads(report.read_text())
    assert code == 0 and data["status"] == "not-reproduced"
    record = data["probe_records"][0]
    assert record["info"]["torch"] == "2.13.0+cpu" and record["verdict"] == "good"


# Two gloo ranks that all_reduce, launched as the issue says (torchrun), and two more started
# by the script itself (mp.spawn): both meet on 127.0.0.1, which in the namespace sandbox is
# its own loopback, down until the launcher brings it up.
GLOO = Path(__file__).resolve().parents[2] / "examples" / "gloo_ranks_repro.py"
DDP_ISSUE = f"Run with `torchrun --nproc_per_node=2 repro.py`:\n\n```python\n{GLOO.read_text()}```\n"
SPAWN = """
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.ones(2) * (rank + 1)
    dist.all_reduce(x)
    assert x.tolist() == [3.0, 3.0], x
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
    print("spawned ranks agree")
"""


def test_distributed_reproducers_run_on_the_real_cpu_torch(torch213, tmp_path):
    python = str(torch213 / "bin" / "python")
    issue, spawn = tmp_path / "issue.md", tmp_path / "spawn.py"
    issue.write_text(DDP_ISSUE)
    spawn.write_text(SPAWN)
    common = ["--builds-from-python", python, python, "--no-commit-tier", "--no-triage",
              "--db", str(tmp_path / "h.sqlite3"), "--sandbox", "namespace"]
    assert main(["bisect", str(issue), *common, "--json", str(tmp_path / "ddp.json")]) == 0
    ddp = json.loads((tmp_path / "ddp.json").read_text())
    assert ddp["options"]["processes"] == "2"
    assert [p["reason"] for p in ddp["probes"]] == ["RuntimeError: rank 1 sees 12.0"] * 2
    assert main(["bisect", str(spawn), *common, "--json", str(tmp_path / "spawn.json")]) == 0
    record = json.loads((tmp_path / "spawn.json").read_text())["probe_records"][0]
    assert record["verdict"] == "good", record["result"]["output"][-2000:]


def test_an_environment_derived_from_the_real_cpu_torch_213_wheel_compiles(tmp_path):
    """The real wheel (12,000 files, a RECORD with launchers, Requires-Dist with markers and
    extras): an environment derived from one uv made of it, its binaries unpacked anew (the
    donor's listing told they differ), imports, compiles, and has torchrun."""
    from bot.adapters.delta_install import MEMBERS, derive, read_wheel, remember
    from bot.adapters.environments import require_uv

    wheel = next(Path("/opt/wheels").glob("torch-2.13.0+cpu-cp311-*.whl"), None)
    if wheel is None:
        pytest.fail("this machine's CPU torch 2.13 wheel is not in /opt/wheels")
    uv = require_uv()
    donor = tmp_path / "donor"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    subprocess.run([uv, "venv", "-q", "--relocatable", "--python", sys.executable, str(donor)],
                   check=True, env=env)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(donor / "bin" / "python"),
                    str(wheel)], check=True, env=env)
    remember(donor, read_wheel(wheel))
    listing = json.loads((donor / MEMBERS).read_text())
    binaries = [path for path in listing["record"] if path.endswith(".so")]
    for path in binaries:  # as if every binary differed, as between two nightlies
        listing["record"][path] = "sha256=" + "A" * 43
    (donor / MEMBERS).write_text(json.dumps(listing))
    started = time.monotonic()
    made = derive(donor, wheel, tmp_path / "derived")
    print(f"\nderived in {time.monotonic() - started:.1f} s: {made.linked} files linked, "
          f"{made.unpacked} unpacked", file=sys.stderr)
    assert made.unpacked >= len(binaries) > 10
    python = tmp_path / "derived" / "bin" / "python"
    ran = subprocess.run(
        [str(python), "-c", "import torch\n"
         "f = torch.compile(lambda x: torch.sin(x) * 2 + x.cumsum(0))\n"
         "x = torch.arange(8.0)\n"
         "torch.testing.assert_close(f(x), torch.sin(x) * 2 + x.cumsum(0))\n"
         "print(torch.__version__)"], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and ran.stdout.strip() == "2.13.0+cpu", ran.stderr[-2000:]
    launcher = subprocess.run([str(tmp_path / "derived" / "bin" / "torchrun"), "--help"],
                              capture_output=True, text=True, timeout=120)
    assert launcher.returncode == 0 and "torchrun" in launcher.stdout
    listed = subprocess.run([uv, "pip", "show", "--python", str(python), "torch"],
                            capture_output=True, text=True, check=True, env=env).stdout
    assert "Version: 2.13.0+cpu" in listed
