"""Downloaded torch wheels kept by file name, each with the sha256 of what was actually fetched."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import requests

from bot.core.builds import Build


class DownloadError(Exception):
    """The wheel could not be fetched whole; the build is untestable (SKIP), never BAD."""


@dataclass
class WheelStore:
    """`root/<wheel>` plus `root/<wheel>.sha256`; the newest `keep` wheels stay.

    Nightly links carry no checksum (DESIGN §4), so the digest is computed while streaming.
    Keeping the file also keeps its path stable, so uv's cache recognises it the next time an
    environment of the same build is made (a second environment then takes seconds).
    """

    root: Path
    keep: int = 6
    timeout_s: float = 60.0

    def fetch(self, build: Build) -> tuple[Path, str]:
        target = self.root / build.wheel.filename
        sidecar = target.with_name(target.name + ".sha256")
        with contextlib.suppress(OSError):
            sha256 = sidecar.read_text().strip()
            if target.is_file() and len(sha256) == 64:
                os.utime(target)
                self._check(build, sha256)
                return target, sha256
        sha256 = self._download(build, target)
        self._check(build, sha256)
        sidecar.write_text(sha256 + "\n")
        self.trim()
        return target, sha256

    @staticmethod
    def _check(build: Build, sha256: str) -> None:
        if build.wheel.sha256 and build.wheel.sha256 != sha256:
            raise DownloadError(f"{build.wheel.filename}: sha256 differs from the index's")

    def _download(self, build: Build, target: Path) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix="tbb-part-", dir=self.root)
        digest = hashlib.sha256()
        try:
            with os.fdopen(handle, "wb") as out, requests.get(
                build.wheel.url, stream=True, timeout=self.timeout_s
            ) as response:
                response.raise_for_status()
                for chunk in response.iter_content(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                expected = response.headers.get("Content-Length")
            if expected is not None and os.path.getsize(partial) != int(expected):
                raise DownloadError(f"download of {build.wheel.filename} was cut short")
            os.replace(partial, target)  # atomic: a cut download never looks complete
        except (requests.RequestException, OSError) as exc:
            raise DownloadError(f"download of {build.wheel.filename} failed: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
        return digest.hexdigest()

    def trim(self) -> None:
        """Delete all but the `keep` most recently used wheels (and only wheels)."""
        wheels = sorted(self.root.glob("*.whl"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in wheels[self.keep:]:
            with contextlib.suppress(OSError):
                old.unlink()
                old.with_name(old.name + ".sha256").unlink()
