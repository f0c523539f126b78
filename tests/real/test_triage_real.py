"""Triage on real torch 2.13 (CPU, Inductor through the C++ compiler): precision vs not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.jobs import cli

pytestmark = pytest.mark.real
DATA = Path(__file__).parent.parent / "data" / "triage"
TORCH = "torch==2.13.0"


@pytest.fixture(scope="module")
def torch_python(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with real torch 2.13 (CPU), numpy and setuptools, installed by pip."""
    if "real" not in str(request.config.getoption("-m")):
        pytest.skip("installs real torch: run with -m real (make test-real)")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("Inductor on CPU needs a C++ compiler (g++)")
    venv = tmp_path_factory.mktemp("torch213") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", TORCH, "numpy",
                           "setuptools"], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.skip(f"cannot install {TORCH}: {done.stderr.strip().splitlines()[-1:]}")
    return python


def triage(python: Path, name: str, tmp_path: Path, *extra: str) -> dict[str, object]:
    out = tmp_path / f"{name}.json"
    assert cli.main(["triage", str(DATA / name), "--python", str(python), "--json", str(out),
                     *extra]) == 0
    result: dict[str, object] = json.loads(out.read_text())["triage"]
    return result


def kinds(result: dict[str, object]) -> list[str]:
    findings = result["findings"]
    assert isinstance(findings, list)
    return [f["kind"] for f in findings]


def test_bf16_scan_mismatch_is_precision(torch_python: Path, tmp_path: Path) -> None:
    result = triage(torch_python, "bf16_precision_repro.py", tmp_path)
    assert result["precision"] is True
    assert kinds(result)[:2] == ["precision", "subsystem"] and result["subsystem"] == "Inductor"
    # torch 2.13's compiler_bisector agrees: Inductor's emulate_precision_casts fixes it.
    assert result["bisector"] == {"backend": "inductor",
                                  "subsystem": "inductor_emulate_precision_casts",
                                  "bisect_number": 0,
                                  "debug_info": "inductor_emulate_precision_casts"}


def test_wrong_reference_is_not_precision_nor_compiler(torch_python: Path,
                                                        tmp_path: Path) -> None:
    result = triage(torch_python, "wrong_reference_repro.py", tmp_path, "--no-bisector")
    assert result["precision"] is None and kinds(result) == ["not-compiler"]
    assert result["labels"] == []


def test_wrong_decomposition_is_named(torch_python: Path, tmp_path: Path) -> None:
    result = triage(torch_python, "wrong_decomposition_repro.py", tmp_path, "--no-bisector")
    assert result["precision"] is False
    assert result["subsystem"] == "decompositions"
    assert kinds(result) == ["not-precision", "subsystem"]
