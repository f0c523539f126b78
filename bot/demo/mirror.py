"""A local nightly mirror: dated synthetic torch builds laid out like download.pytorch.org."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel

PYTHON_TAGS = ("cp310", "cp311", "cp312", "cp313")
PLATFORM = "manylinux_2_28_x86_64"

Bug = dict[str, Any] | None


@dataclass(frozen=True)
class Mirror:
    """What was built: the folder served as /whl/nightly/, the variant and the dated versions."""

    root: Path
    variant: str
    versions: tuple[str, ...]  # oldest first
    first_bad: str | None

    def version_on(self, date: dt.date) -> str:
        stamp = date.strftime("%Y%m%d")
        return next(v for v in self.versions if f".dev{stamp}+" in v)


def fake_git_version(date: dt.date) -> str:
    """A stable 40-hex stand-in for the nightly-branch commit of a synthetic build."""
    return hashlib.sha1(f"nightly {date.isoformat()}".encode()).hexdigest()


def regression_from(first_bad: dt.date | None, bug: Bug = None) -> Callable[[dt.date], Bug]:
    """Builds from `first_bad` on carry `bug` (default: an Inductor bf16 rounding)."""
    planted = bug or {"subsystem": "inductor", "kind": "precision"}
    return lambda date: planted if first_bad is not None and date >= first_bad else None


def build_mirror(
    root: Path,
    *,
    start: dt.date = dt.date(2026, 5, 1),
    days: int = 31,
    first_bad: dt.date | None = dt.date(2026, 5, 21),
    missing: Sequence[dt.date] = (dt.date(2026, 5, 9),),
    variant: str = "cpu",
    python_tags: Sequence[str] = PYTHON_TAGS,
    bug_for: Callable[[dt.date], Bug] | None = None,
    git_version_for: Callable[[dt.date], str] = fake_git_version,
    payload_bytes: int = 0,
    requires: tuple[str, ...] = (),
    cut: dt.date | None = None,
) -> Mirror:
    """Write one wheel per date and Python tag into `root/<variant>/` (a date may be missing).

    With `cut`, main's version line moves there, as at a release branch cut: 2.12.0.devDATE
    before it, 2.13.0.devDATE from it on."""
    bug_for = bug_for or regression_from(first_bad)
    versions = []
    for offset in range(days):
        date = start + dt.timedelta(days=offset)
        if date in missing:
            continue  # nightlies do fail to publish for a variant now and then
        line = "2.12.0" if cut is not None and date < cut else "2.13.0"
        version = f"{line}.dev{date:%Y%m%d}+{variant}"
        files: dict[str, bytes | str] = dict(
            package_files(version, git_version_for(date), bug_for(date))
        )
        if payload_bytes:
            # Incompressible bytes, so that installing costs what a big wheel costs.
            seed = hashlib.sha256(version.encode()).digest()
            files["torch/lib/libpayload.so"] = _random_bytes(seed, payload_bytes)
        for tag in python_tags:
            build_wheel(root / variant, "torch", version, files, f"{tag}-{tag}-{PLATFORM}",
                        requires)
        versions.append(version)
    bad_versions = [v for v in versions if bug_for(_date_of(v)) is not None]
    return Mirror(root, variant, tuple(versions), bad_versions[0] if bad_versions else None)


def _date_of(version: str) -> dt.date:
    stamp = version.split(".dev")[1][:8]
    return dt.date(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:]))


def _random_bytes(seed: bytes, size: int) -> bytes:
    import random

    return random.Random(seed).randbytes(size)
