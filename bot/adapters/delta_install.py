"""A build's environment made from a neighbouring build's: unchanged files linked, the rest
unpacked.

Nightlies a few days apart share nearly every small file (the speed benchmark's builds, shaped
on real ones, share 5,566-6,161 of their 6,316 files with one a few days away) and no binary.
uv makes each of a build's ~6,300 files anew, and making files is what an install spends its
time on: on a 16-core host several uv installs at once top out at about 2 environments a
second however many run (docs/performance.md), which kept several workers waiting for their
builds. Here a file whose path, RECORD hash, CRC-32 and size are all the same as in a made
environment of another build is hard-linked from it, and only the rest is inflated from the
wheel, on a thread pool, with ISA-L's inflate where the `isal` package is there (3.7 times
CPython's zlib on the benchmark's largest library).

Only where the result is what uv would have made: the same interpreter and extra packages
(the caller's choice of donor), the same `Requires-Dist` (so the dependencies uv installed
beside the donor's build are the ones it would install beside this one), the same entry
points (the launchers in `bin/`, which a relocatable environment keeps path-free), a wheel of
plain `site-packages` files, none in a folder another package of the environment holds.
Anything else is `NotDerivable`, and the caller installs with uv as before.
"""

from __future__ import annotations

import csv
import io
import json
import os
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType

from bot.core.builds import record_hash

_inflater: ModuleType
try:  # ISA-L's inflate: 0.19 s against CPython zlib's 0.69 s for a 229 MB library (VM)
    from isal import isal_zlib as _inflater
except ImportError:  # pragma: no cover - the package is a dependency; zlib keeps it working
    _inflater = zlib

MEMBERS = ".tbb-members.json"  # what a made environment's build holds, for later derivations
INSTALLER = "torch-bisect-bot"
_CHUNK = 2**20  # compressed bytes read at a time
_OUT = 4 * 2**20  # most bytes inflated at a time: a thread's memory stays a few MB
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")


class NotDerivable(Exception):
    """Why an environment cannot be made from the donor's (the caller installs with uv)."""


@dataclass(frozen=True)
class WheelFiles:
    """What a torch wheel holds, as a derivation compares it."""

    dist_info: str  # "torch-2.13.0.dev20260521+cpu.dist-info"
    members: dict[str, tuple[int, int]]  # file -> (CRC-32, size), the zip's central directory
    record: dict[str, str]  # file -> "sha256=...", the wheel's RECORD
    requires: tuple[str, ...]  # METADATA's Requires-Dist, sorted
    entry_points: str

    def to_json(self) -> str:
        return json.dumps({"dist_info": self.dist_info, "members": self.members,
                           "record": self.record, "requires": list(self.requires),
                           "entry_points": self.entry_points})

    @classmethod
    def from_json(cls, text: str) -> WheelFiles:
        data = json.loads(text)
        return cls(str(data["dist_info"]),
                   {path: (int(crc), int(size)) for path, (crc, size) in data["members"].items()},
                   {str(k): str(v) for k, v in data["record"].items()},
                   tuple(str(r) for r in data["requires"]), str(data["entry_points"]))


