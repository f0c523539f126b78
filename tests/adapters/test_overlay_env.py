"""Overlay environments on real files: hard links kept, originals untouched, bytecode dropped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.adapters.environments import MARKER, Environment, ProvisionError
from bot.adapters.overlay_env import (
    OverlayProvisioner,
    apply_overlay,
    hardlink_copy,
    overlay_scratch,
)
from bot.core.builds import Build, WheelLink
from bot.core.overlay import Candidate, Commit, FileChange

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


class FakeSource:
    """Commit contents from a dict; records what was asked."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.asked: list[tuple[str, ...]] = []

    def read_files(self, old: str, new: str, paths: Sequence[str]) -> dict[str, bytes]:
        self.asked.append(tuple(paths))
        return {path: self.files[path] for path in paths}


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    """A real venv with a tiny `torch` package and its compiled bytecode."""
    path = tmp_path_factory.mktemp("base") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = path / "lib" / PY / "site-packages"
    files = {"torch/__init__.py": "from torch.mod import VALUE\n",
             "torch/mod.py": "VALUE = 'good'\n", "torch/gone.py": "X = 1\n",
             "torch/_C.so": "\x7fELF not really\n", "torch/version.py": "git_version = 'n1'\n",
             "torch/pkg/__init__.py": "", "torch/pkg/deep/__init__.py": "",
             "torch/pkg/deep/sub.py": "Y = 2\n"}
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    subprocess.run([str(path / "bin" / "python"), "-m", "compileall", "-q", str(site / "torch")],
                   check=True, env={"PATH": "/usr/bin:/bin"})
    (path / MARKER).write_text(json.dumps({"torch": "2.13.0.dev20260520+cpu"}))
    return Environment(path, path / "bin" / "python", {"torch": "2.13.0.dev20260520+cpu",
                                                       "git_version": "n1"})


def _site(env: Path) -> Path:
    return env / "lib" / PY / "site-packages"


