"""The shared file store: builds link the files they have in common, and nothing else."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.adapters.environments import EnvironmentCache, ProvisionError, _find_uv
from bot.adapters.shared_files import BadWheel, FileStore, _requires
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, select_builds
from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel, record_line, wheel_text, write_entries
from tests.fakes.mirror import IndexServer

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
PLATFORM_TAG = f"{TAG}-{TAG}-manylinux_2_28_x86_64"


def _site(env_path: Path) -> Path:
    return next(env_path.glob("lib/python*/site-packages"))


def _builds(server: IndexServer):
    links = WheelIndex(server.variant_url("cpu")).project_links("torch")
    return select_builds(links, Selection(TAG, variant="cpu"))


def _torch(folder: Path, version: str, files: dict[str, str], **kwargs) -> Path:
    """A synthetic torch build (the demo's package) with `files` added."""
    package = package_files(version, "0" * 40, None)
    return build_wheel(folder, "torch", version, {**package, **files}, tag=PLATFORM_TAG,
                       **kwargs)


def test_builds_share_the_files_they_have_in_common(tmp_path) -> None:
    shared = "def add(a, b):\n    return a + b\n"
    for day in ("20260520", "20260521"):
        _torch(tmp_path / "index" / "cpu", f"2.13.0.dev{day}+cpu",
               {"torch/common.py": shared, "torch/only.py": f"DAY = {day!r}\n"})
    with IndexServer(tmp_path / "index") as server:
        builds = _builds(server)
        cache = EnvironmentCache(tmp_path / "cache", python=PYTHON, extra_packages=())
        first, second = (cache.provision(b) for b in builds)
    assert (first.info["torch"], second.info["torch"]) == (builds[0].version, builds[1].version)
    one, two = _site(first.path), _site(second.path)
    # The same bytes are one file on disk; different bytes are not.
    assert (one / "torch/common.py").stat().st_ino == (two / "torch/common.py").stat().st_ino
    assert (one / "torch/only.py").stat().st_ino != (two / "torch/only.py").stat().st_ino
    assert (two / "torch/only.py").read_text() == "DAY = '20260521'\n"
    assert (two / "torch-2.13.0.dev20260521+cpu.dist-info/INSTALLER").exists()


def test_an_evicted_build_leaves_nothing_in_the_store(tmp_path, index_server) -> None:
    builds = _builds(index_server)
    cache = EnvironmentCache(tmp_path, python=PYTHON, extra_packages=(), budget_bytes=1)
    cache.provision(builds[6])
    kept = cache.provision(builds[7])  # evicts the first (a budget of one byte)
    live = {p.stat().st_ino for p in kept.path.rglob("*") if p.is_file()}
    stored = [p for p in (tmp_path / "files").rglob("*") if p.is_file()]
    assert stored and {p.stat().st_ino for p in stored} <= live
    assert cache.provision(builds[6]).info["torch"] == builds[6].version  # unpacked again


def _raw_wheel(path: Path, files: dict[str, bytes], record: list[str]) -> Path:
    dist_info = "torch-2.13.0.dist-info"
    files = {**files, f"{dist_info}/METADATA": b"Metadata-Version: 2.1\nName: torch\n"
             b"Version: 2.13.0\n\n", f"{dist_info}/WHEEL": wheel_text(PLATFORM_TAG).encode()}
    rows = [*record, *(record_line(p, d) for p, d in files.items() if "dist-info" in p)]
    files[f"{dist_info}/RECORD"] = ("\n".join([*rows, f"{dist_info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        write_entries(archive, files)
    return path


def test_bytes_that_do_not_match_the_record_are_refused(tmp_path) -> None:
    lie = record_line("torch/__init__.py", b"what RECORD promises\n")
    wheel = _raw_wheel(tmp_path / "torch.whl", {"torch/__init__.py": b"something else\n"}, [lie])
    store = FileStore(tmp_path / "files")
    with pytest.raises(BadWheel, match="do not match"):
        store.install(wheel, tmp_path / "site", tmp_path / "bin")
    stored = [p.read_bytes() for p in store.root.rglob("*") if p.is_file()]
    assert stored and b"something else\n" not in stored  # the honest files were kept
    assert not (tmp_path / "site" / "torch" / "__init__.py").exists()


def test_a_path_outside_the_environment_is_refused(tmp_path) -> None:
    data = b"print('owned')\n"
    wheel = _raw_wheel(tmp_path / "torch.whl", {"../evil.py": data},
                       [record_line("../evil.py", data)])
    with pytest.raises(BadWheel, match="outside"):
        FileStore(tmp_path / "files").install(wheel, tmp_path / "env" / "site", tmp_path / "bin")
    assert not (tmp_path / "env" / "evil.py").exists()


def test_console_scripts_work_after_the_environment_moves(tmp_path) -> None:
    wheel = _torch(tmp_path / "wheels", "2.13.0", {
        "torch/cli.py": "def main():\n    print('torchrun here')\n",
        "torch-2.13.0.dist-info/entry_points.txt": "[console_scripts]\ntorchrun = torch.cli:main\n",
    })
    venv = tmp_path / "venv"
    subprocess.run([_find_uv(), "venv", "-q", "--relocatable", "--python", PYTHON, str(venv)],
                   check=True)
    FileStore(tmp_path / "files").install(wheel, _site(venv), venv / "bin")
    moved = venv.rename(tmp_path / "moved")
    done = subprocess.run([str(moved / "bin" / "torchrun")], capture_output=True, text=True,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "torchrun here\n"), done.stderr


def test_requirements_for_extras_are_left_out() -> None:
    metadata = ("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n"
                "Requires-Dist: filelock\n"
                'Requires-Dist: sympy>=1.13.3; python_version >= "3.9"\n'
                'Requires-Dist: optree>=0.13.0; extra == "optree"\n'
                "\nRequires-Dist: in the description, not a requirement\n")
    assert _requires(metadata) == ("filelock", 'sympy>=1.13.3; python_version >= "3.9"')


def test_a_wheel_with_a_data_directory_goes_to_uv_whole(tmp_path) -> None:
    """The store leaves .data wheels to uv; evicting one drops uv's copy of it."""
    for day in ("20260520", "20260521"):
        _torch(tmp_path / "index" / "cpu", f"2.13.0.dev{day}+cpu",
               {f"torch-2.13.0.dev{day}+cpu.data/purelib/torch_extra.py": "X = 1\n"})
    with IndexServer(tmp_path / "index") as server:
        builds = _builds(server)
        cache = EnvironmentCache(tmp_path / "cache", python=PYTHON, extra_packages=(),
                                 budget_bytes=1)
        first = cache.provision(builds[0])
        assert (_site(first.path) / "torch_extra.py").read_text() == "X = 1\n"
        assert not (tmp_path / "cache" / "files").exists()  # uv made it, not the store
        kept = cache.provision(builds[1])  # evicts the first
    archives = list((tmp_path / "cache" / "uv-cache").glob("archive-v*/*/torch/__init__.py"))
    live = _site(kept.path) / "torch" / "__init__.py"
    assert [a.stat().st_ino for a in archives] == [live.stat().st_ino]


def test_a_damaged_wheel_is_a_provision_error(tmp_path) -> None:
    folder = tmp_path / "index" / "cpu"
    wheel = _torch(folder, "2.13.0.dev20260521+cpu", {"torch/big.py": "A = 1\n" * 5000})
    data = bytearray(wheel.read_bytes())
    data[200:260] = bytes(60)  # inside the first entry's deflated bytes
    wheel.write_bytes(bytes(data))
    with IndexServer(tmp_path / "index") as server:
        builds = _builds(server)
        cache = EnvironmentCache(tmp_path / "cache", python=PYTHON, extra_packages=())
        with pytest.raises(ProvisionError, match="damaged"):
            cache.provision(builds[0])
    assert cache.lookup(builds[0]) is None