def _safe_member(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def read_wheel(wheel: Path) -> WheelFiles:
    """The wheel's listing, RECORD, requirements and entry points; NotDerivable for a wheel
    that is not plain `site-packages` files (a `.data` folder goes elsewhere in the
    environment), or one that names a file outside it."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            infos = archive.infolist()
            tops = {info.filename.split("/", 1)[0] for info in infos}
            dist_infos = [top for top in tops if top.endswith(".dist-info")]
            if len(dist_infos) != 1:
                raise NotDerivable(f"{wheel.name} has {len(dist_infos)} .dist-info folders")
            dist_info = dist_infos[0]
            data = [top for top in tops if top.endswith(".data")]
            if data:
                raise NotDerivable(f"{wheel.name} installs files outside site-packages "
                                   f"({data[0]})")
            members: dict[str, tuple[int, int]] = {}
            for info in infos:
                if not _safe_member(info.filename):
                    raise NotDerivable(f"{wheel.name} names a file outside its folder: "
                                       f"{info.filename!r}")
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise NotDerivable(f"{wheel.name}: {info.filename} is compressed in a "
                                       f"way this does not unpack ({info.compress_type})")
                if not info.is_dir():
                    members[info.filename] = (info.CRC, info.file_size)
            record_text = archive.read(f"{dist_info}/RECORD").decode("utf-8")
            metadata = archive.read(f"{dist_info}/METADATA").decode("utf-8")
            names = set(archive.namelist())
            entry_points = (archive.read(f"{dist_info}/entry_points.txt").decode("utf-8")
                            if f"{dist_info}/entry_points.txt" in names else "")
    except (OSError, KeyError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        raise NotDerivable(f"{wheel.name} could not be read for a derivation: {exc}") from exc
    record = {row[0]: row[1] for row in csv.reader(io.StringIO(record_text))
              if len(row) >= 2 and row[1]}
    requires = tuple(sorted(line.split(":", 1)[1].strip() for line in metadata.splitlines()
                            if line.startswith("Requires-Dist:")))
    return WheelFiles(dist_info, members, record, requires, entry_points)


def remember(venv: Path, files: WheelFiles) -> None:
    """Keep what the environment's build holds beside it: a later build is derived from it
    after its wheel has left the wheel store."""
    (venv / MEMBERS).write_text(files.to_json())


def recalled(venv: Path) -> WheelFiles | None:
    try:
        return WheelFiles.from_json((venv / MEMBERS).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def site_packages(venv: Path) -> Path:
    found = list(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise NotDerivable(f"{venv} has {len(found)} site-packages folders")
    return found[0]


def _top(path: str) -> str:
    return path.split("/", 1)[0]


def hardlink_copy(source: Path, target: Path, skip: Collection[Path] = ()) -> int:
    """Copy a tree as `cp -al` does: directories made anew, files hard-linked, symbolic
    links kept; paths in `skip` (relative to `source`) are left out. Returns the files
    linked. (Plain strings and `scandir`: a venv with torch's dependencies is thousands of
    files, and `Path` objects made it 0.2-0.26 s of a 1.2 s derivation on the GPU host.)"""
    skipped = {os.path.join(str(target), str(path)) for path in skip}
    os.makedirs(target)
    return _link_tree(str(source), str(target), skipped)


def _link_tree(source: str, target: str, skipped: set[str]) -> int:
    count = 0
    with os.scandir(source) as entries:
        for entry in entries:
            dest = os.path.join(target, entry.name)
            if dest in skipped:
                continue
            if entry.is_symlink():  # a venv's lib64 -> lib: kept as a link, not walked twice
                os.symlink(os.readlink(entry.path), dest)
            elif entry.is_dir():
                os.mkdir(dest)
                count += _link_tree(entry.path, dest, skipped)
            else:
                os.link(entry.path, dest)
                count += 1
    return count


@dataclass(frozen=True)
class Derived:
    linked: int
    unpacked: int


def derive(donor: Path, wheel: Path, target: Path, *, leave_out: Collection[str] = (),
           sha256: str | None = None, check: Callable[[], None] | None = None) -> Derived:
    """Make the environment of `wheel` at `target` from the made environment `donor`.

    NotDerivable (with `target` possibly half made: the caller discards it) when the
    result would not be what uv makes; `check` is called between files and chunks and
    raises to call the making off. Files named in `leave_out` at the donor's top are not
    carried over (the caller's own, written anew). The donor must be kept from deletion
    meanwhile (the caller holds its use lock)."""
    new = read_wheel(wheel)
    old = recalled(donor)
    if old is None:
        raise NotDerivable(f"{donor.name} keeps no listing of its build")
    if old.requires != new.requires:
        raise NotDerivable("the builds' Requires-Dist differ: uv chooses the dependencies")
    if old.entry_points != new.entry_points:
        raise NotDerivable("the builds' entry points differ: uv writes the launchers")
    donor_site = site_packages(donor)
    site_rel = donor_site.relative_to(donor)
    theirs = {_top(path) for path in new.members} - {_top(path) for path in old.members}
    clash = sorted(top for top in theirs if (donor_site / top).exists())
    if clash:  # uv would install the wheel's files among another package's: not a copy's job
        raise NotDerivable(f"{wheel.name} puts files in {clash[0]}, which another package "
                           "of the environment holds")
    owned = {_top(path) for path in (*old.members, *new.members)}
    skip = {Path(name) for name in (MEMBERS, *leave_out)} | {site_rel / top for top in owned}
    hardlink_copy(donor, target, skip)
    site = target / site_rel
    rewritten = _rewritten(new)
    linked: list[str] = []
    unpacked: list[str] = []
    for path, listing in new.members.items():
        same = (path not in rewritten and old.members.get(path) == listing
                and new.record.get(path) is not None
                and old.record.get(path) == new.record.get(path))
        (linked if same else unpacked).append(path)
    for folder in sorted({str(PurePosixPath(p).parent) for p in new.members}):
        (site / folder).mkdir(parents=True, exist_ok=True)
    for number, path in enumerate(linked):
        if check is not None and number % 512 == 0:
            check()
        try:
            os.link(donor_site / path, site / path)
        except FileNotFoundError as exc:  # a file of the donor deleted by hand
            raise NotDerivable(f"{donor.name} lacks {path}") from exc
    _unpack_all(wheel, [p for p in unpacked if p not in rewritten], site, check)
    _write_installed(site, new, old, wheel, sha256, donor_site)
    remember(target, new)
    return Derived(len(linked), len(unpacked))


_WRITTEN = ("INSTALLER", "REQUESTED", "direct_url.json")  # what an installer adds


def _rewritten(files: WheelFiles) -> set[str]:
    """The distribution's files written here, not taken from the wheel or the donor."""
    return {f"{files.dist_info}/{name}" for name in ("RECORD", *_WRITTEN)}


def _unpack_all(wheel: Path, paths: list[str], site: Path,
                check: Callable[[], None] | None) -> None:
    with zipfile.ZipFile(wheel) as archive:
        infos = [archive.getinfo(path) for path in paths]
    infos.sort(key=lambda info: -info.compress_size)  # the largest, the critical path, first

    # A few threads: the largest file is one stream whatever the pool, and several
    # derivations (a round's probes and the prefetches) run at once, each in its own process.
    workers = min(4, max(2, os.cpu_count() or 2))
    with ThreadPoolExecutor(workers, thread_name_prefix="tbb-unpack") as pool:
        futures = [pool.submit(_unpack, wheel, info, site / info.filename, check)
                   for info in infos]
        try:
            for future in futures:
                future.result()
        finally:
            for future in futures:
                future.cancel()


def _unpack(wheel: Path, info: zipfile.ZipInfo, dest: Path,
            check: Callable[[], None] | None) -> None:
    """Inflate one member from its local header on, checking its CRC-32 and size."""
    with open(wheel, "rb") as source:
        source.seek(info.header_offset)
        header = source.read(_LOCAL_HEADER.size)
        fields = _LOCAL_HEADER.unpack(header)
        if fields[0] != b"PK\x03\x04":
            raise NotDerivable(f"{wheel.name}: no local header for {info.filename}")
        source.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])
        left = info.compress_size
        crc, size = 0, 0
        inflate = None if info.compress_type == zipfile.ZIP_STORED \
            else _inflater.decompressobj(-15)
        with open(dest, "wb") as out:
            while left:
                if check is not None:
                    check()
                chunk = source.read(min(left, _CHUNK))
                if not chunk:
                    raise NotDerivable(f"{wheel.name} is cut short in {info.filename}")
                left -= len(chunk)
                pending = chunk
                while pending:
                    data = pending if inflate is None else inflate.decompress(pending, _OUT)
                    pending = b"" if inflate is None else inflate.unconsumed_tail
                    crc = _inflater.crc32(data, crc)
                    size += len(data)
                    out.write(data)
            if inflate is not None:
                data = inflate.flush()
                crc = _inflater.crc32(data, crc)
                size += len(data)
                out.write(data)
    if (crc, size) != (info.CRC, info.file_size):
        raise NotDerivable(f"{wheel.name}: {info.filename} does not match its CRC-32 or size")
    if (info.external_attr >> 16) & 0o111:
        dest.chmod(0o755)


