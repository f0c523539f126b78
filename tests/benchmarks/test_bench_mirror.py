"""The benchmark's builds differ from one another as real nightlies do, and are valid wheels."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from itertools import pairwise
from pathlib import Path

import pytest

from benchmarks.bench_mirror import build_bench_mirror, change_counts

BUILDS = 8
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The torch wheels of a mirror the size of `bisect_speed --tiny`, oldest first."""
    root = tmp_path_factory.mktemp("bench-mirror")
    versions = build_bench_mirror(root, start=dt.date(2026, 1, 1), days=BUILDS, wheel_mb=1,
                                  python_tag=TAG, real_deps=False)
    found = sorted((root / "cpu").glob("torch-*.whl"))
    assert [w.name.split("-")[1] for w in found] == versions
    return found


def record(wheel: Path) -> dict[str, tuple[str, int]]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [line.split(",") for line in archive.read(name).decode().splitlines()]
    return {path: (digest, int(size)) for path, digest, size in rows if digest}


def payload(rows: dict[str, tuple[str, int]], kind: str) -> list[str]:
    if kind == "binary":
        return [p for p in rows if p.startswith("torch/bin/") or p.endswith(".so")]
    return [p for p in rows if p.startswith(("torch/_generated/", "torch/include/"))
            and p.endswith(kind)]


def same(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]], paths: list[str]) -> float:
    return sum(a[p] == b[p] for p in paths) / len(paths)


def test_binaries_differ_in_every_build_and_sources_drift_slowly(wheels: list[Path]) -> None:
    records = [record(w) for w in wheels]
    first, last = records[0], records[-1]
    binaries, py, headers = (payload(first, kind) for kind in ("binary", ".py", ".h"))
    assert "torch/lib/libtorch_cpu.so" in binaries and py and headers
    for older, newer in pairwise(records):
        assert [p for p in binaries if older[p][0] == newer[p][0]] == []
        assert same(older, newer, py) >= 0.75
        assert same(older, newer, headers) >= 0.9
    assert same(first, last, py) < 1  # some .py files changed over the week


def test_the_daily_change_rates_give_the_measured_two_month_figures() -> None:
    """After 60 days, 60.6% of the .py and 93.5% of the .h files of the real wheels were the
    same; the model draws each file's changes from a fixed seed, so it is also reproducible."""
    paths = [f"m{i}.py" for i in range(5000)] + [f"h{i}.h" for i in range(5000)]
    counts = change_counts(paths, 61)
    assert counts == change_counts(paths, 61)
    assert change_counts(paths, 10) == {p: c[:10] for p, c in counts.items()}
    for suffix, measured in ((".py", 0.606), (".h", 0.935)):
        kept = [c[60] == 0 for p, c in counts.items() if p.endswith(suffix)]
        assert abs(sum(kept) / len(kept) - measured) < 0.025


def test_every_wheel_is_a_valid_zip_matching_its_record(wheels: list[Path]) -> None:
    for wheel in wheels:
        rows = record(wheel)
        with zipfile.ZipFile(wheel) as archive:
            assert archive.testzip() is None
            names = set(archive.namelist())
            assert set(rows) | {next(n for n in names if n.endswith("RECORD"))} == names
            for path in ("torch/lib/libtorch_cpu.so", payload(rows, ".py")[-1]):
                data = archive.read(path)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                assert rows[path] == ("sha256=" + digest.decode(), len(data))


def test_the_mirror_is_reproducible(wheels: list[Path], tmp_path: Path) -> None:
    build_bench_mirror(tmp_path, start=dt.date(2026, 1, 1), days=2, wheel_mb=1,
                       python_tag=TAG, real_deps=False)
    for again in sorted((tmp_path / "cpu").glob("torch-*.whl")):
        assert again.read_bytes() == (wheels[0].parent / again.name).read_bytes()


def test_a_build_installs_with_uv_and_imports(wheels: list[Path], tmp_path: Path) -> None:
    uv = Path(sys.executable).parent / "uv"
    command = str(uv) if uv.exists() else shutil.which("uv")
    assert command, "uv is not installed: pip install uv"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    venv = tmp_path / "venv"
    subprocess.run([command, "venv", "-q", "--python", sys.executable, str(venv)], env=env,
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([command, "pip", "install", "-q", "--no-deps", "--python", str(python),
                    str(wheels[3])], env=env, check=True)
    done = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == wheels[3].name.split("-")[1]
