"""The benchmark's nightly index: synthetic torch builds shaped like a real wheel, and its deps.

What an install costs depends on more than the download's size, so the synthetic builds copy
the shape of the real CPU wheel `torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl`
(measured on this project's VM with zipfile):

    kind                files   unpacked   in the wheel   ratio
    .so and binaries      213    607 MB        169 MB       3.6
    .py                 2,371     48 MB         11 MB       4.4
    .h                  9,328     37 MB          9 MB       4.3

scaled to the wanted wheel size (100 MB: about 6,300 files, 320 MB unpacked), deflated, with
Python files that compile (pip byte-compiles them) and torch's real dependencies: the wheel's
`Requires-Dist` (filelock, typing-extensions, setuptools, sympy, networkx, jinja2, fsspec),
served from the same index as PyTorch's nightly index serves them. Both the plain way and the
bot install those too.

The builds also differ from one another as real nightlies do, so that an installer which links
files it already unpacked for another build (by the sha256 in RECORD) saves what it would save
on real ones and no more. Comparing the RECORD files of real PyPI wheels (cp312, manylinux
x86_64):

    torch 2.14.0 -> 2.14.1 (a patch release)
        binaries: 75% of files the same by count, but only 5.7% of the bytes (every big .so
        differs); .h: 9,565 of 9,567 the same; .py: 2,436 of 2,438 the same
    torch 2.13.0 -> 2.14.0 (about two months apart)
        binaries: none the same; .h: 93.5% the same (8,948 of 9,567); .py: 60.6% the same
        (1,477 of 2,438)

The model, calibrated on the two-month figures taken as 60 days: every binary (libtorch_cpu.so
and the tools in torch/bin) differs in every build; each .py file changes on a given day with
probability 0.0083 and each .h file with probability 0.0011 (0.9917^60 = 0.606 and
0.9989^60 = 0.936 of them unchanged), independently, drawn from a fixed seeded generator so that the
mirror is the same on every machine. A file's content in build b is its base content plus a
marker of how many changes it has had up to day b (`# revision 3` in a .py, `// revision 3`
in a .h); a file that has not changed is its base bytes exactly, so two builds share a file
iff it did not change between them.

Deflating 64 x 320 MB of distinct binaries would take many minutes, so the wheels are written
by a small zip writer from pieces deflated once: a binary is a shared body (deflated in
chunks, each ended with a full flush, as pigz does) followed by a few KB that are this build's
own, deflated by a fresh compressor; the two raw deflate streams concatenate into one, their
CRC-32 and sha256 continue from the body's, and each revision of a small file is deflated
once. On 2 cores the 64 distinct builds of 100 MB take under 40 s, less than copying one
template into each build did (about 50 s).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import random
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bot.demo.mirror import PLATFORM, fake_git_version
from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel, metadata_text, record_line, wheel_text

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

# How often a file changes from one nightly to the next (see the docstring), and its marker.
DAILY_CHANGE = {".py": 0.0083, ".h": 0.0011}
MARKER = {".py": "# revision {}\n", ".h": "// revision {}\n"}
CHANGE_SEED = 20260101
TAIL_BYTES = 4096  # what is a binary's own in each build
LEVEL = 6  # zlib's default, as zipfile deflates
CHUNK = 4 << 20  # a binary's body is deflated in pieces of this size, on every core


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


def change_counts(paths: Sequence[str], days: int) -> dict[str, list[int]]:
    """How many changes each .py and .h file among `paths` has had by each of `days` days (none
    by day 0), drawn day by day from a fixed seed: the model of the docstring. Binaries are not
    here: they differ in every build."""
    rng = random.Random(CHANGE_SEED)
    counts = {path: [0] for path in paths if path.endswith(tuple(DAILY_CHANGE))}
    odds = [(history, DAILY_CHANGE[os.path.splitext(path)[1]]) for path, history in counts.items()]
    for _ in range(1, days):
        for history, chance in odds:
            history.append(history[-1] + (rng.random() < chance))
    return counts


def revision(path: str, base: bytes, changes: int) -> bytes:
    """The file after `changes` changes: its base bytes, and then a marker of how many."""
    if changes == 0:
        return base
    return base + MARKER[os.path.splitext(path)[1]].format(changes).encode()


@dataclass(frozen=True)
class Entry:
    """One file of a wheel, deflated: a raw deflate stream (in parts), CRC-32, size, RECORD row."""

    path: str
    parts: tuple[bytes, ...]
    crc: int
    size: int
    row: str


@dataclass(frozen=True)
class Body:
    """What the builds' copies of one binary share: its bytes deflated up to a full flush
    (byte-aligned, no final block, so another raw deflate stream may follow), their CRC-32 and
    the sha256 of them to continue from."""

    deflated: bytes
    crc: int
    sha256: hashlib._Hash
    size: int


def deflated(path: str, data: bytes) -> Entry:
    """One whole file as a raw deflate stream, as zipfile writes it."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    stream = compressor.compress(data) + compressor.flush()
    return Entry(path, (stream,), zlib.crc32(data), len(data), record_line(path, data))


def _flushed(chunk: memoryview) -> bytes:
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    return compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)


