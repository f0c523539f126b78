"""Environments derived from a made one's: what uv makes, files shared by link, uv otherwise.

Real wheels (zip files with RECORDs, as `bot.demo.wheels` writes them), the real uv for the
environments derived from and compared with, a real index on 127.0.0.1."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from bot.adapters import environments
from bot.adapters.delta_install import (
    MEMBERS,
    NotDerivable,
    derive,
    read_wheel,
    remember,
)
from bot.adapters.environments import (
    MARKER,
    PREFIX,
    Cancelled,
    EnvironmentCache,
    require_uv,
)
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, select_builds
from bot.demo.index_server import IndexServer
from bot.demo.wheels import build_wheel
from tests.processes import alive, gone

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
WHEEL_TAG = f"{TAG}-{TAG}-manylinux_2_28_x86_64"
SHARED = {f"torch/ops/op{i}.py": f"def op{i}():\n    return {i}\n" for i in range(40)}
ENTRY_POINTS = "[console_scripts]\ntorchrun = torch.distributed.run:main\n"


def torch_wheel(folder: Path, day: int, *, requires: tuple[str, ...] = (),
                entry_points: str = ENTRY_POINTS, extra: dict[str, bytes | str] | None = None,
                ) -> Path:
    """A torch nightly of 2.13.0.dev202605DD+cpu: its own version file and library, the
    shared files of every day, a launcher."""
    version = f"2.13.0.dev202605{day:02d}+cpu"
    files: dict[str, bytes | str] = {
        **SHARED,
        "torch/__init__.py": (f"__version__ = {version!r}\nfrom torch import version\n"
                              "from torch.ops.op1 import op1\n"),
        "torch/version.py": f"git_version = {f'{day:040d}'!r}\ncuda = None\n",
        "torch/distributed/__init__.py": "",
        "torch/distributed/run.py": "import torch\n\ndef main():\n    print(torch.__version__)\n",
        "torch/lib/libtorch_cpu.so": bytes([day]) * 300_000 + os.urandom(2000),
        f"torch-{version}.dist-info/entry_points.txt": entry_points,
        **(extra or {}),
    }
    return build_wheel(folder, "torch", version, files, tag=WHEEL_TAG, requires=requires)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Days 1, 2, 9 and 10 on an index; day 11 requires what the others do not."""
    root = tmp_path_factory.mktemp("delta-mirror")
    for day in (1, 2, 9, 10):
        torch_wheel(root / "cpu", day)
    torch_wheel(root / "cpu", 11, requires=("filelock",))
    build_wheel(root / "cpu", "filelock", "3.20.0", {"filelock/__init__.py": ""})
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        builds = {b.version[len("2.13.0.dev202605"):][:2]: b
                  for b in select_builds(links, Selection(TAG, variant="cpu"))}
        yield server, builds


def cache_at(root: Path, server: IndexServer, **kwargs) -> EnvironmentCache:
    return EnvironmentCache(root=root, python=PYTHON, extra_packages=(),
                            index_url=server.variant_url("cpu"), **kwargs)


