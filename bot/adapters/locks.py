"""Advisory file locks (flock) that let several bisections on one machine share a cache."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
    """Hold `path`'s lock for the block; the file is made if missing and never deleted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
