"""Downloaded torch wheels kept by file name, each with the sha256 of what was actually fetched."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
import secrets
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

import requests
import urllib3

from bot.adapters.locks import Tally, file_lock
from bot.adapters.wheel_index import RetryPolicy
from bot.core.builds import Build, wheel_identity

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_T = TypeVar("_T")


class _Transient(Exception):
    """A failure worth another attempt: connection error, 5xx, a body cut short."""


class DownloadError(Exception):
    """The wheel could not be fetched whole; the build is untestable (SKIP), never BAD."""


class Unanswered(DownloadError):
    """Every try failed for want of an answer (cannot connect, timed out, 5xx, cut short):
    the server is out, whatever the build (environments makes it an IndexOutage). A 404 or a
    file that is not the wheel is the build's own failure, a plain DownloadError."""


@dataclass
class WheelStore:
    """`root/<wheel>` plus `root/<wheel>.sha256`; the newest `keep` wheels stay.

    Nightly links carry no checksum, so the digest is computed while streaming.
    Keeping the file also keeps its path stable, so uv's cache recognises it the next time an
    environment of the same build is made (a second environment then takes seconds).
    """

    root: Path
    keep: int = 6
    # At most this many bytes of kept wheels (a CUDA nightly is GBs): what a cache budget
    # allows them. None: `keep` alone bounds them.
    keep_bytes: int | None = None
    timeout_s: float = 60.0
    # Wheels are large: more time in total than an index page. With ranges each range has the
    # policy and resumes where it was cut; from a server without them a try is the whole body.
    retry: RetryPolicy = RetryPolicy(attempts=4, base_s=1.0, cap_s=15.0, total_s=300.0)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    connections: int = 4  # ranges fetched at once, from a server that serves ranges
    # A prefetch's download: it starts no request while a probe's download runs in this
    # process (the probe waits for that one; the prefetch can wait for it).
    background: bool = False
    part_bytes: int = 32 << 20  # the size of one range

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
        pin = self.pin(self.path_for(build))
        try:
            yield self.fetch(build, cancel)
        finally:
            with contextlib.suppress(OSError):
                pin.unlink()
            self.trim()

    def pin(self, wheel: Path) -> Path:
        """Mark `wheel` (there or not yet) as read by this thread until the returned pin file
        is deleted. Made under the store's lock, which a trim holds: a trim that had read the
        pins a moment before could otherwise delete a wheel kept on disk that an install had
        just pinned and taken as there."""
        pin = wheel.with_name(f"{wheel.name}{_PIN}{os.getpid()}-{threading.get_ident()}")
        with file_lock(self.root / _LOCK):
            while True:  # a failed download drops its folder once empty: made again
                wheel.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    pin.touch()
                    return pin

    def fetch(self, build: Build, cancel: threading.Event | None = None) -> tuple[Path, str]:
        """The wheel and its sha256; setting `cancel` stops a download (DownloadError)."""
        target = self.path_for(build)
        sidecar = target.with_name(target.name + ".sha256")
        with contextlib.suppress(OSError):
            sha256 = sidecar.read_text().strip()
            if target.is_file() and len(sha256) == 64:
                if unreadable(target) is None:
                    # Recency goes on the sidecar: touching the wheel would change the mtime
                    # uv's cache keys it by, and uv would unpack the whole wheel again (~8 s).
                    os.utime(sidecar)
                    self._check(build, sha256)
                    return target, sha256
                self.forget(build)  # damaged since it was kept: fetched again below
        try:
            sha256 = self._download(build, target, cancel)
        except DownloadError:
            self._drop_folder(target)  # an identity's folder made for it, if left empty
            raise
        self._check(build, sha256)
        problem = unreadable(target)
        if problem is not None:
            # A wheel the server has cut short (a partial upload, later fixed under the same
            # name) was kept and trusted for good: every install failed with uv's "unable to
            # locate the end of central directory record". It is not kept, so the next
            # install fetches it again.
            self.forget(build)
            raise DownloadError(f"{build.wheel.filename} as downloaded is not a readable wheel "
                                f"({problem}; a partial upload?); it is fetched again next "
                                f"time ({build.wheel.url})")
        sidecar.write_text(sha256 + "\n")
        self.trim()
        return target, sha256

    def path_for(self, build: Build) -> Path:
        """Where the wheel of `build` is kept: by its file name, in a folder of its own for a
        file that `wheel_identity` tells from others of that name (uv needs the name as it
        is). Kept by name alone, a mirror's wheel was taken for another index's of the same
        name."""
        identity = wheel_identity(build.wheel)
        folder = self.root / f"{_BY_IDENTITY}{identity}" if identity else self.root
        return folder / build.wheel.filename

    def forget(self, build: Build) -> None:
        """Delete the kept wheel of `build` and its checksum file."""
        target = self.path_for(build)
        for path in (target.with_name(target.name + ".sha256"), target):
            with contextlib.suppress(OSError):
                path.unlink()
        self._drop_folder(target)

    def _drop_folder(self, wheel: Path) -> None:
        """The folder of a wheel's identity, once nothing is in it (no wheel, no pin)."""
        if wheel.parent != self.root:
            with contextlib.suppress(OSError):
                wheel.parent.rmdir()

    @staticmethod
    def _check(build: Build, sha256: str) -> None:
        if build.wheel.sha256 and build.wheel.sha256 != sha256:
            raise DownloadError(f"{build.wheel.filename}: sha256 differs from the index's")

    def _download(self, build: Build, target: Path, cancel: threading.Event | None = None) -> str:
        def once() -> str:
            with contextlib.nullcontext() if self.background else _FOREGROUND.running():
                return self._attempt(build, target, cancel)

        return self._retried(build, once, time.monotonic())

    def _retried(self, build: Build, once: Callable[[], _T], started: float) -> _T:
        """`once` until it does not fail transiently: exponential backoff with jitter
        (wheel_index.RetryPolicy), bounded in attempts and in time since `started`. The whole
        wheel's tries and each range's go through here."""
        for attempt in range(self.retry.attempts):
            try:
                return once()
            except _Transient as exc:
                problem = str(exc)
            pause = self.retry.delay(attempt)
            if attempt + 1 == self.retry.attempts or (
                time.monotonic() - started + pause > self.retry.total_s
            ):
                break
            self.sleep(pause)
        raise Unanswered(f"download of {build.wheel.filename} failed after {attempt + 1} "
                         f"attempts: {problem} ({build.wheel.url})")

    def _attempt(self, build: Build, target: Path, cancel: threading.Event | None = None) -> str:
        """One try at the whole wheel. The first request asks for its first byte: a server that
        serves ranges (the CDN in front of download.pytorch.org does) answers 206 with the
        wheel's size, and the wheel then comes in ranges (`_Ranges`); one that does not sends
        the whole body, read as one stream."""
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix="tbb-part-", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                if self.background:
                    _FOREGROUND.wait_idle(cancel)
                size, digest = self._first(build, {"Range": "bytes=0-0", **_IDENTITY}, out,
                                           cancel)
                if size is None and digest is None:
                    # A 206 without the wheel's size (`bytes 0-0/*`): ask for all of it.
                    size, digest = self._first(build, {}, out, cancel)
            if size is not None:
                digest = _Ranges(self, build, Path(partial), size, cancel).fetch()
            if digest is None:
                raise DownloadError(f"download of {build.wheel.filename} failed: the server "
                                    f"answered a plain request with a range ({build.wheel.url})")
            os.replace(partial, target)  # atomic: a cut download never looks complete
        except requests.RequestException as exc:
            raise _Transient(_plain(exc)) from exc
        except OSError as exc:
            raise DownloadError(f"download of {build.wheel.filename} failed: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)
        return digest

    def _first(self, build: Build, headers: dict[str, str], out: IO[bytes],
               cancel: threading.Event | None) -> tuple[int | None, str | None]:
        """(the wheel's size, None) from a 206 that gives it; (None, the digest) after
        reading a 200's whole body into `out`; (None, None) from a 206 that does not."""
        with requests.get(build.wheel.url, stream=True, timeout=self.timeout_s,
                          headers=headers) as response:
            if response.status_code in _RETRY_STATUS:
                raise _Transient(f"HTTP {response.status_code}")
            if response.status_code == 206:
                return _range_total(response), None
            if response.status_code != 200:
                raise DownloadError(f"download of {build.wheel.filename} failed: HTTP "
                                    f"{response.status_code} ({build.wheel.url})")
            return None, self._stream(build, response, out, cancel)

    @staticmethod
    def _stream(build: Build, response: requests.Response, out: IO[bytes],
                cancel: threading.Event | None) -> str:
        """The whole body of a 200, from a server that does not serve ranges: a cut means
        starting again from the first byte."""
        digest = hashlib.sha256()
        got = 0
        for chunk in response.iter_content(1 << 20):
            if cancel is not None and cancel.is_set():
                raise DownloadError(f"download of {build.wheel.filename} cancelled")
            digest.update(chunk)
            out.write(chunk)
            got += len(chunk)
        expected = response.headers.get("Content-Length")
        if expected is not None and got != int(expected):
            raise _Transient(f"the body was cut short ({got} of {expected} bytes)")
        return digest.hexdigest()

    def trim(self) -> None:
        """Delete all but the `keep` most recently used wheels (and only wheels), and the
        older ones beyond `keep_bytes`, never one that a live process holds.

        The store's lock is held while the wheels to go are chosen and renamed out of the way,
        not while they are deleted: every install pins its wheel under that lock, and deleting
        a big file took seconds on the GPU host, whose disk is mounted with `discard` (1.7 s
        a GB, docs/performance.md). What a trim killed on the way left is deleted by the next."""
        with file_lock(self.root / _LOCK):
            self._trim()
        for doomed in self._kept(f"{_TRASH}*"):
            with contextlib.suppress(OSError):
                doomed.unlink()

    def _trim(self) -> None:
        """Called holding the store's lock: the wheels to go are renamed to trash."""
        held = self._held()
        wheels = sorted(self._kept("*.whl"), key=_last_used, reverse=True)
        kept_bytes = 0
        for rank, old in enumerate(wheels):
            size = _size(old)
            within = rank < self.keep and (self.keep_bytes is None
                                           or kept_bytes + size <= self.keep_bytes)
            if within or old in held:
                kept_bytes += size
                continue
            for gone in (old, old.with_name(old.name + ".sha256")):
                with contextlib.suppress(OSError):
                    os.replace(gone, self.root / f"{_TRASH}{os.getpid()}-{secrets.token_hex(6)}")
            self._drop_folder(old)

    def _kept(self, pattern: str) -> list[Path]:
        """The files named like `pattern` in the store and in its identities' folders. A
        folder that another install drops meanwhile (`_drop_folder`, once it is empty) is
        passed over: pathlib's glob raised FileNotFoundError for it on Python 3.11, and the
        install whose trim it was lost its build (seen in a fresh-clone CI run)."""
        found: list[Path] = []
        folders = [self.root]
        while folders:
            folder = folders.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if folder == self.root and entry.name.startswith(_BY_IDENTITY):
                            folders.append(folder / entry.name)
                        elif fnmatch.fnmatchcase(entry.name, pattern):
                            found.append(folder / entry.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def _held(self) -> set[Path]:
        """The wheels pinned by live processes; pins left by dead ones are removed."""
        held: set[Path] = set()
        for pin in self._kept(f"*.whl{_PIN}*"):
            wheel, _, owner = pin.name.partition(_PIN)
            pid = owner.split("-")[0]
            if pid.isdigit() and _alive(int(pid)):
                held.add(pin.with_name(wheel))
            else:
                with contextlib.suppress(OSError):
                    pin.unlink()
        return held


# The downloads a probe is waiting for, in this process. Prefetch runs `nice`, but a network
# link has no priorities: a round's own download shared the link with every prefetch download
# (up to 8 on a big runner, each over several connections), so the download the round waited
# for got a fraction of it. For a CUDA nightly (1-3 GB) that is the round's critical path. A
# prefetch download therefore starts no request, neither its first nor another range, while a
# probe's download runs; a range already under way finishes.
_FOREGROUND = Tally()


def _range_total(response: requests.Response) -> int | None:
    """The wheel's size from the 206 answering `Range: bytes=0-0`, if it says."""
    found = re.fullmatch(r"bytes 0-0/(\d+)", response.headers.get("Content-Range", "").strip())
    return int(found[1]) if found else None


# What one read takes. A wheel comes over up to `connections` threads for each of up to 11
# downloads at once (8 prefetch threads and a round of 3); with 1 MB reads the bot's peak RSS
# in the speed benchmark rose from 45 to 65 MB (1 worker) and from 49 to 77 MB (3 workers).
_PIECE = 256 << 10
# Ranges count bytes of the body as sent: asking for it unencoded keeps them bytes of the wheel.
_IDENTITY = {"Accept-Encoding": "identity"}


def _as_it_arrives(response: requests.Response) -> Iterator[bytes]:
    """The body in the pieces it arrives in. requests' iter_content fills each chunk before
    handing it over and drops a partial one when the connection breaks, so a cut would lose
    up to a chunk that had in fact arrived; read1 hands over what is there."""
    while piece := response.raw.read1(_PIECE):
        yield piece


class _Stopped(Exception):
    """Another range failed, or the download was cancelled: this one stops quietly."""


class _Ranges:
    """A wheel as ranges of `part_bytes`, fetched over up to `connections` connections and
    written at their offsets, while the digest follows them in order.

    A range cut short is asked again from its first missing byte (each range has the store's
    retry policy), so a cut costs what was in flight, not the wheel: a CUDA nightly is 1-3 GB.
    Several connections also matter because a CDN serves one connection more slowly than the
    link can take. Each thread opens the file itself, so one still reading after a failure
    never writes through a descriptor the caller has closed (and perhaps reused).
    """

    def __init__(self, store: WheelStore, build: Build, path: Path, size: int,
                 cancel: threading.Event | None) -> None:
        self.store, self.build, self.path, self.size, self.cancel = store, build, path, size, cancel
        step = max(1, store.part_bytes)
        self.parts = [(start, min(size, start + step)) for start in range(0, size, step)]
        self.done = [False] * len(self.parts)
        self.taken = 0
        self.failure: BaseException | None = None
        self.started = time.monotonic()
        self.changed = threading.Condition()

    def fetch(self) -> str:
        os.truncate(self.path, self.size)
        workers = [threading.Thread(target=self._work, daemon=True, name="download")
                   for _ in range(max(1, min(self.store.connections, len(self.parts))))]
        for worker in workers:
            worker.start()
        digest = hashlib.sha256()
        try:
            # Unbuffered: a buffered reader would keep bytes it read ahead of the writers.
            with open(self.path, "rb", buffering=0) as written:
                for index, (start, end) in enumerate(self.parts):
                    self._wait_for(index)
                    written.seek(start)
                    left = end - start
                    while left:
                        block = written.read(min(left, _PIECE))
                        if not block:
                            raise DownloadError(f"{self.path}: shorter than written")
                        digest.update(block)
                        left -= len(block)
        finally:
            with self.changed:
                self.failure = self.failure or _Stopped()
                self.changed.notify_all()
        for worker in workers:  # only on success: after a failure one may be in a stalled
            worker.join()       # read until its timeout, and nobody waits for it
        return digest.hexdigest()

    def _wait_for(self, index: int) -> None:
        with self.changed:
            while not self.done[index]:
                if self.cancel is not None and self.cancel.is_set():
                    self.failure = self.failure or DownloadError(
                        f"download of {self.build.wheel.filename} cancelled")
                if self.failure is not None:
                    raise self.failure
                self.changed.wait(timeout=0.05)

    def _work(self) -> None:
        session = requests.Session()
        try:
            with open(self.path, "r+b", buffering=0) as out:
                while True:
                    if self.store.background:  # between ranges, give the link to a probe
                        _FOREGROUND.wait_idle(self.cancel)
                    index = self._take()
                    if index is None:
                        break
                    self._part(session, out, index)
                    with self.changed:
                        self.done[index] = True
                        self.changed.notify_all()
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that waits
            with self.changed:
                self.failure = self.failure or exc
                self.changed.notify_all()
        finally:
            session.close()

    def _take(self) -> int | None:
        with self.changed:
            if self.failure is not None or self.taken == len(self.parts):
                return None
            self.taken += 1
            return self.taken - 1

    def _part(self, session: requests.Session, out: IO[bytes], index: int) -> None:
        start, end = self.parts[index]
        at = [start]  # each try starts where the one before was cut
        self.store._retried(self.build, lambda: self._get(session, out, at, end), self.started)

    def _get(self, session: requests.Session, out: IO[bytes], at: list[int], end: int) -> None:
        """Bytes at[0] to end of the wheel, written in place; at[0] follows what arrived."""
        name = self.build.wheel.filename
        try:
            with session.get(self.build.wheel.url, stream=True, timeout=self.store.timeout_s,
                             headers={"Range": f"bytes={at[0]}-{end - 1}", **_IDENTITY},
                             ) as response:
                if response.status_code in _RETRY_STATUS:
                    raise _Transient(f"HTTP {response.status_code}")
                answered = response.headers.get("Content-Range", "")
                if response.status_code != 206 or not answered.startswith(f"bytes {at[0]}-"):
                    raise DownloadError(f"download of {name} failed: HTTP "
                                        f"{response.status_code} {answered!r} for bytes "
                                        f"{at[0]}-{end - 1} ({self.build.wheel.url})")
                for chunk in _as_it_arrives(response):
                    if self.failure is not None or (self.cancel and self.cancel.is_set()):
                        raise _Stopped()
                    if at[0] + len(chunk) > end:
                        raise DownloadError(f"download of {name} failed: more bytes than asked")
                    view = memoryview(chunk)
                    while view:
                        wrote = os.pwrite(out.fileno(), view, at[0])
                        at[0] += wrote
                        view = view[wrote:]
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            raise _Transient(_plain(exc)) from exc
        if at[0] < end:
            raise _Transient("the body was cut short")


_PIN = ".pin-"  # <wheel>.pin-<pid>-<thread>: an install is reading that wheel
_LOCK = "tbb-store.lock"  # held while a trim chooses what goes, and while a pin is made
_TRASH = "tbb-trash-"  # a wheel a trim took out, deleted after it lets the lock go
_BY_IDENTITY = "tbb-w"  # tbb-w<identity>/<wheel>: a file told from others of its name


def unreadable(wheel: Path) -> str | None:
    """Why `wheel` is no wheel uv can read, or None. Only its end and its central directory
    are read (milliseconds for a CUDA nightly's thousands of files); what a cut file lacks is
    exactly that end."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if not any(name.endswith(".dist-info/WHEEL") for name in names):
        return "no .dist-info/WHEEL in it"
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _plain(exc: requests.RequestException | urllib3.exceptions.HTTPError) -> str:
    if isinstance(exc, (requests.exceptions.ChunkedEncodingError,
                        urllib3.exceptions.ProtocolError)):
        return "the body was cut short"
    if isinstance(exc, (requests.Timeout, urllib3.exceptions.TimeoutError)):
        return "timed out"
    if isinstance(exc, requests.ConnectionError):
        return f"cannot connect ({type(exc).__name__})"
    return type(exc).__name__


def _last_used(wheel: Path) -> float:
    try:
        return wheel.with_name(wheel.name + ".sha256").stat().st_mtime
    except OSError:
        return 0.0
