"""What the tests ask of the host's processes."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def gone(folder: Path, pattern: str, timeout: float = 30) -> None:
    """Wait until nothing in `folder` matches `pattern`: what the environment cache deletes
    on a thread of its own (half-made environments, uv's leftovers)."""
    import time

    deadline = time.monotonic() + timeout
    while any(folder.glob(pattern)):
        assert time.monotonic() < deadline, f"{folder}/{pattern} was never deleted"
        time.sleep(0.01)
