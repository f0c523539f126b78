"""Shared pieces of the fault tests: a counting reproducer and the command line that runs it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

BISECT_BOT = shutil.which("bisect-bot", path=str(Path(sys.executable).parent)) or "bisect-bot"

# Fails from the planted first bad nightly (2026-05-21) on; appends one line per finished run.
COUNTING_SCRIPT = """\
import time
import torch
time.sleep({sleep})
with open({runs!r}, "a") as runs:
    runs.write(torch.__version__ + "\\n")
assert torch.__version__.split("dev")[1][:8] < "20260521", "regressed"
"""


def counting_script(folder: Path, sleep: float = 0.0) -> tuple[Path, Path]:
    """The reproducer and the file where each finished run of it leaves one line."""
    runs = folder / "runs.txt"
    script = folder / "repro.py"
    script.write_text(COUNTING_SCRIPT.format(sleep=sleep, runs=str(runs)))
    return script, runs


def bisect_argv(script: Path, index_url: str, cache_dir: Path, db: Path, report: Path,
                *extra: str) -> list[str]:
    return [BISECT_BOT, "bisect", str(script), "--index", index_url, "--cache-dir",
            str(cache_dir), "--no-default-packages", "--sandbox", "none", "--db", str(db),
            "--good", "2026-05-02", "--no-commit-tier", "--no-triage", "--no-prefetch",
            "--json", str(report), *extra]


def run_lines(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []
