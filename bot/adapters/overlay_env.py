"""Commit environments: a hard-link copy of the last good nightly's, a commit's Python over it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.adapters.delta_install import NotDerivable, hardlink_copy
from bot.adapters.delta_install import site_packages as _site_packages
from bot.adapters.environments import (
    MARKER,
    PROBE_CODE,
    Environment,
    ProvisionError,
    stop_if,
)
from bot.adapters.locks import file_lock, try_lock
from bot.core.builds import Build
from bot.core.overlay import OVERLAYABLE, Candidate, FileChange, classify

PREFIX = "tbb-"


class FileSource(Protocol):
    """Where a commit's files come from (GitSources; a dict-backed fake in tests)."""

    def read_files(self, old: str, new: str, paths: Sequence[str]) -> dict[str, bytes]: ...


def _replace_file(path: Path, data: bytes) -> None:
    """Write a new inode and rename it over `path`: a hard-linked original is never touched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{PREFIX}", dir=path.parent)
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _drop_bytecode(path: Path) -> None:
    """Remove `__pycache__/<module>.*.pyc` of a changed module, so Python cannot reuse it."""
    cache = path.parent / "__pycache__"
    if path.suffix == ".py" and cache.is_dir():
        for stale in cache.glob(f"{path.stem}.*.pyc"):
            stale.unlink()


def _prune_emptied(site: Path, folder: Path) -> None:
    """Remove a folder whose files were all deleted (bytecode aside), and parents left so.

    A package folder left behind empty imports as a namespace package (PEP 420): `import
    torch.gone` would succeed on the overlay where it fails on a build of the commit."""
    while folder != site and folder.is_relative_to(site) and folder.is_dir():
        if any(entry.name != "__pycache__" for entry in folder.iterdir()):
            return
        shutil.rmtree(folder)  # the copy's own folder; its files are links: the base keeps them
        folder = folder.parent


def apply_overlay(site: Path, changes: Sequence[FileChange], contents: Mapping[str, bytes]) -> int:
    """Write added and modified files, delete deleted ones; returns how many files changed."""
    changed = 0
    emptied: set[Path] = set()
    for change in changes:
        gone = [change.old_path] if change.old_path else []
        if change.status == "D":
            gone.append(change.path)
        for path in gone:
            if classify(path) in OVERLAYABLE:
                target = site / path
                _drop_bytecode(target)
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
                emptied.add(target.parent)
                changed += 1
        if change.status != "D" and classify(change.path) in OVERLAYABLE:
            target = site / change.path
            _drop_bytecode(target)
            _replace_file(target, contents[change.path])
            changed += 1
    for folder in sorted(emptied, key=lambda f: len(f.parts), reverse=True):  # deepest first
        _prune_emptied(site, folder)
    return changed


def site_packages(env: Path) -> Path:
    try:
        return _site_packages(env)
    except NotDerivable as exc:
        raise ProvisionError(str(exc)) from exc


@contextlib.contextmanager
def overlay_scratch(root: Path) -> Iterator[Path]:
    """A folder of this commit tier's own under `root/overlays`, removed when the tier ends.

    Overlays are hard links of the last good nightly's environment: kept after the tier, they
    would hold its gigabytes on disk once the cache evicts it, outside `--cache-budget-gb`.
    Made again they cost a hard-link copy each. A folder a killed tier left (its lock free)
    is removed by the next tier.
    """
    overlays = root / "overlays"
    overlays.mkdir(parents=True, exist_ok=True)
    for lock in overlays.glob(f"{PREFIX}run-*.lock"):
        held = try_lock(lock)
        if held is not None:  # its tier is gone
            shutil.rmtree(lock.with_suffix(""), ignore_errors=True)
            lock.unlink(missing_ok=True)
            held.close()
    handle = None
    while handle is None:  # the lock first: another tier's clean-up skips a held one
        folder = overlays / f"{PREFIX}run-{secrets.token_hex(6)}"
        lock = folder.with_name(folder.name + ".lock")
        handle = try_lock(lock)
    try:
        folder.mkdir()
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock.unlink(missing_ok=True)
        handle.close()


@dataclass
class OverlayProvisioner:
    """Provisions candidate builds (labelled `<good version>@<sha12>`) by overlay of `base`."""

    base: Environment
    base_version: str
    base_commit: str  # the main commit the last good nightly was built from
    sources: FileSource
    root: Path
    candidates: Mapping[str, Candidate]  # build version -> candidate
    check_import: bool = True
    scratch: Path | None = None  # where the overlays go (`overlay_scratch`); root/overlays if None

    @property
    def overlays(self) -> Path:
        return self.scratch or self.root / "overlays"

    def path_for(self, candidate: Candidate) -> Path:
        """Named by the base environment too: the same nightly made for another Python or with
        other packages is another base, and its overlays are other environments."""
        base = re.sub(r"[^A-Za-z0-9._-]", "_", self.base_version)
        made_from = hashlib.sha256(str(self.base.path.resolve()).encode()).hexdigest()[:8]
        return self.overlays / f"{PREFIX}{base}-{made_from}@{candidate.commit.sha[:12]}"

    def unusable(self) -> str | None:
        """Why no overlay can be made at all, asked once before any probe: overlays are hard
        links of the base, which cannot cross filesystems."""
        self.overlays.mkdir(parents=True, exist_ok=True)
        if self.base.path.stat().st_dev != self.overlays.stat().st_dev:
            return (f"it is on another filesystem ({self.base.path}) than the overlays "
                    f"({self.overlays}), which are hard links of it")
        return None

    def provision(self, build: Build, cancel: threading.Event | None = None) -> Environment:
        """Setting `cancel` gives up waiting for another maker (Cancelled); an overlay under
        way (hard links and a few files, well under a second) is finished."""
        candidate = self.candidates.get(build.version)
        if candidate is None or not candidate.testable:
            raise ProvisionError(f"{build.version} cannot be made by overlay")
        final = self.path_for(candidate)
        self.overlays.mkdir(parents=True, exist_ok=True)
        check = None if cancel is None else lambda: stop_if(cancel)
        with file_lock(self.overlays / f"{final.name}.lock", check=check):
            with contextlib.suppress(OSError, ValueError):
                info = json.loads((final / MARKER).read_text())
                return Environment(final, final / "bin" / "python", info)
            stop_if(cancel)
            return self._create(candidate, final)

    @contextlib.contextmanager
    def using(self, build: Build, cancel: threading.Event | None = None) -> Iterator[Environment]:
        """`provision`: overlays are this commit tier's own, never evicted while it runs."""
        yield self.provision(build, cancel)

    def _create(self, candidate: Candidate, final: Path) -> Environment:
        started = time.monotonic()
        paths = [c.path for c in candidate.overlay
                 if c.status != "D" and classify(c.path) in OVERLAYABLE]
        try:
            contents = self.sources.read_files(self.base_commit, candidate.commit.sha, paths)
        except Exception as exc:  # any source failure makes the candidate untestable (SKIP)
            message = f"reading {candidate.commit.sha[:12]}'s files failed: {exc}"
            raise ProvisionError(message) from exc
        staging = Path(tempfile.mkdtemp(prefix=f"{PREFIX}tmp-", dir=self.overlays))
        try:
            env = staging / "env"
            try:
                linked = hardlink_copy(self.base.path, env)
            except OSError as exc:  # another filesystem, no space, protected hard links
                raise ProvisionError(f"the overlay of {candidate.commit.sha[:12]} could not "
                                     f"hard-link {self.base.path}: {exc}") from exc
            (env / MARKER).unlink(missing_ok=True)
            changed = apply_overlay(site_packages(env), candidate.overlay, contents)
            info = dict(self.base.info)
            # Not with the reproducer's packages in it: this import runs outside the sandbox.
            check = self.check_import and not self.base.info.get("issue_packages")
            info.update(self._describe(env / "bin" / "python") if check else {})
            info.update(overlay_commit=candidate.commit.sha, overlay_of=self.base_version,
                        overlay_files=changed, linked_files=linked,
                        overlay_seconds=round(time.monotonic() - started, 3))
            (env / MARKER).write_text(json.dumps(info, indent=2))  # last: marks it complete
            os.replace(env, final)
        except OSError as exc:  # writing the commit's files: no space, a read-only cache
            raise ProvisionError(f"the overlay of {candidate.commit.sha[:12]} could not be "
                                 f"written: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return Environment(final, final / "bin" / "python", info)

    def _describe(self, python: Path) -> dict[str, object]:
        try:
            done = subprocess.run([str(python), "-c", PROBE_CODE], capture_output=True, text=True,
                                  timeout=600, check=False, env={"PATH": "/usr/bin:/bin"})
            info: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            raise ProvisionError(f"the overlay environment's python does not start: {exc}") from exc
        return info
