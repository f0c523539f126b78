"""Advisory file locks (flock) that let several bisections on one machine share a cache, and a
tally of work under way in this process."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def file_lock(path: Path, mode: int = fcntl.LOCK_EX,
              check: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold `path`'s lock for the block; the file is made if missing.

    With `check`, the wait is a poll that calls it every 50 ms: it raises to give up waiting
    (a probe called off while another process makes the same environment). A lock file
    deleted while this waited (`delete_held`) is no lock any more: the wait starts again on
    the file the path names now.
    """
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+") as handle:
            if check is None:
                fcntl.flock(handle, mode)
            else:
                while True:
                    try:
                        fcntl.flock(handle, mode | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        check()
                        time.sleep(0.05)
            try:
                if _still_named(path, handle):
                    yield
                    return
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def try_lock(path: Path, shared: bool = False) -> IO[str] | None:
    """`path`'s lock taken without waiting: the open file that holds it (closing it lets go),
    or None while another holder has it. The file is made if missing."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held past this function)
        try:
            fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        if _still_named(path, handle):
            return handle
        handle.close()  # deleted by its holder since it was opened: try the new file


def delete_held(path: Path) -> None:
    """Delete the lock file `path`, whose lock the caller holds exclusively.

    The classic race of deleting a lock file: a process that opened it before the deletion
    gets its lock after, on a file no path names, while a third locks the new file at the
    path; both think they hold the lock. Every taker here checks, once it has the lock, that
    the path still names its file (`file_lock`, `try_lock`), and opens it again if not.
    """
    path.unlink(missing_ok=True)


def _still_named(path: Path, handle: IO[str]) -> bool:
    try:
        named, held = os.stat(path), os.fstat(handle.fileno())
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def claim(path: Path) -> IO[str] | None:
    """`try_lock`, with this process's id written in the file for `claimant` to tell."""
    handle = try_lock(path)
    if handle is not None:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
    return handle


def claimant(path: Path) -> str:
    """The process id the holder of `claim(path)` wrote, or "?"."""
    try:
        return path.read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return "?"


class Tally:
    """How many of something are under way in this process (uv processes, a probe's
    downloads). Waiters hear of every change; `on_idle`, if given, runs each time the
    count drops to zero, outside the lock."""

    def __init__(self, on_idle: Callable[[], object] | None = None) -> None:
        self.count = 0
        self.changed = threading.Condition()
        self.on_idle = on_idle

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self.changed:
            self.count += 1
        try:
            yield
        finally:
            with self.changed:
                self.count -= 1
                idle = self.count == 0
                self.changed.notify_all()
            if idle and self.on_idle is not None:
                self.on_idle()

    def wait_idle(self, cancel: threading.Event | None) -> None:
        """Until nothing is under way, or `cancel` is set."""
        with self.changed:
            while self.count and not (cancel is not None and cancel.is_set()):
                self.changed.wait(timeout=0.05)
