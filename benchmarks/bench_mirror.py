"""The benchmark's nightly index: synthetic torch builds shaped like a real wheel, and its deps.

What an install costs depends on more than the download's size, so the synthetic builds copy
the shape of the real CPU wheel `torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl`
(measured on this project's VM with zipfile):

    kind                files   unpacked   in the wheel   ratio
    .so and binaries      213    607 MB        169 MB       3.6
    .py                 2,371     48 MB         11 MB       4.4
    .h                  9,328     37 MB          9 MB       4.3

scaled to the wanted wheel size (100 MB: about 6,100 files, 320 MB unpacked), deflated, with
Python files that compile (pip byte-compiles them) and torch's real dependencies: the wheel's
`Requires-Dist` (filelock, typing-extensions, setuptools, sympy, networkx, jinja2, fsspec),
served from the same index as PyTorch's nightly index serves them. Both the plain way and the
bot install those too.

The payload is made once per size and spliced into every build (zip append), so a mirror of
64 builds takes seconds after the first. Each build is still its own file: no tool here
shares unpacked content between wheels, so identical payloads cost as much as distinct ones.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from bot.demo.mirror import PLATFORM, fake_git_version
from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel, metadata_text, record_line, wheel_text, write_entries

# Requires-Dist of torch 2.13.0+cpu, without its extras.
TORCH_REQUIRES = ("filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3",
                  "sympy>=1.13.3", "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5")
# What those resolve to (with sympy's mpmath and jinja2's markupsafe), pinned so that every run
# of the benchmark installs the same bytes.
DEPENDENCIES = ("filelock==4.3.1", "typing-extensions==4.16.0", "setuptools==84.2.1",
                "sympy==1.14.0", "mpmath==1.3.0", "networkx==3.6.1", "jinja2==3.1.6",
                "markupsafe==3.0.4", "fsspec==2026.9.0")
SYNTHETIC_REQUIRES = {"sympy": ("mpmath",), "jinja2": ("markupsafe",)}
SHAPE = {"binary": (213, 607.0, 169.0), "py": (2371, 48.0, 11.0), "h": (9328, 37.0, 9.0)}
REAL_WHEEL_MB = sum(packed for _, _, packed in SHAPE.values())


def _binary(rng: random.Random, size: int) -> bytes:
    """Bytes that deflate about as well as machine code (3.6x): a skewed alphabet, and a
    share of 512-byte blocks that repeat earlier ones, as code and tables do."""
    weights = [(0x00, 150), (0x48, 40), (0x8B, 24), (0xFF, 16), (0x89, 10), (0x0F, 8),
               (0xE8, 4), (0x24, 4)]
    table = bytes(symbol for symbol, count in weights for _ in range(count))
    fresh = rng.randbytes(size).translate(table)
    pool = [fresh[i * 512:(i + 1) * 512] for i in range(64)]
    pieces, used, total = [], 0, 0
    while total < size:
        if rng.random() < 0.42:
            piece = pool[rng.randrange(len(pool))]
        else:
            piece, used = fresh[used:used + 512], used + 512
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)[:size]


def _python(rng: random.Random, size: int) -> bytes:
    out: list[str] = [f'"""Generated module {rng.randrange(1 << 30)}."""\n\n']
    total = 0
    while total < size:
        name, a, b = rng.randrange(1 << 24), rng.randrange(1000), rng.randrange(1000)
        text = (f"def op_{name:x}(x, y={a}):\n    z = x * {b} + y\n"
                f"    if z > {a * b}:\n        return [z, x, y][{name % 3}]\n"
                f"    return z - {a}\n\n\n")
        out.append(text)
        total += len(text)
    return "".join(out).encode()


def _header(rng: random.Random, size: int) -> bytes:
    out = ["#pragma once\n#include <cstdint>\n\nnamespace at {\n"]
    total = 0
    while total < size:
        name = rng.randrange(1 << 24)
        text = (f"constexpr int64_t kOp{name:x} = {rng.randrange(1 << 20)};\n"
                f"inline int64_t op_{name:x}(int64_t x) {{ return x * kOp{name:x}; }}\n")
        out.append(text)
        total += len(text)
    out.append("}  // namespace at\n")
    return "".join(out).encode()


def payload_files(wheel_mb: float, seed: int = 0) -> dict[str, bytes]:
    """The payload of one synthetic build of about `wheel_mb` MB, shaped like the real wheel."""
    scale = wheel_mb / REAL_WHEEL_MB
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    count, unpacked, _ = SHAPE["binary"]
    big = int(unpacked * 1e6 * scale * 0.75)  # libtorch_cpu.so is most of it
    files["torch/lib/libtorch_cpu.so"] = _binary(rng, big)
    rest = max(1, round(count * scale))
    for i in range(rest):
        files[f"torch/bin/tool_{i}"] = _binary(rng, int(unpacked * 1e6 * scale * 0.25 / rest))
    count, unpacked, _ = SHAPE["py"]
    n = max(1, round(count * scale))
    each = int(unpacked * 1e6 / count)
    for i in range(n):
        files[f"torch/_generated/pkg{i // 40}/mod{i}.py"] = _python(rng, each)
    count, unpacked, _ = SHAPE["h"]
    n = max(1, round(count * scale))
    each = int(unpacked * 1e6 / count)
    for i in range(n):
        files[f"torch/include/ATen/gen{i // 200}/op{i}.h"] = _header(rng, each)
    return files


def payload_template(folder: Path, wheel_mb: float) -> tuple[Path, list[str]]:
    """A zip holding only the payload, and its RECORD lines; made once per size."""
    zipped = folder / f"payload-{wheel_mb:g}MB.zip"
    record = folder / f"payload-{wheel_mb:g}MB.record.json"
    if not (zipped.exists() and record.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        files = payload_files(wheel_mb)
        partial = zipped.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            write_entries(archive, files)
        record.write_text(json.dumps([record_line(p, d) for p, d in files.items()]))
        partial.replace(zipped)
    return zipped, json.loads(record.read_text())


def torch_wheel(folder: Path, template: Path, record: list[str], version: str,
                date: dt.date, tag: str) -> Path:
    """One build: the payload template, with this version's package and dist-info appended."""
    target = folder / f"torch-{version}-{tag}-{tag}-{PLATFORM}.whl"
    shutil.copyfile(template, target)
    dist_info = f"torch-{version}.dist-info"
    files = {path: text.encode() for path, text in
             package_files(version, fake_git_version(date), None).items()}
    files[f"{dist_info}/METADATA"] = metadata_text("torch", version, TORCH_REQUIRES).encode()
    files[f"{dist_info}/WHEEL"] = wheel_text(f"{tag}-{tag}-{PLATFORM}").encode()
    lines = record + [record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(target, "a", zipfile.ZIP_DEFLATED) as archive:
        write_entries(archive, files)
    return target


def real_dependencies(folder: Path, python: str, source: Path | None = None) -> None:
    """The pinned dependency wheels from PyPI (the machine's package registry), once; or
    copied from `source`, a folder made beforehand with `pip download` (a machine without
    network)."""
    if source is not None:
        for wheel in source.glob("*.whl"):
            shutil.copy2(wheel, folder / wheel.name)
    if all(any(folder.glob(f"{pin.split('==')[0].replace('-', '_')}-*.whl"))
           or any(folder.glob(f"{pin.split('==')[0]}-*.whl")) for pin in DEPENDENCIES):
        return
    command = [_python_with_pip(), "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
               ":all:", "--python-version", python, "--platform", PLATFORM,
               "--platform", "manylinux2014_x86_64", "--dest", str(folder), *DEPENDENCIES]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env=pip_environment())
    if done.returncode != 0:
        raise SystemExit(f"cannot download torch's dependencies for the benchmark "
                         f"(pip download {' '.join(DEPENDENCIES)}):\n{done.stderr[-2000:]}")