def test_hardlink_copy_links_files_and_keeps_symlinks(base_env: Environment,
                                                      tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    count = hardlink_copy(base_env.path, copy)
    original, linked = _site(base_env.path) / "torch/mod.py", _site(copy) / "torch/mod.py"
    assert original.stat().st_ino == linked.stat().st_ino
    assert (copy / "bin" / "python").is_symlink()
    assert count == sum(1 for p in base_env.path.rglob("*") if p.is_file() and not p.is_symlink())


def test_overlay_writes_new_inodes_and_never_touches_the_original(base_env: Environment,
                                                                   tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    hardlink_copy(base_env.path, copy)
    site, base_site = _site(copy), _site(base_env.path)
    links = (base_site / "torch/mod.py").stat().st_nlink
    assert list((site / "torch/__pycache__").glob("mod.*.pyc"))
    changes = (FileChange("M", "torch/mod.py"), FileChange("A", "torch/_dynamo/new.py"),
               FileChange("D", "torch/gone.py"), FileChange("M", "aten/x.cpp"),
               FileChange("A", "test/test_x.py"))
    contents = {"torch/mod.py": b"VALUE = 'bad'\n", "torch/_dynamo/new.py": b"NEW = 1\n"}
    assert apply_overlay(site, changes, contents) == 3
    assert (site / "torch/mod.py").read_bytes() == b"VALUE = 'bad'\n"
    assert (base_site / "torch/mod.py").read_bytes() == b"VALUE = 'good'\n"
    assert (site / "torch/mod.py").stat().st_ino != (base_site / "torch/mod.py").stat().st_ino
    assert (base_site / "torch/mod.py").stat().st_nlink == links - 1  # the copy's link: replaced
    assert not (site / "torch/gone.py").exists() and (base_site / "torch/gone.py").exists()
    assert not list((site / "torch/__pycache__").glob("mod.*.pyc"))  # stale bytecode dropped
    assert not list((site / "torch/__pycache__").glob("gone.*.pyc"))
    assert list((base_site / "torch/__pycache__").glob("mod.*.pyc"))
    assert (site / "torch/_dynamo/new.py").read_bytes() == b"NEW = 1\n"
    assert not (site / "aten").exists() and not (site / "test").exists()
    unchanged = (site / "torch/version.py").stat()
    assert unchanged.st_ino == (base_site / "torch/version.py").stat().st_ino


def test_a_deleted_package_does_not_import_as_a_namespace_package(base_env: Environment,
                                                                   tmp_path: Path) -> None:
    """A commit that deletes a whole package: its folders go too. Left empty (or holding only
    `__pycache__`), `import torch.pkg` succeeded as a namespace package (PEP 420) on the
    overlay, where it fails on a build of that commit."""
    copy = tmp_path / "copy"
    hardlink_copy(base_env.path, copy)
    site = _site(copy)
    deleted = (FileChange("D", "torch/pkg/__init__.py"), FileChange("D", "torch/pkg/deep/__init__.py"),
               FileChange("D", "torch/pkg/deep/sub.py"))
    assert apply_overlay(site, deleted, {}) == 3
    assert not (site / "torch/pkg").exists() and (site / "torch/__pycache__").is_dir()
    assert (_site(base_env.path) / "torch/pkg/deep/sub.py").exists()
    done = subprocess.run([str(copy / "bin" / "python"), "-c", "import torch.pkg"],
                          capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"})
    assert "No module named 'torch.pkg'" in done.stderr


def _candidate(sha: str, changes: tuple[FileChange, ...], testable: bool = True) -> Candidate:
    return Candidate(Commit(sha, "subject (#1)"), testable, "why", changes)


def _build(version: str) -> Build:
    return Build(version, None, "cpu", WheelLink("torch.whl", "http://x"))


def test_provisioner_makes_a_working_environment_once(base_env: Environment,
                                                      tmp_path: Path) -> None:
    source = FakeSource({"torch/mod.py": b"VALUE = 'bad'\n"})
    candidate = _candidate("c" * 40, (FileChange("M", "torch/mod.py"),))
    label = "2.13.0.dev20260520+cpu@cccccccccccc"
    provisioner = OverlayProvisioner(base_env, "2.13.0.dev20260520+cpu", "b" * 40, source,
                                     tmp_path, {label: candidate}, check_import=False)
    env = provisioner.provision(_build(label))
    done = subprocess.run([str(env.python), "-c", "import torch; print(torch.VALUE)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "bad"
    assert env.info["overlay_commit"] == "c" * 40 and env.info["overlay_files"] == 1
    assert json.loads((env.path / MARKER).read_text())["overlay_of"] == "2.13.0.dev20260520+cpu"
    again = provisioner.provision(_build(label))
    assert again.path == env.path and len(source.asked) == 1  # cached: made once
    assert [p.name for p in (tmp_path / "overlays").iterdir() if p.is_dir()] == [env.path.name]


def test_provisioner_refuses_untestable_and_unknown_builds(base_env: Environment,
                                                           tmp_path: Path) -> None:
    untestable = _candidate("d" * 40, (), testable=False)
    provisioner = OverlayProvisioner(base_env, "v", "b" * 40, FakeSource({}), tmp_path,
                                     {"v@dddddddddddd": untestable}, check_import=False)
    with pytest.raises(ProvisionError):
        provisioner.provision(_build("v@dddddddddddd"))
    with pytest.raises(ProvisionError):
        provisioner.provision(_build("v@unknown"))


def test_a_source_failure_is_a_provision_error_and_leaves_nothing(base_env: Environment,
                                                                   tmp_path: Path) -> None:
    candidate = _candidate("e" * 40, (FileChange("M", "torch/missing.py"),))
    provisioner = OverlayProvisioner(base_env, "v", "b" * 40, FakeSource({}), tmp_path,
                                     {"v@eeeeeeeeeeee": candidate}, check_import=False)
    with pytest.raises(ProvisionError, match="files failed"):
        provisioner.provision(_build("v@eeeeeeeeeeee"))
    assert not [p for p in (tmp_path / "overlays").iterdir() if p.is_dir()]


def test_overlays_of_one_nightly_made_for_two_environments_are_two(base_env: Environment,
                                                                    tmp_path: Path) -> None:
    """The same nightly installed for another Python or with other packages is another base
    environment: an overlay made from one must not stand for the other."""
    other_path = tmp_path / "other-base"
    hardlink_copy(base_env.path, other_path)
    other = Environment(other_path, other_path / "bin" / "python", dict(base_env.info))
    label = "2.13.0.dev20260520+cpu@cccccccccccc"
    candidate = _candidate("c" * 40, (FileChange("M", "torch/mod.py"),))
    made = []
    for base in (base_env, other):
        provisioner = OverlayProvisioner(base, "2.13.0.dev20260520+cpu", "b" * 40,
                                         FakeSource({"torch/mod.py": b"VALUE = 'bad'\n"}),
                                         tmp_path, {label: candidate}, check_import=False)
        made.append(provisioner.provision(_build(label)))
    assert made[0].path != made[1].path
    assert (made[1].path / "lib").resolve() != (made[0].path / "lib").resolve()


def test_a_file_that_cannot_be_written_is_a_provision_error(base_env: Environment,
                                                            tmp_path: Path) -> None:
    """A commit that turns a module into a package writes under a path that is a file in the
    base: the OSError is the candidate's SKIP reason, not a traceback that ends the bisection."""
    candidate = _candidate("f" * 40, (FileChange("A", "torch/mod.py/__init__.py"),))
    provisioner = OverlayProvisioner(base_env, "v", "b" * 40,
                                     FakeSource({"torch/mod.py/__init__.py": b"X = 1\n"}),
                                     tmp_path, {"v@ffffffffffff": candidate}, check_import=False)
    with pytest.raises(ProvisionError, match="could not be written"):
        provisioner.provision(_build("v@ffffffffffff"))
    assert not [p for p in (tmp_path / "overlays").iterdir() if p.is_dir()]


def test_a_base_on_another_filesystem_is_said_up_front(base_env: Environment,
                                                       tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.fail("this test needs /dev/shm on a filesystem of its own")
    provisioner = OverlayProvisioner(base_env, "v", "b" * 40, FakeSource({}), tmp_path, {},
                                     check_import=False)
    assert provisioner.unusable() is None
    elsewhere = OverlayProvisioner(base_env, "v", "b" * 40, FakeSource({}),
                                   Path(tempfile.mkdtemp(dir=shm)), {}, check_import=False)
    try:
        assert "on another filesystem" in str(elsewhere.unusable())
    finally:
        shutil.rmtree(elsewhere.root)


def test_a_tiers_overlays_go_with_it_and_a_killed_tiers_with_the_next(tmp_path: Path) -> None:
    """Overlays are hard links of the base: kept, they would hold its files on disk after the
    cache evicts it, outside the budget. A running tier's folder (its lock held) stays."""
    overlays = tmp_path / "overlays"
    overlays.mkdir()
    killed = overlays / "tbb-run-dead"
    (killed / "tbb-v@aaaaaaaaaaaa").mkdir(parents=True)
    (overlays / "tbb-run-dead.lock").touch()  # nobody holds it
    with overlay_scratch(tmp_path) as running:
        (running / "x").mkdir()
        assert running.parent == overlays and not killed.exists()
        with overlay_scratch(tmp_path) as other:  # another tier: leaves the running one be
            assert other != running and (running / "x").is_dir()
        assert not other.exists() and (running / "x").is_dir()
    assert list(overlays.iterdir()) == []
