"""Advisory file locks (flock) that let several bisections on one machine share a cache."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path, mode: int = fcntl.LOCK_EX,
              check: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold `path`'s lock for the block; the file is made if missing and never deleted.

    With `check`, the wait is a poll that calls it every 50 ms: it raises to give up waiting
    (a probe called off while another process makes the same environment).
    """
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
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