def pip_environment(**extra: str) -> dict[str, str]:
    """This environment without pip's settings (a find-links folder, extra indexes), keeping
    where the machine's certificates are."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    return {**env, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1", **extra}


def _python_with_pip() -> str:
    """An interpreter that has pip: ours (a uv venv has none), the Makefile's .tools, python3."""
    tools = Path(__file__).resolve().parent.parent / ".tools" / "bin" / "python"
    for python in (sys.executable, str(tools), shutil.which("python3") or "python3"):
        check = subprocess.run([python, "-m", "pip", "--version"], capture_output=True,
                               check=False)
        if check.returncode == 0:
            return python
    raise SystemExit("the benchmark needs pip (in python3) to fetch torch's dependencies once")


def synthetic_dependencies(folder: Path) -> None:
    """Small stand-ins with the same names and versions, for the smoke test (no network)."""
    for pin in DEPENDENCIES:
        name, version = pin.split("==")
        module = name.replace("-", "_")
        requires = SYNTHETIC_REQUIRES.get(name, ())
        build_wheel(folder, module, version, {f"{module}/__init__.py": f"VERSION = {version!r}\n"},
                    requires=requires)


def build_bench_mirror(root: Path, *, start: dt.date, days: int, wheel_mb: float,
                       python_tag: str, real_deps: bool, deps_from: Path | None = None
                       ) -> list[str]:
    """The whole index under `root/cpu/`; returns the versions, oldest first."""
    folder = root / "cpu"
    folder.mkdir(parents=True, exist_ok=True)
    template, record = payload_template(root.parent / "payloads", wheel_mb)
    versions = []
    for offset in range(days):
        date = start + dt.timedelta(days=offset)
        version = f"2.13.0.dev{date:%Y%m%d}+cpu"
        torch_wheel(folder, template, record, version, date, python_tag)
        versions.append(version)
    if real_deps:
        python = f"{python_tag[2]}.{python_tag[3:]}"
        real_dependencies(folder, python, deps_from)
    else:
        synthetic_dependencies(folder)
    return versions