def binary_bodies(files: dict[str, bytes]) -> dict[str, Body]:
    """Each binary deflated once, in pieces of CHUNK on every core (zlib lets go of the GIL);
    each piece has a fresh compressor and ends with a full flush, so they join into one
    stream."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        pieces = {path: [pool.submit(_flushed, memoryview(data)[i:i + CHUNK])
                         for i in range(0, len(data), CHUNK)] for path, data in files.items()}
        return {path: Body(b"".join(piece.result() for piece in futures),
                           zlib.crc32(files[path]), hashlib.sha256(files[path]),
                           len(files[path]))
                for path, futures in pieces.items()}


def binary_entry(path: str, body: Body, build: str) -> Entry:
    """The shared body, then TAIL_BYTES that only this build has, by a fresh compressor."""
    tail = _binary(random.Random(f"{build} {path}"), TAIL_BYTES)
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    stream = compressor.compress(tail) + compressor.flush()
    digest = body.sha256.copy()
    digest.update(tail)
    size = body.size + len(tail)
    encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    return Entry(path, (body.deflated, stream), zlib.crc32(tail, body.crc), size,
                 f"{path},sha256={encoded},{size}")


class Payload:
    """The payload of every build: binary bodies deflated once, then each build's tails; each
    revision of a .py or .h file deflated once, when the first build that has it is written."""

    def __init__(self, wheel_mb: float, days: int) -> None:
        files = payload_files(wheel_mb)
        self.order = list(files)
        self.small = {p: d for p, d in files.items() if p.endswith(tuple(DAILY_CHANGE))}
        self.bodies = binary_bodies({p: d for p, d in files.items() if p not in self.small})
        self.changes = change_counts(self.order, days)
        self._revisions: dict[tuple[str, int], Entry] = {}

    def entries(self, build: int, name: str) -> list[Entry]:
        """The payload of build number `build` (from 0), named `name` (its version)."""
        out = []
        for path in self.order:
            if path in self.bodies:
                out.append(binary_entry(path, self.bodies[path], name))
                continue
            key = (path, self.changes[path][build])
            if key not in self._revisions:
                self._revisions[key] = deflated(path, revision(path, self.small[path], key[1]))
            out.append(self._revisions[key])
        return out


class ZipWriter:
    """The least of a zip that installers read: per entry a local header and its deflated bytes,
    then the central directory and its end record. No zip64, so below 4 GiB and 65,535 entries.
    Entries are dated 2026-01-01 as `write_entries` dates them; torch/bin is executable."""

    DATE = (2026 - 1980) << 9 | 1 << 5 | 1  # MS-DOS date; the time is 00:00:00

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.offset = 0
        self.central: list[bytes] = []

    def add(self, entry: Entry) -> None:
        name = entry.path.encode()
        packed = sum(len(part) for part in entry.parts)
        mode = 0o100755 if entry.path.startswith("torch/bin/") else 0o100644
        shared = (20, 0, 8, 0, self.DATE, entry.crc, packed, entry.size, len(name), 0)
        local = struct.pack("<I5H3I2H", 0x04034B50, *shared) + name
        self.central.append(struct.pack("<I6H3I5H2I", 0x02014B50, 3 << 8 | 20, *shared,
                                        0, 0, 0, mode << 16, self.offset) + name)
        self.stream.write(local)
        for part in entry.parts:
            self.stream.write(part)
        self.offset += len(local) + packed

    def close(self) -> None:
        directory = b"".join(self.central)
        count = len(self.central)
        if self.offset + len(directory) >= 1 << 32 or count > 0xFFFF:
            raise ValueError("this wheel would need zip64, which ZipWriter does not write")
        self.stream.write(directory + struct.pack("<I4H2IH", 0x06054B50, 0, 0, count, count,
                                                  len(directory), self.offset, 0))


def torch_wheel(folder: Path, payload: Iterable[Entry], version: str, date: dt.date,
                tag: str) -> Path:
    """One build: its payload, its package and its dist-info, RECORD last."""
    target = folder / f"torch-{version}-{tag}-{tag}-{PLATFORM}.whl"
    dist_info = f"torch-{version}.dist-info"
    files = {path: text.encode() for path, text in
             package_files(version, fake_git_version(date), None).items()}
    files[f"{dist_info}/METADATA"] = metadata_text("torch", version, TORCH_REQUIRES).encode()
    files[f"{dist_info}/WHEEL"] = wheel_text(f"{tag}-{tag}-{PLATFORM}").encode()
    entries = [*payload, *(deflated(path, data) for path, data in files.items())]
    rows = [entry.row for entry in entries] + [f"{dist_info}/RECORD,,"]
    record = deflated(f"{dist_info}/RECORD", ("\n".join(rows) + "\n").encode())
    with open(target, "wb") as stream:
        writer = ZipWriter(stream)
        for entry in [*entries, record]:
            writer.add(entry)
        writer.close()
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
    payload = Payload(wheel_mb, days)
    versions = []
    for offset in range(days):
        date = start + dt.timedelta(days=offset)
        version = f"2.13.0.dev{date:%Y%m%d}+cpu"
        torch_wheel(folder, payload.entries(offset, version), version, date, python_tag)
        versions.append(version)
    if real_deps:
        python = f"{python_tag[2]}.{python_tag[3:]}"
        real_dependencies(folder, python, deps_from)
    else:
        synthetic_dependencies(folder)
    return versions
