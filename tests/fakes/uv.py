"""Where the bot looks for uv, made to find none or an old one: the machines users have."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# What uv before 0.4.23 answers `uv pip install ... --index URL` with.
_OLD_UV = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "uv {version} (0000000 2024-10-15)"; exit 0; fi
echo "error: unexpected argument '--index' found" >&2
exit 2
"""


def hide_uv(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    """No uv beside this interpreter, on PATH or as the `uv` package: the three places the
    bot looks. PATH keeps its other folders (the sandbox needs `unshare`), with `folder`
    (made empty) first. Returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    python = folder / "python"  # the interpreter itself, for what runs it (the sandbox's)
    python.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(python))
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / "uv").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), *kept]))
    monkeypatch.setitem(sys.modules, "uv", None)  # `import uv` raises ImportError
    return folder


def old_uv(monkeypatch: pytest.MonkeyPatch, folder: Path, version: str) -> Path:
    """The only uv the bot finds is one that says `version` and refuses `--index`."""
    hide_uv(monkeypatch, folder)
    uv = folder / "uv"
    uv.write_text(_OLD_UV.format(version=version))
    uv.chmod(0o755)
    return uv
