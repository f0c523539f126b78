"""Unpack a torch wheel into an environment, linking the files an earlier build already has.

Most of what installing a torch wheel costs is not its big libraries but its ~12,000 small
files (headers and Python): in the speed benchmark uv unpacked a build's 114 binaries (321 MB)
in 0.54 s and its 6,200 small files (46 MB) in 0.9-1.3 s, nearly all of it system time for
making files, while hard-linking all 6,300 files of a build it had unpacked before took 0.11 s.
And nightlies share nearly all their small files: torch 2.14.0 and 2.14.1 (PyPI, cp312) have
9,565 of 9,567 headers and 2,436 of 2,438 .py files the same, 2.13.0 and 2.14.0, about two
months apart, 93.5% and 60.6% (their RECORDs compared). Only the libraries differ every time.

So each file is kept once under `root/<sha256>` (the hash the wheel's RECORD gives it, checked
against the bytes when it is first unpacked) and hard-linked into every environment that has
it; a file only a new build has is unpacked once. A file no environment links any more (link
count 1) is garbage: `collect` removes it when environments are evicted.

Only plain wheels take this path: one with a `.data` directory, a symbolic link or a file
RECORD gives no sha256 raises Unsupported, and the caller installs it with uv as before.
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import hashlib
import os
import stat
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement

CHUNK = 1 << 20
# A console script of a relocatable environment: sh finds the environment's python beside
# the script wherever the environment was moved (the form `uv venv --relocatable` writes).
SCRIPT = """#!/bin/sh
'''exec' "$(dirname -- "$(realpath -- "$0")")"/'python' "$0" "$@"
' '''
import sys
from {module} import {head}
if __name__ == "__main__":
    sys.exit({call}())
"""


class Unsupported(Exception):
    """A wheel this unpacker does not handle; install it the ordinary way."""


class BadWheel(Exception):
    """A wheel whose contents contradict its RECORD, or that would write outside its place."""


@dataclass(frozen=True)
class Unpacked:
    """What one install did: files linked from the store, files unpacked into it, and the
    wheel's runtime requirements (extras left out) for uv to install beside it."""

    linked: int
    unpacked: int
    requires: tuple[str, ...]


@dataclass
class FileStore:
    """Files of unpacked wheels by content, shared through hard links."""

    root: Path
    threads: int = 4

    def install(self, wheel: Path, site_packages: Path, bin_dir: Path,
                cancel: threading.Event | None = None) -> Unpacked:
        """Put the wheel's files under `site_packages` and its console scripts in `bin_dir`."""
        with zipfile.ZipFile(wheel) as archive:
            entries = [i for i in archive.infolist() if not i.is_dir()]
            dist_info = _dist_info(entries)
            hashes = _record_hashes(archive.read(f"{dist_info}/RECORD").decode())
            for info in entries:
                _check(info, hashes, dist_info)
            self.root.mkdir(parents=True, exist_ok=True)
            made: set[Path] = set()
            linked = unpacked = 0
            fresh: list[tuple[zipfile.ZipInfo, Path]] = []
            for info in entries:
                _stop_if(cancel)
                target = site_packages / info.filename
                if target.parent not in made:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    made.add(target.parent)
                if info.filename not in hashes:  # RECORD itself: written as it is
                    target.write_bytes(archive.read(info))
                elif self._link(self._key(info, hashes), target):
                    linked += 1
                else:
                    fresh.append((info, target))
            # zlib lets go of the GIL while it inflates, so big files unpack side by side.
            with ThreadPoolExecutor(max(1, self.threads)) as pool:
                for _ in pool.map(lambda job: self._unpack(archive, job[0], job[1], hashes, cancel),
                                  fresh):
                    unpacked += 1
            entry_points = f"{dist_info}/entry_points.txt"
            if entry_points in archive.namelist():
                _scripts(archive.read(entry_points).decode(), bin_dir)
            requires = _requires(archive.read(f"{dist_info}/METADATA").decode())
        (site_packages / dist_info / "INSTALLER").write_text("torch-bisect-bot\n")
        return Unpacked(linked, unpacked, requires)

    def collect(self) -> int:
        """Remove the files that no environment links any more; returns how many."""
        removed = 0
        for path in self._files():
            with contextlib.suppress(OSError):
                if path.stat().st_nlink == 1:
                    path.unlink()
                    removed += 1
        return removed

    def _files(self) -> Iterator[Path]:
        with contextlib.suppress(OSError):
            for shard in os.scandir(self.root):
                if shard.is_dir(follow_symlinks=False):
                    for entry in os.scandir(shard.path):
                        if not entry.name.startswith("."):
                            yield Path(entry.path)

    def _key(self, info: zipfile.ZipInfo, hashes: dict[str, str]) -> Path:
        digest = hashes[info.filename]
        mode = "x" if _executable(info) else "r"
        return self.root / digest[:2] / f"{digest[2:]}.{mode}"

    @staticmethod
    def _link(stored: Path, target: Path) -> bool:
        try:
            os.link(stored, target)
        except FileNotFoundError:
            return False  # not stored yet, or collected just now
        return True

    def _unpack(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path,
                hashes: dict[str, str], cancel: threading.Event | None) -> None:
        stored = self._key(info, hashes)
        stored.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tbb-", dir=stored.parent)
        try:
            digest = hashlib.sha256()
            with os.fdopen(handle, "wb") as out, archive.open(info) as source:
                while block := source.read(CHUNK):
                    _stop_if(cancel)
                    digest.update(block)
                    out.write(block)
            if digest.hexdigest() != hashes[info.filename]:
                raise BadWheel(f"{info.filename}: its bytes do not match the wheel's RECORD")
            os.chmod(temporary, 0o755 if _executable(info) else 0o644)
            os.replace(temporary, stored)  # atomic: another bot sees all of it or nothing
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        if not self._link(stored, target):  # collected between the two: unpack it again
            self._unpack(archive, info, target, hashes, cancel)