def tree(venv: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file of an environment but bytecode and what only the installer writes about
    itself, with its contents and whether it is executable."""
    own = ("INSTALLER", "direct_url.json", "uv_cache.json", "RECORD")
    found = {}
    for path in venv.rglob("*"):
        relative = str(path.relative_to(venv))
        if (path.is_dir() or "__pycache__" in relative or relative.startswith(".tbb")
                or (".dist-info/" in relative and path.name in own)):
            continue
        found[relative] = (path.read_bytes(), os.access(path, os.X_OK))
    return found


def test_a_derived_environment_holds_what_uv_makes_and_shares_the_unchanged_files(
        tmp_path, served):
    server, builds = served
    cache = cache_at(tmp_path / "derived", server)
    donor = cache.provision(builds["01"])
    derived = cache.provision(builds["02"])
    assert "derived_from" not in donor.info
    assert derived.info["derived_from"] == builds["01"].version
    assert derived.info["torch"] == builds["02"].version
    by_uv = cache_at(tmp_path / "uv", server, derive=False).provision(builds["02"])
    assert "derived_from" not in by_uv.info
    assert tree(derived.path) == tree(by_uv.path)

    site = next(derived.path.glob("lib/python*/site-packages"))
    donor_site = next(donor.path.glob("lib/python*/site-packages"))
    same = os.path.samefile
    assert same(site / "torch/ops/op7.py", donor_site / "torch/ops/op7.py")
    assert not same(site / "torch/__init__.py", donor_site / "torch/__init__.py")
    assert not same(site / "torch/lib/libtorch_cpu.so", donor_site / "torch/lib/libtorch_cpu.so")
    # The launcher uv wrote for the donor serves the derived build (a relocatable one).
    ran = subprocess.run([derived.path / "bin" / "torchrun"], capture_output=True, text=True,
                         check=True)
    assert ran.stdout.strip() == builds["02"].version
    # Installers read it as installed: uv lists it and would uninstall every file.
    uv = require_uv()
    listed = subprocess.run([uv, "pip", "list", "--python", str(derived.python)],
                            capture_output=True, text=True, check=True).stdout
    assert builds["02"].version in listed
    record = next(site.glob("torch-*.dist-info/RECORD")).read_text()
    rows = {row[0] for row in csv.reader(io.StringIO(record)) if row}
    on_disk = {str(p.relative_to(site)) for p in site.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.parts[0] != "_virtualenv.py"
               and not p.name.startswith("_virtualenv")}
    assert {r for r in rows if not r.startswith("..")} == on_disk
    assert "../../../bin/torchrun" in rows


def test_the_nearest_made_build_is_derived_from(tmp_path, served):
    server, builds = served
    cache = cache_at(tmp_path, server)
    cache.provision(builds["01"])
    cache.provision(builds["10"])
    assert cache.provision(builds["09"]).info["derived_from"] == builds["10"].version


def test_a_derived_environment_outlives_its_donor(tmp_path, served):
    server, builds = served
    cache = cache_at(tmp_path, server)
    donor = cache.provision(builds["01"])
    derived = cache.provision(builds["02"])
    cache._remove(donor.path)
    assert not donor.path.exists()
    cache._whole.clear()
    found = cache.lookup(builds["02"])
    assert found is not None and found.path == derived.path
    ran = subprocess.run([derived.python, "-c", "import torch; print(torch.op1())"],
                         capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "1"


def test_uv_installs_what_cannot_be_derived(tmp_path, served, capfd):
    server, builds = served
    cache = cache_at(tmp_path, server)
    cache.provision(builds["10"])
    other = cache.provision(builds["11"])  # it requires filelock, which day 10 did not
    assert "derived_from" not in other.info
    assert "Requires-Dist differ" in capfd.readouterr().err
    site = next(other.path.glob("lib/python*/site-packages"))
    assert (site / "filelock" / "__init__.py").exists()


def test_a_damaged_donor_is_not_derived_from(tmp_path, served):
    """A donor missing a file (deleted by hand, a disk cleaner) or its interpreter would hand
    its damage on: the build is made by uv, whole."""
    server, builds = served
    cache = cache_at(tmp_path, server)
    donor = cache.provision(builds["01"])
    next(donor.path.glob("lib/python*/site-packages/torch/ops/op3.py")).unlink()
    made = cache.provision(builds["02"])
    assert "derived_from" not in made.info
    assert next(made.path.glob("lib/python*/site-packages/torch/ops/op3.py")).exists()
    (made.path / "bin" / "python").unlink()
    again = cache.provision(builds["09"])
    assert "derived_from" not in again.info and again.info["torch"] == builds["09"].version
    assert [p.name for p in cache.envs.iterdir() if "tmp" in p.name] == []


def test_a_derived_environment_whose_torch_does_not_import_is_made_by_uv(
        tmp_path, served, capfd):
    server, builds = served
    cache = cache_at(tmp_path, server)
    donor = cache.provision(builds["01"])
    shared = next(donor.path.glob("lib/python*/site-packages/torch/ops/op1.py"))
    shared.unlink()  # damaged after it was made: present, and not what its RECORD says
    shared.write_text("raise ImportError('damaged')\n")
    made = cache.provision(builds["02"])
    assert "derived_from" not in made.info and "import_error" not in made.info
    assert "derived environment did not import torch" in capfd.readouterr().err


def test_a_derivation_called_off_is_killed_and_leaves_nothing(tmp_path, served, monkeypatch):
    """A prefetch's derivation that the round no longer needs stops within a poll, its
    process gone, its half-made environment deleted."""
    server, builds = served
    cache = cache_at(tmp_path / "cache", server)
    cache.provision(builds["01"])
    pidfile = tmp_path / "pid"
    slow = tmp_path / "slow-derivation"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setattr(environments, "DERIVE", (str(slow),))
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        cache.provision(builds["02"], cancel)
    assert time.monotonic() - started < 5
    assert not alive(int(pidfile.read_text())), "the derivation is still running"
    gone(cache.envs, f"{PREFIX}*-2.13.0.dev20260502*")
    assert cache.lookup(builds["02"]) is None


def test_a_prefetch_s_derivation_runs_below_the_reproducer_s_priority(
        tmp_path, served, monkeypatch):
    server, builds = served
    cache = cache_at(tmp_path / "cache", server)
    cache.provision(builds["01"])
    seen = tmp_path / "niceness"
    fake = tmp_path / "fake-derivation"
    # Field 19 of /proc/PID/stat is the niceness; then it declines, and uv installs the build.
    fake.write_text(f"#!/bin/sh\ncut -d' ' -f19 /proc/$$/stat >> {seen}\n"
                    "echo 'declined' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(environments, "DERIVE", (str(fake),))
    base = os.nice(0)
    for build, background in ((builds["02"], False), (builds["09"], True)):
        made = cache.provision(build, background=background)
        assert "derived_from" not in made.info
    # The round's own tried one donor; the prefetch tried both made builds, each declined.
    assert [int(n) for n in seen.read_text().split()] == [base] + [min(19, base + 10)] * 2


def test_no_derivation_where_the_reproducer_s_packages_go_in(tmp_path, served):
    server, builds = served
    cache = cache_at(tmp_path, server, issue_packages=("filelock",))
    cache.provision(builds["01"])
    assert "derived_from" not in cache.provision(builds["02"]).info


# derive() itself, on environments laid out by hand from real wheels.

def donor_from(wheel: Path, venv: Path) -> Path:
    site = venv / "lib" / f"python{PYTHON}" / "site-packages"
    site.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    remember(venv, read_wheel(wheel))
    return venv


def test_a_donor_that_lacks_a_file_is_not_derived_from(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    (donor / "lib" / f"python{PYTHON}" / "site-packages" / "torch/ops/op3.py").unlink()
    with pytest.raises(NotDerivable, match="lacks torch/ops/op3.py"):
        derive(donor, torch_wheel(tmp_path / "w", 2), tmp_path / "new")


def test_a_wheel_with_files_outside_site_packages_is_not_derived(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    data = torch_wheel(tmp_path / "w", 2, extra={"torch-x.data/scripts/tool": "#!/bin/sh\n"})
    with pytest.raises(NotDerivable, match="outside site-packages"):
        derive(donor, data, tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_a_build_with_files_in_another_package_s_folder_is_not_derived(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    site = donor / "lib" / f"python{PYTHON}" / "site-packages"
    (site / "sympy").mkdir()
    (site / "sympy" / "__init__.py").write_text("")  # a dependency's package
    other = torch_wheel(tmp_path / "w", 2, extra={"sympy/_torch_patch.py": ""})
    with pytest.raises(NotDerivable, match="puts files in sympy"):
        derive(donor, other, tmp_path / "new")


def test_different_entry_points_are_not_derived(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    other = torch_wheel(tmp_path / "w", 2, entry_points="")
    with pytest.raises(NotDerivable, match="entry points differ"):
        derive(donor, other, tmp_path / "new")


def test_a_member_that_does_not_match_its_crc_is_not_derived(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    wheel = torch_wheel(tmp_path / "w", 2)
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("torch/lib/libtorch_cpu.so")
        header = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data = bytearray(wheel.read_bytes())
    data[header + 100] ^= 0xFF  # a flipped byte inside the deflated library
    wheel.write_bytes(bytes(data))
    with pytest.raises(NotDerivable):
        derive(donor, wheel, tmp_path / "new")


def test_a_derivation_called_off_stops(tmp_path):
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    calls = []

    class Stop(Exception):
        pass

    def check() -> None:
        calls.append(1)
        raise Stop

    with pytest.raises(Stop):
        derive(donor, torch_wheel(tmp_path / "w", 2), tmp_path / "new", check=check)
    assert calls and not (tmp_path / "new" / MEMBERS).exists()


def test_a_file_whose_record_hash_differs_is_unpacked_not_linked(tmp_path):
    """Same path, size and CRC-32 is not enough: the RECORDs' sha256 must agree too."""
    donor = donor_from(torch_wheel(tmp_path / "w", 1), tmp_path / "donor")
    listing = json.loads((donor / MEMBERS).read_text())
    listing["record"]["torch/ops/op0.py"] = "sha256=" + "A" * 43
    (donor / MEMBERS).write_text(json.dumps(listing))
    made = derive(donor, torch_wheel(tmp_path / "w", 2), tmp_path / "new")
    site = Path("lib") / f"python{PYTHON}" / "site-packages"
    new, old = tmp_path / "new" / site, donor / site
    # op1..op39, distributed/__init__.py and run.py (the dist-info is named by the version)
    assert made.linked == len(SHARED) - 1 + 2
    assert not os.path.samefile(new / "torch/ops/op0.py", old / "torch/ops/op0.py")
    assert (new / "torch/ops/op0.py").read_bytes() == (old / "torch/ops/op0.py").read_bytes()
    assert os.path.samefile(new / "torch/ops/op1.py", old / "torch/ops/op1.py")
    assert (new / "torch/__init__.py").read_text().startswith(
        "__version__ = '2.13.0.dev20260502")
    assert not (tmp_path / "new" / MARKER).exists()  # the cache writes its own marker
