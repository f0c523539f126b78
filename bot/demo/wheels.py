"""Spec-valid wheels built in memory (PEP 427 layout, RECORD hashes), as pip's tests make them."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

from bot.core.builds import record_hash


def metadata_text(name: str, version: str, requires: tuple[str, ...] = ()) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    return "\n".join(lines) + "\n\nA synthetic distribution made by torch-bisect-bot's tests.\n"


def record_line(path: str, data: bytes) -> str:
    """One RECORD row: path, sha256 (urlsafe base64, unpadded), size."""
    return f"{path},{record_hash(data)},{len(data)}"


def wheel_text(tag: str) -> str:
    """The WHEEL file of a platlib wheel with `tag`."""
    return (f"Wheel-Version: 1.0\nGenerator: torch-bisect-bot\nRoot-Is-Purelib: false\n"
            f"Tag: {tag}\n")


def write_entries(archive: zipfile.ZipFile, files: Mapping[str, bytes]) -> None:
    """Deflated entries with a fixed date, so the same files give the same bytes."""
    for path, data in files.items():
        info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo's own default is STORED
        archive.writestr(info, data)


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes | str],
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = (),
) -> Path:
    """Write `{name}-{version}-{tag}.whl` into `directory`; returns its path."""
    dist_info = f"{name}-{version}.dist-info"
    contents: dict[str, bytes] = {
        path: data.encode() if isinstance(data, str) else data for path, data in files.items()
    }
    contents[f"{dist_info}/METADATA"] = metadata_text(name, version, requires).encode()
    contents[f"{dist_info}/WHEEL"] = wheel_text(tag).encode()
    record = [record_line(path, data) for path, data in contents.items()]
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        write_entries(archive, contents)
    # `+` of a local version stays `+` in the file name; index pages quote it as %2B.
    target = directory / f"{name}-{version}-{tag}.whl"
    directory.mkdir(parents=True, exist_ok=True)
    target.write_bytes(buffer.getvalue())
    return target


def read_metadata(wheel: Path) -> bytes:
    """The METADATA file of a wheel, as an index serves it for PEP 658."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".dist-info/METADATA") and member.count("/") == 1:
                return archive.read(member)
    raise FileNotFoundError(f"{wheel} has no METADATA")