def _stop_if(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise InterruptedError("cancelled")


def _dist_info(entries: list[zipfile.ZipInfo]) -> str:
    tops = {PurePosixPath(i.filename).parts[0] for i in entries}
    infos = [t for t in tops if t.endswith(".dist-info")]
    if len(infos) != 1:
        raise BadWheel(f"a wheel has one .dist-info directory, this one has {len(infos)}")
    if any(t.endswith(".data") for t in tops):
        raise Unsupported("the wheel has a .data directory")
    return infos[0]


def _record_hashes(record: str) -> dict[str, str]:
    """RECORD's sha256 of each file, as hex; rows without one (RECORD itself) are left out."""
    hashes: dict[str, str] = {}
    for line in record.splitlines():
        path, _, rest = line.partition(",")
        digest = rest.partition(",")[0]
        if digest.startswith("sha256="):
            raw = base64.urlsafe_b64decode(digest[7:] + "=" * (-len(digest[7:]) % 4))
            hashes[path] = raw.hex()
    return hashes


def _check(info: zipfile.ZipInfo, hashes: dict[str, str], dist_info: str) -> None:
    """Every path stays inside the environment, every file but RECORD has a hash."""
    path = PurePosixPath(info.filename)
    if path.is_absolute() or ".." in path.parts or "\\" in info.filename:
        raise BadWheel(f"{info.filename}: a path outside the environment")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise Unsupported(f"{info.filename}: a symbolic link")
    if info.filename not in hashes and info.filename != f"{dist_info}/RECORD":
        raise Unsupported(f"{info.filename}: RECORD gives no sha256")


def _executable(info: zipfile.ZipInfo) -> bool:
    return bool((info.external_attr >> 16) & 0o111)


def _requires(metadata: str) -> tuple[str, ...]:
    """Requires-Dist lines that apply without extras; markers stay for uv to judge."""
    out = []
    for line in metadata.splitlines():
        if not line.lower().startswith("requires-dist:"):
            if not line.strip():
                break  # the body (the description) starts after the first empty line
            continue
        text = line.split(":", 1)[1].strip()
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise BadWheel(f"Requires-Dist {text!r}: {exc}") from exc
        if requirement.marker is None or "extra" not in str(requirement.marker):
            out.append(str(requirement))
    return tuple(out)


def _scripts(text: str, bin_dir: Path) -> None:
    """A script in `bin_dir` for each console_scripts entry point (`name = module:attr`)."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    if not parser.has_section("console_scripts"):
        return
    for name, target in parser.items("console_scripts"):
        module, _, attribute = (part.strip() for part in target.partition(":"))
        if "/" in name or not module or not attribute:
            raise BadWheel(f"console script {name!r} = {target!r}")
        script = bin_dir / name
        script.write_text(SCRIPT.format(module=module, head=attribute.split(".")[0],
                                        call=attribute))
        script.chmod(0o755)