def _write_installed(site: Path, new: WheelFiles, old: WheelFiles, wheel: Path,
                     sha256: str | None, donor_site: Path) -> None:
    """The installed distribution's own files (PEP 376, PEP 610), and its RECORD: the wheel's
    rows, the launchers' rows the donor's installer wrote (the same entry points make the
    same launchers), and the rows of what is written here."""
    folder = site / new.dist_info
    archive_info: dict[str, object] = {}
    if sha256:
        archive_info = {"hash": f"sha256={sha256}", "hashes": {"sha256": sha256}}
    written = {
        "INSTALLER": f"{INSTALLER}\n".encode(),
        "REQUESTED": b"",
        "direct_url.json": json.dumps({"url": wheel.resolve().as_uri(),
                                       "archive_info": archive_info}).encode(),
    }
    for name, data in written.items():
        (folder / name).write_bytes(data)
    rows = [[path, digest, str(new.members[path][1])] for path, digest in new.record.items()
            if path in new.members and path not in _rewritten(new)]
    rows += [row for row in _installed_rows(donor_site / old.dist_info / "RECORD")
             if row and row[0].startswith("../")]
    rows += [[f"{new.dist_info}/{name}", record_hash(data), str(len(data))]
             for name, data in written.items()]
    rows.append([f"{new.dist_info}/RECORD", "", ""])
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    (folder / "RECORD").write_text(text.getvalue(), encoding="utf-8")


def _installed_rows(record: Path) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def main(argv: list[str] | None = None) -> int:
    """`python -m bot.adapters.delta_install DONOR WHEEL TARGET`: a derivation in a process
    of its own, as the environment cache runs it. Several at once in the bot's process
    fought over its interpreter lock (on the 16-core GPU host a 3-worker bisection's later
    installs waited 18 s against 6.5 s with uv, and the bot's peak RSS was 180 MB); a process
    is also what `nice` lowers and a call-off kills. Exit status 3: NotDerivable, said on
    stderr."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bot.adapters.delta_install")
    parser.add_argument("donor", type=Path)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--sha256")
    parser.add_argument("--leave-out", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        made = derive(args.donor, args.wheel, args.target, leave_out=args.leave_out,
                      sha256=args.sha256)
    except NotDerivable as exc:
        print(exc, file=sys.stderr)
        return 3
    print(json.dumps({"linked": made.linked, "unpacked": made.unpacked}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
