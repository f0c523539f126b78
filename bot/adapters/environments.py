"""One uv-made environment per build under a cache directory: atomic, locked, size-bounded."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from bot.adapters.delta_install import MEMBERS, NotDerivable, read_wheel, remember
from bot.adapters.locks import Tally, delete_held, file_lock, try_lock
from bot.adapters.runner import killed_on
from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.adapters.wheel_store import DownloadError, Unanswered, WheelStore
from bot.core.builds import Build, nearest_first, wheel_identity
from bot.core.errors import UserError

PREFIX = "tbb-"  # everything this module creates carries it; it deletes nothing else
MARKER = ".tbb-env.json"  # written last: an environment without it is half-made

# Run inside a fresh environment to prove torch imports, and to record what the build is.
PROBE_CODE = """
import json, sys
info = {"python": sys.version.split()[0]}
try:
    import torch
except BaseException as exc:
    print(json.dumps({**info, "import_error": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
info.update(torch=torch.__version__, git_version=getattr(torch.version, "git_version", None),
            cuda=getattr(torch.version, "cuda", None))
try:
    info["cuda_available"] = bool(torch.cuda.is_available())
    if info["cuda_available"]:
        info["gpu"] = torch.cuda.get_device_name(0)
except Exception as exc:
    info["cuda_available"] = False
    info["cuda_error"] = f"{type(exc).__name__}: {exc}"
try:
    import triton
    info["triton"] = triton.__version__
except Exception:
    info["triton"] = None
print(json.dumps(info))
"""


# What uv says on the way that is not the error ("Using Python 3.11.7 environment at: ...").
_UV_PROGRESS = ("Using Python", "Using CPython", "Resolved", "Prepared", "Installed",
                "Uninstalled", "Audited", "Downloading", "Downloaded", "Building", "Built")


def uv_error(stderr: str) -> str:
    """The cause in uv's report of a failure, first: "Because setuptools was not found in the
    package registry and you require setuptools, we can conclude that your requirements are
    unsatisfiable" becomes "setuptools was not found in the package registry and you require
    setuptools", then uv's hints. A report is cut to its first words in a table row, where
    uv's own first line ("Using Python ... environment at: <path>") said nothing."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    text = " ".join(line for line in lines if not line.startswith(_UV_PROGRESS))
    text = re.sub(r"^(?:error:|×)\s*", "", text)
    cause = re.search(r"\bBecause (.+?)(?:, we can conclude that [^.]*\.|$)(.*)", text)
    if cause is not None:
        text = (cause[1] + (" " + cause[2].strip() if cause[2].strip() else "")).strip()
    return re.sub(r"\s+", " ", text)[:500] or "no message"


# uv's words for a request that got no answer after its retries; and the URL it fetched.
_UV_UNANSWERED = re.compile(r"Request failed after \d+ retr|error sending request|"
                            r"tcp connect error")
_UV_FETCHED = re.compile(r"Failed to fetch: `?([^\s`]+)")


class ProvisionError(Exception):
    """A build could not be installed; its probe is SKIP with this message as the reason."""


class IndexOutage(ProvisionError):
    """The index, or the host of its wheels, does not answer (an outage, a mirror
    restarting): no build can be installed now, so none is SKIP for it; the bisection stops
    unfinished, to be resumed."""


class Cancelled(ProvisionError):
    """The making of an environment was called off (a prefetch nobody needs any more)."""


# Every uv the bot runs: no Python downloads (environments use interpreters this machine has,
# and `find_python` must find what `uv venv` would), no user or project uv.toml.
UV_SETTINGS = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
# Beside torch in every environment unless told otherwise: reproducers use numpy, and
# torch.compile's C++ path imports setuptools on some builds.
DEFAULT_PACKAGES = ("setuptools", "numpy")


def _drain(stream: IO[str] | None, sink: list[str]) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, ValueError):  # closed under it: nothing more to read
            sink.append(stream.read())


def stop_if(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled")


@dataclass(frozen=True)
class Environment:
    """A ready environment: its interpreter and what the build reported about itself."""

    path: Path
    python: Path
    info: dict[str, object]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


NICE_BACKGROUND = 10  # the CPU priority of prefetch installs: below the reproducer's
DERIVE = (sys.executable, "-m", "bot.adapters.delta_install")  # a derivation's own process
SIZE_FILE = ".tbb-size"  # an environment's disk use, counted once when it is made


def env_size(path: Path) -> int:
    """The disk use of a finished environment: counted when it was made (an environment never
    changes after that), else counted now. Walking every environment's ~6,000 files on each
    install cost 0.1-0.3 s of every probe in the speed benchmark."""
    with contextlib.suppress(OSError, ValueError):
        return int((path / SIZE_FILE).read_text())
    return _tree_size(path)


def _missing(site: Path, record: Path) -> bool:
    """Whether a file that `record` (a wheel's RECORD, PEP 376: CSV, paths relative to
    site-packages) lists is not there; bytecode is left out, as Python writes it again."""
    try:
        rows = list(csv.reader(record.read_text(encoding="utf-8").splitlines()))
    except (OSError, ValueError, csv.Error):
        return True
    return any(row and not row[0].endswith(".pyc") and not (site / row[0]).exists()
               for row in rows)


def _tree_size(path: Path, most_links: int = 2) -> int:
    """What this environment adds to the disk.

    uv hard-links every file from its cache. A file of the build itself has two links (uv's
    copy and ours); a dependency's file has one more for every environment that has it (for a
    CUDA build that is the `nvidia-*` libraries, several GB). Counting those in every
    environment made the budget fill long before the disk did, so a file with more than two
    links is left to the environment that first had it. Once that one is evicted, the shared
    files (still in uv's cache) are counted nowhere: an error of one copy of the dependencies,
    against one per environment before. Copies (uv falls back to copying across filesystems)
    have one link each and are all counted, as they should be. An environment derived from
    another (`delta_install`) shares that one's files, so it counts only files of one link
    (`most_links=1`): those it unpacked itself.
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                if (st.st_dev, st.st_ino) not in seen and st.st_nlink <= most_links:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


@dataclass
class EnvironmentCache:
    """Environments under `root/envs`, shared safely by several bisections on one machine."""

    root: Path
    python: str = f"{sys.version_info.major}.{sys.version_info.minor}"
    index_url: str | None = None  # the variant index, for torch's pinned dependencies
    extra_packages: Sequence[str] = DEFAULT_PACKAGES
    # What the reproducer imports (named by whoever wrote it): installed after the build has
    # described itself, no package built from source, in environments of their own.
    issue_packages: Sequence[str] = ()
    packages_index: str | None = None  # where packages that torch's index lacks come from
    budget_bytes: int = 60 * 2**30
    uv: str = ""  # found on first use: environments of existing interpreters need no uv
    install_timeout_s: float = 1800.0
    keep_wheels: int = 6  # downloaded wheels kept after their environments are made
    # Make a build's environment from a made one's where that gives what uv would make
    # (`delta_install`); False installs every build with uv.
    derive: bool = True
    _uvs: Tally = field(default_factory=Tally, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                      compare=False)
    _deleting: set[Path] = field(default_factory=set, init=False, repr=False, compare=False)
    _swept: bool = field(default=False, init=False, repr=False, compare=False)
    # Environments whose record of torch's import is this cache's own (made or checked again
    # by it): a failed import recorded by an earlier bisection is checked again once.
    _described: set[Path] = field(default_factory=set, init=False, repr=False, compare=False)
    _whole: set[Path] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Absolute: an environment's interpreter is started from a run's own folder (the
        # sandbox's), where a relative path leads nowhere.
        self.root = Path(self.root).absolute()
        self._uvs.on_idle = self.tidy  # when this cache's last uv ends
        self.issue_packages = tuple(name for name in self.issue_packages
                                    if name not in self.extra_packages)

    @property
    def envs(self) -> Path:
        return self.root / "envs"

    def path_for(self, build: Build) -> Path:
        """Named by the build's version, what else it holds, and which file of that version
        it was made from (`wheel_identity`): two indexes that serve one version as different
        files (a mirror, a rebuilt wheel) shared one environment, made from whichever came
        first."""
        identity = wheel_identity(build.wheel)
        return self.envs / (f"{PREFIX}py{_safe(self.python)}-{_safe(build.version)}"
                            f"{self._kind()}{f'-w{identity}' if identity else ''}")

    def _kind(self) -> str:
        """Environments of one build differ by what else they hold, so a bisection never gets
        one made without the packages it asked for; the default set keeps the plain name."""
        extras = [sorted(self.extra_packages), sorted(self.issue_packages)]
        if extras == [sorted(DEFAULT_PACKAGES), []]:
            return ""
        return "-x" + hashlib.sha256(json.dumps(extras).encode()).hexdigest()[:10]

    def lock_for(self, build: Build) -> Path:
        """The lock its makers hold, across processes sharing the cache."""
        return self.envs / f"{PREFIX}{_safe(build.version)}.lock"

    def lookup(self, build: Build) -> Environment | None:
        """The ready environment of `build`, or None; a corrupt one is removed."""
        path = self.path_for(build)
        if not path.exists():
            return None
        try:
            info = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            info = None  # a damaged or missing marker: the entry cannot be trusted
        python = path / "bin" / "python"
        if not isinstance(info, dict) or not python.exists() or not self._is_whole(path):
            self._remove(path)
            return None
        try:
            os.utime(path / MARKER)  # least-recently-used order for eviction
        except FileNotFoundError:  # evicted since it was read (by another process): a miss
            return None
        return Environment(path, python, info)

    def _is_whole(self, path: Path) -> bool:
        """Every file its packages were installed with is there, checked once by this cache.
        Torch's files deleted by hand (an `rm -rf` of the cache stopped part way, a disk
        cleaner) left the interpreter and the marker: the environment was taken as ready,
        and its runs' "No module named 'torch'" made the build SKIP on every bisection."""
        if path in self._whole:
            return True
        records = list(path.glob("lib/python*/site-packages/*.dist-info/RECORD"))
        if not any(record.parent.name.startswith("torch-") for record in records) or any(
                _missing(record.parent.parent, record) for record in records):
            return False
        self._whole.add(path)
        return True

    def use_lock(self, path: Path) -> Path:
        """Held shared by every process running something in the environment at `path`."""
        return self.envs / f"{PREFIX}use-{path.name}.lock"

    @contextlib.contextmanager
    def using(self, build: Build, cancel: threading.Event | None = None) -> Iterator[Environment]:
        """`provision`, and keep the environment from eviction for the block: an install of
        another build, by this bisection or another one sharing the cache, never deletes an
        environment a reproducer is running in (it did when the budget held fewer
        environments than the probes running at once)."""
        if build.python is not None:
            yield self.existing(Path(build.python))  # never evicted: not one of ours
            return
        check = None if cancel is None else lambda: stop_if(cancel)
        while True:
            env = self.provision(build, cancel)
            # An eviction holds the lock exclusively while it removes: the environment was
            # either gone before the shared hold was had (make it again) or is kept for good.
            with file_lock(self.use_lock(env.path), fcntl.LOCK_SH, check=check):
                if (env.path / MARKER).exists():
                    yield env
                    return

    def provision(self, build: Build, cancel: threading.Event | None = None,
                  background: bool = False) -> Environment:
        """Get or make the environment of `build`; raises ProvisionError when it cannot.

        Setting `cancel` stops the making at the next step or download chunk, and kills a
        running uv (Cancelled); what was half made is removed, the cache is as before.
        A `background` install (a prefetch) runs uv at a lower CPU priority.
        """
        if build.python is not None:
            return self.existing(Path(build.python))
        if not self._swept:
            self._swept = True
            self.sweep()
        check = None if cancel is None else lambda: stop_if(cancel)
        with file_lock(self.lock_for(build), check=check):
            ready = self.lookup(build)
            if ready is not None and "import_error" in ready.info:
                ready = self._import_again(ready, cancel)
            if ready is not None:
                return ready
            self.evict(keep=self.path_for(build))
            made = self._create(build, cancel, background)
            self._described.add(made.path)
            return made

    def _import_again(self, env: Environment,
                      cancel: threading.Event | None) -> Environment | None:
        """An environment whose torch did not import when it was made, checked again once by
        this cache (called holding the build's lock): the failure is often this machine's
        state (LD_LIBRARY_PATH, a driver), not the build's, and was otherwise recorded with
        the environment for good: every later bisection SKIPped the build with the old error
        until the cache was deleted by hand. Its record is rewritten with what torch says
        now. One with the reproducer's packages is made again instead (None): importing torch
        there would run their code (.pth files, entry points) outside the sandbox."""
        if env.path in self._described:
            return env
        self._described.add(env.path)
        if env.info.get("issue_packages"):
            return None if self._remove_unused(env.path) else env
        info = describe(env.python, cancel)
        info.update({key: env.info[key] for key in ("wheel", "sha256", "installed_at")
                     if key in env.info})
        marker = env.path / MARKER
        fresh = marker.with_name(f"{MARKER}.{os.getpid()}-{threading.get_ident()}")
        try:
            fresh.write_text(json.dumps(info, indent=2))
            os.replace(fresh, marker)  # atomic: a reader sees the old record or the new one
        except OSError:
            with contextlib.suppress(OSError):
                fresh.unlink()
        return Environment(env.path, env.python, info)

    def existing(self, python: Path) -> Environment:
        """An interpreter used as it is: it is described, never modified or deleted."""
        if not python.exists():
            raise ProvisionError(f"{python}: no such interpreter")
        info = describe(python)
        return Environment(python.parent.parent, python, info)

    def _create(self, build: Build, cancel: threading.Event | None = None,
                background: bool = False) -> Environment:
        """A background make (a prefetch) runs uv `nice` and downloads behind the probes'."""
        nice = NICE_BACKGROUND if background else 0
        final = self.path_for(build)
        # The build in the name: `sweep` asks its lock whether a maker is still at work.
        staging = Path(tempfile.mkdtemp(prefix=f"{PREFIX}tmp-{_safe(build.version)}-",
                                        dir=self.envs))
        try:
            venv = staging / "venv"
            try:
                # The wheels kept for remaking environments: within a quarter of the
                # budget besides it (one CUDA nightly is GBs).
                store = WheelStore(self.root / "wheels", keep=self.keep_wheels,
                                   keep_bytes=self.budget_bytes // 4, background=background)
                with store.held(build, cancel) as (wheel, sha256):
                    derived = self._derive(build, wheel, sha256, venv, cancel, nice)
                    # Before the reproducer's packages: importing torch runs whatever an
                    # installed package hooks into it (.pth files, entry points), and this
                    # runs outside the sandbox.
                    info = self._describe_derived(build, venv, cancel) if derived else None
                    if info is None:
                        derived = None
                        self._uv(["venv", "--relocatable", "--python", self.python, str(venv)],
                                 cancel, nice)
                        self._install(venv / "bin" / "python", wheel, cancel, nice)
                        self._remember(venv, wheel)
                        stop_if(cancel)
                        info = describe(venv / "bin" / "python", cancel)
                    info.update(python_request=self.python, kind=self._kind())
                    if derived is not None:
                        info["derived_from"] = derived
                    if self.issue_packages:
                        config = (venv / "pyvenv.cfg").read_bytes()
                        self._install_issue_packages(venv / "bin" / "python", wheel, cancel, nice)
                        info["issue_packages"] = list(self.issue_packages)
                        if (venv / "pyvenv.cfg").read_bytes() != config:
                            # Its `home` names the folder the sandbox shows the interpreter
                            # from: a package's data files must not choose what is shown.
                            raise ProvisionError(
                                "a package the reproducer imports overwrote the environment's "
                                f"pyvenv.cfg ({', '.join(self.issue_packages)}): not installed")
            except Unanswered as exc:
                stop_if(cancel)
                raise self._outage(build, exc) from exc
            except DownloadError as exc:
                stop_if(cancel)
                raise ProvisionError(str(exc)) from exc
            stop_if(cancel)
            info.update(wheel=build.wheel.filename, sha256=sha256, installed_at=time.time())
            (venv / SIZE_FILE).write_text(str(_tree_size(venv, 1 if derived else 2)))
            (venv / MARKER).write_text(json.dumps(info, indent=2))
            if final.exists():  # a damaged entry that lookup could not clear
                self._remove(final)
            os.replace(venv, final)  # atomic: a half-made environment is never seen
            # Just made, so whole: its first lookup (the probe that prefetch made it for, on
            # the bisection's critical path) need not read its RECORD and stat every file.
            self._whole.add(final)
        except OSError as exc:
            raise ProvisionError(f"cannot make the environment of {build.version}: {exc}") from exc
        finally:
            self._discard(staging)
        return Environment(final, final / "bin" / "python", info)

    def _derive(self, build: Build, wheel: Path, sha256: str | None, venv: Path,
                cancel: threading.Event | None, nice: int) -> str | None:
        """Make `venv` from the made environment of the nearest build that allows it
        (`delta_install`): the version derived from, or None (nothing made) where no
        environment does, and uv installs the build. Not with the reproducer's packages:
        uv installs those into the environment, whose files the donor's share."""
        if self.issue_packages or not self.derive:
            return None
        why: Exception | None = None
        for donor, version in self._donors(build):
            held = try_lock(self.use_lock(donor), shared=True)  # kept from eviction meanwhile
            if held is None:
                continue
            try:
                with held:
                    if not (donor / MARKER).exists():
                        continue
                    self._run_derive(donor, wheel, venv, sha256, cancel, nice)
                return version
            except (NotDerivable, OSError) as exc:  # OSError: no hard links here, no space
                shutil.rmtree(venv, ignore_errors=True)
                why = exc
                if isinstance(exc, OSError):
                    break
        if why is not None:  # for whoever reads the log; uv makes the environment
            print(f"bisect-bot: {build.version} is installed by uv, not derived from a made "
                  f"environment: {why}", file=sys.stderr)
        return None

    def _describe_derived(self, build: Build, venv: Path,
                          cancel: threading.Event | None) -> dict[str, object] | None:
        """What a derived environment's torch says, or None (the environment removed) when
        it does not import there: uv then makes the environment, and a failure that is the
        build's own is recorded from that one, never from a donor's damage."""
        stop_if(cancel)
        try:
            info = describe(venv / "bin" / "python", cancel)
        except Cancelled:
            raise
        except ProvisionError as exc:
            info = {"import_error": str(exc)}
        if "import_error" not in info:
            return info
        shutil.rmtree(venv, ignore_errors=True)
        print(f"bisect-bot: {build.version}'s derived environment did not import torch "
              f"({info['import_error']}); uv installs it", file=sys.stderr)
        return None

    def _run_derive(self, donor: Path, wheel: Path, venv: Path, sha256: str | None,
                    cancel: threading.Event | None, nice: int) -> None:
        """`delta_install` in a process of its own (see its `main`): NotDerivable for
        anything but success, so that uv makes the environment; Cancelled when called off."""
        command = [*_niced(nice), *DERIVE, str(donor),
                   str(wheel), str(venv), "--leave-out", MARKER, "--leave-out", SIZE_FILE,
                   *(["--sha256", sha256] if sha256 else [])]
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) as process:
            try:
                with killed_on(cancel, process.kill):
                    _, errors = process.communicate(timeout=self.install_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise NotDerivable(f"timed out after {self.install_timeout_s:g} s") from None
        stop_if(cancel)
        if process.returncode != 0:
            said = errors.strip().splitlines()
            raise NotDerivable(said[-1] if process.returncode == 3 and said else
                               f"exit status {process.returncode}: {errors.strip()[-500:]}")

    def _donors(self, build: Build) -> list[tuple[Path, str]]:
        """Made environments this cache could derive `build`'s from, the nearest build first:
        the same interpreter and extra packages, no reproducer's packages, torch imported."""
        found: dict[str, Path] = {}
        for path in self.envs.glob(f"{PREFIX}py{_safe(self.python)}-*"):
            try:
                info = json.loads((path / MARKER).read_text())
            except (OSError, ValueError):
                continue
            if (not isinstance(info, dict) or info.get("python_request") != self.python
                    or info.get("kind") != self._kind() or info.get("issue_packages")
                    or "import_error" in info or not (path / MEMBERS).exists()
                    or not (path / "bin" / "python").exists() or not self._is_whole(path)):
                continue  # a damaged one (lookup removes it when its build is asked for)
            found[str(info.get("torch") or "")] = path
        return [(found[version], version) for version in nearest_first(build.version, found)]

    def _remember(self, venv: Path, wheel: Path) -> None:
        """Keep the build's listing beside its environment, for builds derived from it."""
        with contextlib.suppress(NotDerivable, OSError):
            remember(venv, read_wheel(wheel))

    def _outage(self, build: Build, failed: Unanswered) -> IndexOutage:
        """A wheel that got no answer after every retry (cannot connect, timed out, 5xx, cut
        short) is an outage of the server that holds it, not a fault of the build: a SKIP
        said the build was broken, kept it from the search for good, and could leave the
        answer "ambiguous" for a server down a minute. (A 404, a sha256 that differs, a file
        that is no wheel: those are the build's own, SKIP.) The index page is asked only to
        say which server: when it does not answer either, the whole index is down."""
        if self.index_url:
            try:
                WheelIndex(self.index_url, retry=RetryPolicy(attempts=2)).project_links()
            except UserError as exc:
                return IndexOutage(f"{self._server(self.index_url)} did not answer ({exc}), "
                                   f"nor did its wheel {build.wheel.filename}")
        host = urlsplit(build.wheel.url).netloc or build.wheel.url
        answers = f", though {self._server(self.index_url)} does" if self.index_url else ""
        return IndexOutage(f"the wheel host {host} did not answer{answers} ({failed})")

    def _server(self, url: str) -> str:
        """How an outage's message names the server of `url`: "the index <URL>" of the
        index it is under (torch's or the packages index, the nearer where one holds the
        other), else "the host <name>". One rule for the wheel's outage and uv's: uv's named
        the bare URL, which a reader could not tell for an index."""
        indexes = [i for i in (self.index_url, self.packages_index) if i and url.startswith(i)]
        if indexes:
            return f"the index {max(indexes, key=len)}"
        host = urlsplit(url).netloc
        return f"the host {host}" if host else "an index"

    def _discard(self, staging: Path) -> None:
        """A staging folder goes: at once when empty (the environment was made and moved
        out), else renamed to trash and deleted on a thread of its own. A half-made
        environment took up to 0.57 s to delete on the GPU host, and a stopped probe, or the
        prefetches called off as a bisection ends, made everything after them wait for it
        (1.3 s at the end of one benchmark bisection)."""
        try:
            staging.rmdir()
            return
        except OSError:
            pass
        trash = self.envs / f"{PREFIX}trash-{staging.name}-{os.getpid()}"
        try:
            os.replace(staging, trash)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            return
        self._delete_later([trash])

    def _install(self, python: Path, wheel: Path, cancel: threading.Event | None = None,
                 nice: int = 0, issue_packages: Sequence[str] = ()) -> None:
        """uv from its cache alone first: a build seen before needs no round trip to the index
        (revalidating ~25 pinned dependencies took ~8 s of a 12 s second environment).

        The build with the packages the user chose (`--with`, which may be a local project
        to build); or, given `issue_packages`, those beside the build, named again so that
        nothing replaces it, as wheels only (`--no-build`): no code of a package the issue
        named runs while it installs, outside the sandbox."""
        chosen = ["--no-build", *issue_packages] if issue_packages else self.extra_packages
        args = ["pip", "install", "--python", str(python), str(wheel), *chosen,
                *self._index_args()]
        try:
            self._uv([*args, "--offline"], cancel, nice)
        except Cancelled:
            raise
        except ProvisionError:
            try:
                self._uv(args, cancel, nice)
            except Cancelled:
                raise
            except ProvisionError as exc:
                raise self._uv_outage(exc) or exc from exc

    def _uv_outage(self, failed: ProvisionError) -> IndexOutage | None:
        """uv's failure as an outage when uv got no answer from an index (it retries a
        request only then: 5xx, a connection refused or reset, a timeout, and says "Request
        failed after N retries"): the dependencies or the reproducer's packages could not be
        fetched, which says nothing of the build (a SKIP each, the answer "cannot-test" or
        ambiguous for an index down a minute). A 404, an unsatisfiable requirement or a bad
        wheel are the build's own, as before."""
        said = str(failed)
        if not _UV_UNANSWERED.search(said):
            return None
        fetched = _UV_FETCHED.search(said)
        return IndexOutage(f"{self._server(fetched[1] if fetched else '')} did not answer "
                           f"while uv installed what goes beside the build ({said[:300]})")

    def _install_issue_packages(self, python: Path, wheel: Path,
                                cancel: threading.Event | None, nice: int) -> None:
        try:
            self._install(python, wheel, cancel, nice, self.issue_packages)
        except (Cancelled, IndexOutage):
            raise
        except ProvisionError as exc:
            where = f"torch's index or {self.packages_index}" if self.packages_index else \
                "torch's index (no packages index is set)"
            raise ProvisionError(f"{', '.join(self.issue_packages)}, which the reproducer "
                                 f"needs beside torch, did not install from {where}: {exc}"
                                 ) from exc

    def _release_archive(self, venv: Path) -> None:
        """Drop uv's unpacked copy of the torch build in `venv` from uv's cache, as the
        environment goes.

        uv unpacks a wheel into its cache and hard-links the files into the environment, and
        never deletes that copy: every build ever installed stayed in the cache (367 MB a
        build in the speed benchmark, 700 MB for a CPU nightly, far more for CUDA), outside
        the environment budget, after the environment was evicted. While the environment
        lives the two share their files, so the copy costs nothing; once it is evicted the
        copy is all that is left, so it goes too. Dependencies (shared by every build) stay
        cached. The pointer to the copy (a `.rev` file naming the archive) goes first,
        so uv unpacks the wheel again if it is ever needed instead of failing on a missing
        archive (uv 0.13: "failed to read directory archive-v0/...").
        """
        mine = next(venv.glob("lib/python*/site-packages/torch/__init__.py"), None)
        if mine is None or _derived(venv):
            return  # a derived environment's torch is partly its donor's: uv's copy is theirs
        uv_cache = self.root / "uv-cache"
        with contextlib.suppress(OSError):
            key = (mine.stat().st_dev, mine.stat().st_ino)
            for candidate in uv_cache.glob("archive-v*/*/torch/__init__.py"):
                found = candidate.stat()
                if (found.st_dev, found.st_ino) == key:
                    shutil.rmtree(self._unhook(candidate.parent.parent), ignore_errors=True)
                    return

    def _unhook(self, archive: Path) -> Path:
        """Take uv's unpacked copy of a build out of its cache: the pointer to it (a `.rev`
        file naming the archive) goes first, then the copy is renamed for deletion (returned;
        `sweep` claims it if the deletion is cut short)."""
        for pointer in (self.root / "uv-cache").glob("wheels-v*/*/*/torch/*.rev"):
            if archive.name.encode() in pointer.read_bytes():
                pointer.unlink()
        doomed = archive.with_name(f".tbb-drop-{archive.name}-{os.getpid()}")
        os.replace(archive, doomed)
        return doomed

    def _orphans(self) -> list[Path]:
        """uv's copies of torch builds that no environment links any more: their files have
        one link, the copy's own. An environment that was never finished leaves one (a bot
        killed mid-install, or an install called off after uv unpacked the build, once its
        half-made environment is deleted), and no eviction ever releases it. Only safe to
        act on while no uv runs: a uv links a copy into the environment just after it
        unpacks it."""
        found = []
        for init in (self.root / "uv-cache").glob("archive-v*/*/torch/__init__.py"):
            with contextlib.suppress(OSError):
                if init.stat().st_nlink == 1:
                    found.append(init.parent.parent)
        return found

    def _index_args(self) -> list[str]:
        """Torch's index first: whatever it has (torch's pinned dependencies, numpy) comes
        from there alone (uv's first-index strategy), the rest from the packages index."""
        if self.index_url and self.packages_index:
            return ["--index", self.index_url, "--default-index", self.packages_index]
        if self.index_url:
            return ["--index-url", self.index_url]
        return ["--default-index", self.packages_index] if self.packages_index else []

    def _uv(self, args: list[str], cancel: threading.Event | None = None,
            nice: int = 0) -> None:
        """Run uv; `nice` > 0 lowers its CPU priority (coreutils `nice`, so that every thread
        uv starts inherits it)."""
        env = {**os.environ, **UV_SETTINGS, "UV_CACHE_DIR": str(self.root / "uv-cache")}
        if not self.uv:
            try:
                self.uv = require_uv()
            except UserError as exc:  # the build is SKIP with it (a job with no check before)
                raise ProvisionError(str(exc)) from exc
        stop_if(cancel)
        with self._uvs.running():
            self._run_uv(args, env, cancel, nice)

    def tidy(self) -> list[Path]:
        """Remove what killed uv processes left half-unpacked in uv's cache, unless some uv
        is using the cache now; returns what it removed.

        uv unpacks a wheel into a `.tmp*` folder at its cache's top and renames it into
        place when it is done. A uv killed on the way (a probe stopped as moot, a prefetch
        called off at the end of a bisection, an install timeout, a bot killed at its job's
        time limit) leaves that folder behind, and nothing but `uv cache prune` removes it:
        up to a build's whole unpacked size each time (250 MB of a 368 MB build in the
        speed benchmark, GBs for a CUDA nightly), outside the environment budget, for as
        long as the runner keeps its cache. uv holds the cache's `.lock` shared while it
        runs (`uv cache prune` takes it exclusively); taken here without waiting, it says
        that no uv is unpacking, so every such folder is litter. Called whenever this
        cache's last running uv ends, so it also clears what another process left.
        """
        uv_cache = self.root / "uv-cache"
        try:
            names = os.listdir(uv_cache)  # the cache's top holds a few entries: cheap
        except OSError:
            return []
        if not any(name.startswith((".tmp", f"{PREFIX}litter-")) for name in names):
            return []
        removed: list[Path] = []
        # Under the lock only a rename, so a uv starting meanwhile waits microseconds.
        with contextlib.suppress(_InUse, OSError), file_lock(uv_cache / ".lock",
                                                              check=_in_use):
            for litter in uv_cache.glob(".tmp*"):
                os.replace(litter, uv_cache / f"{PREFIX}litter-{litter.name}-{os.getpid()}")
                removed.append(litter)
        self._delete_later(list(uv_cache.glob(f"{PREFIX}litter-*")))  # also a tidying cut short
        return removed

    def sweep(self) -> list[Path]:
        """Claim what processes killed on the way left in the cache, and delete it; returns
        what it claimed. A bisection killed mid-install (SIGKILL at a job's time limit, a
        lost runner) left its half-made environment for good: a `tbb-tmp-<build>-*` folder
        whose build's lock nobody holds now is one. Also environments and uv's copies of
        evicted builds that were being deleted (`tbb-trash-*`, `.tbb-drop-*`): nothing reads
        them again. (uv's own half-unpacked builds are `tidy`'s.) And, while no uv runs,
        uv's copies of builds that no environment links (`_orphans`). Each cache object
        sweeps once, as it first provisions: deleting during a bisection slowed its installs
        on the GPU host, whose disk is mounted with `discard` (docs/performance.md)."""
        claimed: list[Path] = []
        for staging in self.envs.glob(f"{PREFIX}tmp-*-*"):
            version = staging.name[len(f"{PREFIX}tmp-"):].rsplit("-", 1)[0]
            with contextlib.suppress(_InUse, OSError), file_lock(
                    self.envs / f"{PREFIX}{version}.lock", check=_in_use):
                os.replace(staging, self.envs / f"{PREFIX}trash-{staging.name}-{os.getpid()}")
        orphans = self._orphans()
        if orphans:
            with contextlib.suppress(_InUse, OSError), file_lock(
                    self.root / "uv-cache" / ".lock", check=_in_use):
                for archive in self._orphans():  # again, now that no uv can link one
                    self._unhook(archive)
        claimed += self.envs.glob(f"{PREFIX}trash-*")
        claimed += (self.root / "uv-cache").glob("archive-v*/.tbb-drop-*")
        self._delete_later(claimed)
        return claimed

    def _delete_later(self, paths: list[Path]) -> None:
        """Delete on a thread of its own, each path once in this process. Deleting takes a
        while (0.7 GB in 1.05 s on this project's VM), and the last uv often ends as a
        bisection does; the thread is no daemon, so the answer is not held up and the
        process still finishes the job before it exits."""
        with self._lock:
            doomed = [path for path in paths if path not in self._deleting]
            self._deleting.update(doomed)
        if doomed:
            threading.Thread(target=self._delete, args=(doomed,), name="tbb-delete").start()

    def _delete(self, doomed: list[Path]) -> None:
        for path in doomed:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            with self._lock:
                self._deleting.discard(path)

    def _run_uv(self, args: list[str], env: dict[str, str], cancel: threading.Event | None,
                nice: int) -> None:
        try:
            with subprocess.Popen([*_niced(nice), self.uv, *args], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) as process:
                # stderr is drained by a thread, so a chatty uv cannot block on a full pipe.
                errors: list[str] = []
                drain = threading.Thread(target=_drain, args=(process.stderr, errors),
                                         daemon=True)
                drain.start()
                timed_out = False
                try:
                    with killed_on(cancel, process.kill):
                        process.wait(timeout=self.install_timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    process.kill()
                    process.wait()
                drain.join(timeout=5)  # the pipe ends with the process
        except OSError as exc:
            raise ProvisionError(f"uv {args[0]} failed: {exc}") from exc
        stop_if(cancel)  # killed because it was called off
        if timed_out:
            raise ProvisionError(f"uv {args[0]} failed: timed out after "
                                 f"{self.install_timeout_s:g} s")
        if process.returncode != 0:
            raise ProvisionError(f"uv {args[0]} failed: {uv_error(''.join(errors))}")


    def evict(self, keep: Path | None = None, protect: Collection[Path] = (),
              room: int = 0) -> list[Path]:
        """Remove least-recently-used environments until the cache fits its budget with
        `room` bytes to spare. `keep` (the one about to be made) is neither removed nor
        counted; `protect` (what a bisection may still need) is counted, never removed."""
        removed: list[Path] = []
        with file_lock(self.envs / f"{PREFIX}evict.lock"):
            present = [p for p in self.envs.glob(f"{PREFIX}py*") if p.is_dir() and p != keep]
            sizes = {p: env_size(p) for p in present}
            total = sum(sizes.values())
            entries = [p for p in present if p not in protect]
            entries.sort(key=lambda p: _mtime(p / MARKER))
            for oldest in entries:
                if total + room <= self.budget_bytes:
                    break
                if self._remove_unused(oldest):  # one in use still counts, and stays
                    total -= sizes[oldest]
                    removed.append(oldest)
        return removed

    def _remove_unused(self, path: Path) -> bool:
        """Remove `path` unless something runs in it (`using`); whether it was removed."""
        lock = self.use_lock(path)
        held = try_lock(lock)
        if held is None:
            return False
        with held:  # letting go lets a waiting `using` see it gone
            self._remove(path)
            # Its lock file goes too (they stayed for good, one per environment ever made);
            # a `using` that waited on it takes the lock of the new file, finds no
            # environment and makes it again.
            delete_held(lock)
        return True

    def _remove(self, path: Path) -> None:
        if not path.name.startswith(PREFIX) or path.parent != self.envs:
            raise ValueError(f"refusing to delete {path}: not one of ours")
        self._whole.discard(path)
        self._release_archive(path)
        # Rename first, so a reader never sees a half-deleted environment as ready.
        doomed = self.envs / f"{PREFIX}trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}"
        with contextlib.suppress(OSError):
            os.replace(path, doomed)
            shutil.rmtree(doomed, ignore_errors=True)


def _niced(nice: int) -> list[str]:
    """What runs a command `nice` > 0 lower (coreutils `nice`, so every thread it starts
    inherits it); nothing where that is 0 or there is no `nice`."""
    return ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []


def _derived(venv: Path) -> bool:
    try:
        return "derived_from" in json.loads((venv / MARKER).read_text())
    except (OSError, ValueError, TypeError):
        return False


class _InUse(Exception):
    """uv's cache lock is held: some uv is at work in it."""


def _in_use() -> None:
    raise _InUse


def describe(python: Path, cancel: threading.Event | None = None) -> dict[str, object]:
    """What the torch in an interpreter says of itself (trusted code: torch's own import).

    Setting `cancel` kills it (a CUDA build's import takes 4-7 s) and raises Cancelled."""
    passed = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "HOME")
    env = {key: os.environ[key] for key in passed if key in os.environ}
    try:
        with subprocess.Popen([str(python), "-c", PROBE_CODE], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) as process:
            try:
                with killed_on(cancel, process.kill):
                    out, _ = process.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
        stop_if(cancel)
        info: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        raise ProvisionError(f"{python} does not start or says nothing: {exc}") from exc
    return info


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def find_python(version: str) -> str | None:
    """The interpreter uv would make an environment of Python `version` with, or None when it
    finds none here (uv's downloads are off, as for every environment)."""
    return _look_for_python(version, os.getcwd(), frozenset(os.environ.items()))[0]


def why_no_python(version: str) -> str:
    """What uv said when it found no Python `version`: its error line and cause (a broken
    pyenv shim first on the PATH stops its search), or "" when it only found none."""
    return _look_for_python(version, os.getcwd(), frozenset(os.environ.items()))[1]


@functools.lru_cache(maxsize=32)
def _look_for_python(version: str, cwd: str,
                     environ: frozenset[tuple[str, str]]) -> tuple[str | None, str]:
    """uv's answer, asked once per folder and environment: a bisection asks for its Python
    in the options' check, the sandbox's preflight and the syntax check, and uv takes over a
    second to answer where it inspects every interpreter on the PATH."""
    env = {**dict(environ), **UV_SETTINGS}
    uv = require_uv()  # a UserError: no bisection starts without a uv it can use
    try:
        found = subprocess.run([uv, "python", "find", "--no-project", version], env=env,
                               cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"uv python find did not answer ({exc})"
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.strip(), ""
    said = [line.strip() for line in found.stderr.splitlines() if line.strip()]
    if any(line.startswith("error: No interpreter found") for line in said):
        return None, ""
    kept = [line for line in said if line.startswith(("error:", "cause:"))][:2]
    return None, " ".join(kept)[:400]


# Compiles (never runs) the script with the environments' interpreter: its syntax is that
# Python's, which may be newer than the bot's own.
_COMPILE = """import json, sys
try:
    compile(open(sys.argv[1], "rb").read(), sys.argv[1], "exec")
except (SyntaxError, ValueError) as exc:
    line = getattr(exc, "lineno", None)
    print(json.dumps({"error": f"{type(exc).__name__}: {getattr(exc, 'msg', None) or exc}",
                      "line": line, "text": (getattr(exc, "text", None) or "").strip()}))
"""


def syntax_problem(script: Path, python: str) -> str | None:
    """Why Python `python` cannot even compile the script (a syntax error, a NUL byte), or
    None when it can or when no such interpreter is here to ask: then the first probe tells."""
    interpreter = find_python(python)
    if interpreter is None:
        return None
    try:
        checked = subprocess.run([interpreter, "-I", "-c", _COMPILE, str(script)],
                                 capture_output=True, text=True, timeout=60, check=False)
        said = json.loads(checked.stdout) if checked.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(said, dict):
        return None
    where = f" at line {said['line']}" if said.get("line") else ""
    text = f" ({said['text'][:120]})" if said.get("text") else ""
    return f"the reproducer is not valid Python {python}{where}{text}: {said['error']}"


# The oldest uv the bot can use: 0.4.23 added `uv pip install --index` and `--default-index`
# (uv's changelog, 0.4.23: "Add support for named and explicit indexes"; `uv pip install
# --help` of 0.4.22 lists neither). With an older uv every install failed ("unexpected
# argument '--index'") and every build was SKIP. The other flags used (`venv --relocatable`,
# `python find --no-project`, `pip install --offline --no-build`) are in 0.4.0.
MIN_UV = (0, 4, 23)
MIN_UV_TEXT = ".".join(map(str, MIN_UV))


def require_uv() -> str:
    """The uv the bot runs, once it is known to be there and new enough; else a UserError that
    says what to do. Its version is asked once per process."""
    found = _find_uv()
    if found is None:
        raise UserError("uv is not installed, and every build's environment is made with it: "
                        f"install it beside bisect-bot (`pip install 'uv>={MIN_UV_TEXT}'`) or "
                        "put it on PATH (https://docs.astral.sh/uv/getting-started/installation/)")
    said = _uv_version(found)
    if isinstance(said, str):
        raise UserError(f"uv at {found} does not run ({said}): reinstall it "
                        f"(`pip install --force-reinstall 'uv>={MIN_UV_TEXT}'`)")
    if said is not None and said < MIN_UV:
        raise UserError(f"uv {'.'.join(map(str, said))} at {found} is older than "
                        f"{MIN_UV_TEXT}, the first with the `uv pip install --index` the bot "
                        f"uses: upgrade it (`pip install -U 'uv>={MIN_UV_TEXT}'`, or "
                        "`uv self update` for a standalone install)")
    return found


@functools.cache
def _uv_version(uv: str) -> tuple[int, ...] | str | None:
    """uv's version (None when it says one this cannot read), or why it does not run."""
    try:
        said = subprocess.run([uv, "--version"], env={**os.environ, **UV_SETTINGS},
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if said.returncode != 0:
        return f"`uv --version` exited {said.returncode}: {said.stderr.strip()[:200]}"
    version = re.search(r"\buv (\d+)\.(\d+)\.(\d+)", said.stdout)
    return tuple(int(part) for part in version.groups()) if version else None


def _find_uv() -> str | None:
    """uv next to our interpreter (installed with the package), else on PATH."""
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if found:
        return found
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin  # the `uv` wheel ships its binary and this helper

        return str(find_uv_bin())
    return None
