"""Downloaded torch wheels kept by file name, each with the sha256 of what was actually fetched."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

from bot.adapters.wheel_index import RetryPolicy
from bot.core.builds import Build

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class _Transient(Exception):
    """A failure worth another attempt: connection error, 5xx, a body cut short."""


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
    # Wheels are large: more time in total than an index page, restarted from the first byte.
    retry: RetryPolicy = RetryPolicy(attempts=4, base_s=1.0, cap_s=15.0, total_s=300.0)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @contextlib.contextmanager
    def held(self, build: Build,
             cancel: threading.Event | None = None) -> Iterator[tuple[Path, str]]:
        """The wheel and its sha256, kept on disk until the block ends.

        Trimming happens after every download, so without this a wheel fetched by one install
        could be deleted by another's trim before uv read it ("Distribution not found"), and
        its build would be SKIP. It happened with 12 installs at once, as many as 8 prefetch
        threads (a 32-core runner) and a round of 3 make. A pin is a file beside the wheel
        naming its process, so another bisection sharing the cache respects it too, and a dead
        process's pin does not keep a wheel forever.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        pin = self.root / f"{build.wheel.filename}{_PIN}{os.getpid()}-{threading.get_ident()}"
        pin.touch()
        try:
            yield self.fetch(build, cancel)
        finally:
            with contextlib.suppress(OSError):
                pin.unlink()
            self.trim()

    def fetch(self, build: Build, cancel: threading.Event | None = None) -> tuple[Path, str]:
        """The wheel and its sha256; setting `cancel` stops a download (DownloadError)."""
        target = self.root / build.wheel.filename
        sidecar = target.with_name(target.name + ".sha256")
        with contextlib.suppress(OSError):
            sha256 = sidecar.read_text().strip()
            if target.is_file() and len(sha256) == 64:
                # Recency goes on the sidecar: touching the wheel would change the mtime uv's
                # cache keys it by, and uv would unpack the whole wheel again (~8 s for torch).
                os.utime(sidecar)
                self._check(build, sha256)
                return target, sha256
        sha256 = self._download(build, target, cancel)
        self._check(build, sha256)
        sidecar.write_text(sha256 + "\n")
        self.trim()
        return target, sha256

    @staticmethod
    def _check(build: Build, sha256: str) -> None:
        if build.wheel.sha256 and build.wheel.sha256 != sha256:
            raise DownloadError(f"{build.wheel.filename}: sha256 differs from the index's")

    def _download(self, build: Build, target: Path, cancel: threading.Event | None = None) -> str:
        """Exponential backoff with jitter (wheel_index.RetryPolicy), bounded in total time."""
        started = time.monotonic()
        url = build.wheel.url
        for attempt in range(self.retry.attempts):
            try:
                return self._attempt(build, target, cancel)
            except _Transient as exc:
                problem = str(exc)
            pause = self.retry.delay(attempt)
            if attempt + 1 == self.retry.attempts or (
                time.monotonic() - started + pause > self.retry.total_s
            ):
                break
            self.sleep(pause)
        raise DownloadError(f"download of {build.wheel.filename} failed after {attempt + 1} "
                            f"attempts: {problem} ({url})")

    def _attempt(self, build: Build, target: Path, cancel: threading.Event | None = None) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix="tbb-part-", dir=self.root)
        digest = hashlib.sha256()
        try:
            with os.fdopen(handle, "wb") as out, requests.get(
                build.wheel.url, stream=True, timeout=self.timeout_s
            ) as response:
                if response.status_code in _RETRY_STATUS:
                    raise _Transient(f"HTTP {response.status_code}")
                if response.status_code != 200:
                    raise DownloadError(f"download of {build.wheel.filename} failed: HTTP "
                                        f"{response.status_code} ({build.wheel.url})")
                for chunk in response.iter_content(1 << 20):
                    if cancel is not None and cancel.is_set():
                        raise DownloadError(f"download of {build.wheel.filename} cancelled")
                    digest.update(chunk)
                    out.write(chunk)
                expected = response.headers.get("Content-Length")
            got = os.path.getsize(partial)
            if expected is not None and got != int(expected):
                raise _Transient(f"the body was cut short ({got} of {expected} bytes)")
            os.replace(partial, target)  # atomic: a cut download never looks complete
        except requests.RequestException as exc:
            raise _Transient(_plain(exc)) from exc
        except OSError as exc:
            raise DownloadError(f"download of {build.wheel.filename} failed: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
        return digest.hexdigest()

    def trim(self) -> None:
        """Delete all but the `keep` most recently used wheels (and only wheels), never one
        that a live process holds."""
        held = self._held()
        wheels = sorted(self.root.glob("*.whl"), key=_last_used, reverse=True)
        for old in wheels[self.keep:]:
            if old.name in held:
                continue
            with contextlib.suppress(OSError):
                old.unlink()
                old.with_name(old.name + ".sha256").unlink()

    def _held(self) -> set[str]:
        """The wheels pinned by live processes; pins left by dead ones are removed."""
        held: set[str] = set()
        for pin in self.root.glob(f"*.whl{_PIN}*"):
            wheel, _, owner = pin.name.partition(_PIN)
            pid = owner.split("-")[0]
            if pid.isdigit() and _alive(int(pid)):
                held.add(wheel)
            else:
                with contextlib.suppress(OSError):
                    pin.unlink()
        return held


_PIN = ".pin-"  # <wheel>.pin-<pid>-<thread>: an install is reading that wheel


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _plain(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return "the body was cut short"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    if isinstance(exc, requests.ConnectionError):
        return f"cannot connect ({type(exc).__name__})"
    return type(exc).__name__


def _last_used(wheel: Path) -> float:
    try:
        return wheel.with_name(wheel.name + ".sha256").stat().st_mtime
    except OSError:
        return 0.0
