"""Environments made by the real uv from the local mirror: atomic, cached, evicted, guarded."""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bot.adapters.environments import (
    MARKER,
    SIZE_FILE,
    Cancelled,
    EnvironmentCache,
    ProvisionError,
    _safe,
    describe,
    env_size,
)
from bot.adapters.locks import delete_held, file_lock, try_lock
from bot.adapters.wheel_index import WheelIndex
from bot.adapters.wheel_store import WheelStore
from bot.core.builds import Selection, WheelLink, select_builds
from bot.demo.index_server import Fault, IndexServer
from bot.demo.mirror import build_mirror
from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel
from tests.processes import gone

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(scope="module")
def builds(index_server):
    links = WheelIndex(index_server.variant_url("cpu")).project_links()
    return select_builds(links, Selection(TAG, variant="cpu"))


def make_cache(root: Path, **kwargs) -> EnvironmentCache:
    return EnvironmentCache(root=root, python=PYTHON, extra_packages=(), **kwargs)


def test_provision_records_what_the_build_is(tmp_path, builds, mirror):
    cache = make_cache(tmp_path)
    env = cache.provision(builds[0])
    assert env.python.exists() and env.path.name.startswith("tbb-")
    assert env.info["torch"] == builds[0].version
    assert len(str(env.info["git_version"])) == 40
    wheel = next((mirror.root / "cpu").glob(f"torch-{builds[0].version}-{TAG}-*.whl"))
    assert env.info["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    again = cache.provision(builds[0])
    assert again.path == env.path
    assert [p.name for p in cache.envs.iterdir() if "tmp" in p.name] == []


def test_a_corrupt_entry_is_rebuilt(tmp_path, builds):
    cache = make_cache(tmp_path)
    env = cache.provision(builds[1])
    (env.path / "bin" / "python").unlink()
    assert cache.lookup(builds[1]) is None
    rebuilt = cache.provision(builds[1])
    assert rebuilt.python.exists() and (rebuilt.path / MARKER).exists()


def test_an_entry_evicted_while_it_is_looked_up_is_a_miss(tmp_path, builds):
    """Another process evicts the environment between the read of its marker and the touch
    that keeps it recently used: that touch raised FileNotFoundError out of the probe."""
    cache = make_cache(tmp_path)
    path = cache.path_for(builds[2])
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").touch()
    os.mkfifo(path / MARKER)  # the marker is read as it is written ...

    def evict_while_read():
        with open(path / MARKER, "w") as marker:
            marker.write(json.dumps({"torch": builds[2].version}))
            (path / MARKER).unlink()  # ... and gone before the read ends

    evictor = threading.Thread(target=evict_while_read)
    evictor.start()
    try:
        assert cache.lookup(builds[2]) is None
    finally:
        evictor.join(timeout=5)


def test_a_failed_install_leaves_nothing_behind(tmp_path, builds):
    cache = make_cache(tmp_path)
    broken = replace(builds[2], wheel=WheelLink("torch-9.9.9-py3-none-any.whl",
                                                builds[2].wheel.url + ".missing"))
    with pytest.raises(ProvisionError, match="download of torch-9.9.9"):
        cache.provision(broken)
    gone(cache.envs, "tbb-trash-*")  # the half-made environment is deleted in the background
    assert [p for p in cache.envs.iterdir() if p.is_dir()] == []


def test_a_wheel_whose_checksum_differs_is_refused(tmp_path, builds):
    cache = make_cache(tmp_path)
    tampered = replace(builds[3], wheel=replace(builds[3].wheel, sha256="0" * 64))
    with pytest.raises(ProvisionError, match="sha256 differs"):
        cache.provision(tampered)


def test_eviction_keeps_the_cache_in_budget_and_deletes_only_its_own(tmp_path, builds):
    cache = make_cache(tmp_path, budget_bytes=1)
    foreign = cache.envs / "someone-elses"
    foreign.mkdir(parents=True)
    first = cache.provision(builds[4])
    second = cache.provision(builds[5])
    assert not first.path.exists(), "the least recently used environment goes first"
    assert second.path.exists() and foreign.exists()
    with pytest.raises(ValueError, match="not one of ours"):
        cache._remove(foreign)


def test_an_environment_in_use_is_never_evicted_by_another_install(tmp_path, builds):
    """Two bisections share the cache: the other one's installs (and this one's) used to
    delete the environment a reproducer was running in once the budget was full."""
    cache = make_cache(tmp_path, budget_bytes=1)
    other = make_cache(tmp_path, budget_bytes=1)  # another bisection, its own open files
    with cache.using(builds[4]) as running:
        evicted = other.provision(builds[5])
        cache.provision(builds[6])
        assert (running.path / MARKER).exists() and not evicted.path.exists()
    other.provision(builds[7])
    assert not running.path.exists(), "once nothing runs in it, it is evicted as before"


def test_an_environment_evicted_while_its_use_waited_is_made_again(tmp_path, builds):
    cache = make_cache(tmp_path, budget_bytes=1)
    first = cache.provision(builds[8])
    used: list[Path] = []

    def use() -> None:
        with cache.using(builds[8]) as env:
            used.append(env.path)

    # An eviction holds the use lock while it removes: the use waits, then finds it gone.
    with file_lock(cache.use_lock(first.path)):
        worker = threading.Thread(target=use)
        worker.start()
        time.sleep(0.3)
        assert not used, "the use waits for the eviction under way"
        cache._remove(first.path)
    worker.join(timeout=60)
    assert used == [first.path] and (first.path / MARKER).exists(), "it was made again"


def test_an_evicted_environment_takes_uv_s_copy_of_its_build_along(tmp_path, builds):
    """Eviction frees the disk: uv's cache used to keep every build ever installed."""
    cache = make_cache(tmp_path, budget_bytes=1)
    cache.provision(builds[6])
    kept = cache.provision(builds[7])  # evicts the first (a budget of one byte)
    archives = list((tmp_path / "uv-cache").glob("archive-v*/*/torch/__init__.py"))
    live = next(kept.path.glob("lib/python*/site-packages/torch/__init__.py"))
    # Only the live environment's copy is left, and it shares its files (no extra disk).
    assert [a.stat().st_ino for a in archives] == [live.stat().st_ino]
    again = cache.provision(builds[6])  # uv unpacks it again when it is needed
    assert again.info["torch"] == builds[6].version


def test_uv_s_copy_of_a_build_no_environment_links_is_taken_out(tmp_path, builds):
    """A bot killed after uv unpacked its build, but before the environment was finished,
    left uv's copy of the build behind, outside the budget, for good: the sweep deletes the
    half-made environment, and only eviction released such copies. Now the next sweep takes
    out any copy whose files no environment links; a live environment's copy stays. (uv
    makes both environments: one derived from the other has no copy in uv's cache.)"""
    cache = make_cache(tmp_path, derive=False)
    kept = cache.provision(builds[7])
    half_made = cache.provision(builds[6])
    shutil.rmtree(half_made.path)  # as the sweep deletes a killed bot's half-made environment
    uv_cache = tmp_path / "uv-cache"
    orphan = next(a.parent.parent for a in uv_cache.glob("archive-v*/*/torch/__init__.py")
                  if a.stat().st_nlink == 1)
    claimed = make_cache(tmp_path, derive=False).sweep()  # the next bisection's, as it starts
    assert [c.name.startswith(f".tbb-drop-{orphan.name}-") for c in claimed] == [True]
    gone(orphan.parent, ".tbb-drop-*")
    live = next(kept.path.glob("lib/python*/site-packages/torch/__init__.py"))
    left = list(uv_cache.glob("archive-v*/*/torch/__init__.py"))
    assert [a.stat().st_ino for a in left] == [live.stat().st_ino]
    assert all(orphan.name.encode() not in pointer.read_bytes()
               for pointer in uv_cache.glob("wheels-v*/*/*/torch/*.rev"))
    again = cache.provision(builds[6])  # uv unpacks it again when it is needed
    assert again.info["torch"] == builds[6].version and make_cache(tmp_path).sweep() == []


def test_cancel_kills_a_running_uv_at_once(tmp_path):
    """A prefetch called off mid-install stops within a poll, and its uv process is gone."""
    import subprocess
    import threading
    import time

    from bot.adapters.environments import Cancelled

    pidfile = tmp_path / "pid"
    slow = tmp_path / "uv"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    slow.chmod(0o755)
    cache = make_cache(tmp_path / "cache", uv=str(slow))
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        cache._uv(["pip", "install", "torch"], cancel)
    assert time.monotonic() - started < 5
    pid = int(pidfile.read_text())
    alive = subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode == 0
    assert not alive, "uv is still running"


def test_a_dependency_every_environment_links_counts_once(tmp_path):
    """uv hard-links a dependency's files from its cache into every environment: the budget
    counts them once, so that it fills when the disk does."""
    root = tmp_path / "mirror"
    build_mirror(root, start=dt.date(2026, 5, 1), days=3, missing=(), requires=("shareddep",))
    build_wheel(root / "cpu", "shareddep", "1.0",
                {"shareddep/__init__.py": "", "shareddep/blob.bin": os.urandom(2 << 20)})
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        builds = select_builds(links, Selection(TAG, variant="cpu"))
        cache = make_cache(tmp_path / "cache", index_url=server.variant_url("cpu"))
        made = [cache.provision(build) for build in builds]
    assert len(made) == 3
    counted = sum(env_size(env.path) for env in made)
    on_disk, seen = 0, set()
    for env in made:
        for path in env.path.rglob("*"):
            st = path.lstat()
            if path.is_file() and not path.is_symlink() and path.name not in (MARKER, SIZE_FILE) \
                    and st.st_ino not in seen:
                seen.add(st.st_ino)
                on_disk += st.st_blocks * 512
    # The 2 MB blob is on the disk once; it used to be counted three times.
    assert on_disk > 2 << 20 and counted == on_disk


def test_installs_started_together_fetch_each_dependency_once(tmp_path):
    """Three installs at once on a cold cache (round 1 with three workers) fetch a shared
    dependency once (GBs of `nvidia-*` wheels for a CUDA nightly): uv holds a lock per wheel
    in its cache, and the others take it from there. That relies on the index naming each
    file's version, as download.pytorch.org does; when the stand-in index did not, uv took
    its cached copy for stale and each install fetched the dependency again."""
    root = tmp_path / "mirror"
    build_mirror(root, start=dt.date(2026, 5, 1), days=3, missing=(), requires=("shareddep",))
    build_wheel(root / "cpu", "shareddep", "1.0", {"shareddep/__init__.py": "VALUE = 1\n"})
    # A slow link: the three installs are all fetching the dependency at the same time.
    slow = Fault("shareddep-1.0-py3-none-any.whl", delay_s=0.5, times=20)
    with IndexServer(root, faults=[slow]) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        builds = select_builds(links, Selection(TAG, variant="cpu"))
        cache = make_cache(tmp_path / "cache", index_url=server.variant_url("cpu"))
        made: dict[str, Path] = {}
        workers = [threading.Thread(target=lambda b=b: made.update({b.version: cache.provision(b).python}))
                   for b in builds]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        fetched = [path for path in server.requests if path.endswith("/shareddep-1.0-py3-none-any.whl")]
    assert sorted(made) == sorted(b.version for b in builds)
    assert len(fetched) == 1, fetched
    for python in made.values():
        shown = subprocess.run([str(python), "-c", "import shareddep; print(shareddep.VALUE)"],
                               capture_output=True, text=True, check=True)
        assert shown.stdout.strip() == "1"
    assert not list(cache.envs.glob("tbb-tmp-*"))


def test_a_dependency_the_index_lacks_is_reported_by_the_build_s_install(tmp_path):
    """Each build's install fails with uv's message naming the missing package (the probe is
    SKIP with it), and nothing is left half made."""
    root = tmp_path / "mirror"
    build_mirror(root, start=dt.date(2026, 5, 1), days=2, missing=(), requires=("missingdep",))
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        builds = select_builds(links, Selection(TAG, variant="cpu"))
        cache = make_cache(tmp_path / "cache", index_url=server.variant_url("cpu"))
        for build in builds:
            with pytest.raises(ProvisionError, match="missingdep"):
                cache.provision(build)
    gone(cache.envs, "tbb-trash-*")
    assert sorted(p.name for p in cache.envs.iterdir() if p.is_dir()) == []


def test_a_prefetch_s_download_waits_for_a_probe_s(tmp_path, mirror):
    """A background (prefetch) provision starts downloading only once the probe's download in
    this process is over: the link goes to what the round waits for."""
    with IndexServer(mirror.root, rate_bytes_s=2_000) as slow:
        links = WheelIndex(slow.variant_url("cpu")).project_links()
        found = select_builds(links, Selection(TAG, variant="cpu"))
        probe, ahead = found[-1], found[0]
        # In ranges of 500 bytes, one at a time: the probe's requests span its download.
        store = WheelStore(tmp_path / "probe", part_bytes=500, connections=1)
        probing = threading.Thread(target=store.fetch, args=(probe,))
        probing.start()
        deadline = time.monotonic() + 30
        while (all(name != probe.wheel.filename for name, _ in slow.ranges_asked)
               and time.monotonic() < deadline):
            time.sleep(0.01)
        cache = make_cache(tmp_path / "cache", index_url=slow.variant_url("cpu"))
        assert cache.provision(ahead, background=True).info["torch"] == ahead.version
        probing.join(timeout=60)
        order = [name for name, _ in slow.ranges_asked]
    last_of_probe = len(order) - 1 - order[::-1].index(probe.wheel.filename)
    assert order.index(ahead.wheel.filename) > last_of_probe, order


def test_a_cancel_gives_up_waiting_for_another_maker(tmp_path, builds):
    """A probe called off while another process (a second bisection, a prefetch) holds the
    build's lock stops waiting for it: Cancelled, and the holder is left to finish."""
    cache = make_cache(tmp_path)
    build = builds[0]
    cancel = threading.Event()
    raised: list[BaseException] = []

    def provision() -> None:
        try:
            cache.provision(build, cancel)
        except BaseException as exc:  # noqa: BLE001  (the test reads what was raised)
            raised.append(exc)

    with file_lock(cache.lock_for(build)):
        waiter = threading.Thread(target=provision)
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive()  # waiting for the lock
        cancel.set()
        waiter.join(timeout=5)
        assert not waiter.is_alive(), "the cancelled provision kept waiting for the lock"
    assert [type(exc) for exc in raised] == [Cancelled]
    assert cache.lookup(build) is None


def test_a_cancel_stops_describing_a_slow_interpreter(tmp_path):
    """The import check of a CUDA build takes seconds; a called-off probe does not wait it out."""
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 300\n")
    slow.chmod(0o755)
    cancel = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            describe(slow, cancel)
        except BaseException as exc:  # noqa: BLE001  (the test reads what was raised)
            raised.append(exc)

    describing = threading.Thread(target=run, daemon=True)
    describing.start()
    time.sleep(0.3)
    cancel.set()
    describing.join(timeout=10)
    assert not describing.is_alive(), "describe kept waiting for the interpreter"
    assert [type(exc) for exc in raised] == [Cancelled]


def test_a_uv_that_hangs_is_killed_at_the_install_deadline_or_on_cancel(tmp_path):
    hanging = tmp_path / "uv"
    hanging.write_text("#!/bin/sh\nexec sleep 300\n")
    hanging.chmod(0o755)
    cache = make_cache(tmp_path / "cache", install_timeout_s=0.5)
    cache.uv = str(hanging)
    with pytest.raises(ProvisionError, match="timed out after 0.5 s"):
        cache._uv(["venv"])
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    slow = make_cache(tmp_path / "slow", install_timeout_s=60)
    slow.uv = str(hanging)
    started = time.monotonic()
    with pytest.raises(Cancelled):
        slow._uv(["venv"], cancel)
    assert time.monotonic() - started < 30  # not the 60 s deadline


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    """An index of two builds of 12,000 small files each: uv takes long enough unpacking one
    (about a second here) to be caught, killed or paused half way."""
    from bot.demo.mirror import PLATFORM, fake_git_version
    from bot.demo.synthetic_torch import package_files

    root = tmp_path_factory.mktemp("many-files")
    for day in (1, 2):
        version = f"2.13.0.dev202605{day:02d}+cpu"
        files: dict[str, bytes | str] = dict(package_files(
            version, fake_git_version(dt.date(2026, 5, day)), None))
        files.update({f"torch/include/h{i // 500}/f{i}.h": f"// {i} {version}\n" * 8
                      for i in range(12_000)})
        build_wheel(root / "cpu", "torch", version, files, f"{TAG}-{TAG}-{PLATFORM}")
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        yield select_builds(links, Selection(TAG, variant="cpu"))


def _unpacking(uv_cache: Path, timeout: float = 60) -> Path:
    """uv's half-unpacked folder once it holds some of the build's files."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for folder in uv_cache.glob(".tmp*"):
            if any((folder / "torch" / "include").glob("h*")):
                return folder
        time.sleep(0.005)
    raise AssertionError("uv never started unpacking")


def _called_off_mid_unpack(cache: EnvironmentCache, build, timeout: float):
    """Provision `build` on a thread and call it off once uv is half way through unpacking;
    returns the thread (joined for up to `timeout` s), what it raised, uv's folder."""
    cancel = threading.Event()
    errors: list[BaseException] = []

    def provision() -> None:
        try:
            cache.provision(build, cancel)
        except BaseException as exc:  # noqa: BLE001 - the tests look at it
            errors.append(exc)

    worker = threading.Thread(target=provision)
    worker.start()
    half = _unpacking(cache.root / "uv-cache")
    cancel.set()
    worker.join(timeout=timeout)
    return worker, errors, half


def test_a_killed_install_leaves_nothing_half_unpacked_in_uv_s_cache(tmp_path, many_files):
    """A probe stopped or a prefetch called off kills uv mid-unpack; what it had unpacked
    (up to the whole build, GBs for a CUDA nightly) goes as the last uv ends."""
    cache = make_cache(tmp_path)
    _, errors, half = _called_off_mid_unpack(cache, many_files[0], timeout=60)
    assert [type(e) for e in errors] == [Cancelled]
    assert not half.exists(), "uv's half-unpacked build was left in its cache"
    assert list((tmp_path / "uv-cache").glob(".tmp*")) == []
    gone(tmp_path / "uv-cache", "tbb-litter-*")
    assert cache.provision(many_files[0]).info["torch"] == many_files[0].version


def test_what_a_running_uv_unpacks_is_not_litter(tmp_path, many_files):
    """Another process's uv, paused half way through unpacking, holds uv's cache lock: the
    tidying leaves its folder alone, and clears a dead one's once the cache is free."""
    import signal
    import subprocess

    cache = make_cache(tmp_path)
    cache.provision(many_files[0])  # the cache exists; a dead uv's leftovers are planted
    dead = tmp_path / "uv-cache" / ".tmpdead01"
    (dead / "torch").mkdir(parents=True)
    (dead / "torch" / "libtorch.so").write_bytes(b"\0" * 1024)
    cut = tmp_path / "uv-cache" / "tbb-litter-.tmpold-1"  # a tidying that died half way
    (cut / "torch").mkdir(parents=True)
    venv = tmp_path / "other"
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}
    uv = cache.uv
    subprocess.run([uv, "venv", "--python", PYTHON, str(venv)], env=env, check=True,
                   capture_output=True)
    wheel = WheelStore(tmp_path / "wheels").fetch(many_files[1])[0]
    other = subprocess.Popen([uv, "pip", "install", "--no-deps", "--python",
                              str(venv / "bin" / "python"), str(wheel)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        half = _unpacking(tmp_path / "uv-cache")
        os.kill(other.pid, signal.SIGSTOP)
        assert cache.tidy() == []
        assert half.exists() and dead.exists()
        gone(tmp_path / "uv-cache", "tbb-litter-*")  # what a tidying claimed needs no lock
    finally:
        os.kill(other.pid, signal.SIGCONT)
        _, err = other.communicate(timeout=60)
    assert other.returncode == 0, err
    assert cache.tidy() == [dead]
    assert not dead.exists()
    gone(tmp_path / "uv-cache", "tbb-litter-*")
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == many_files[1].version


def test_what_a_killed_bisection_left_is_swept_but_not_a_live_maker_s(tmp_path, many_files):
    """A bot SIGKILLed mid-install (a job's time limit, a lost runner) leaves its half-made
    environment and uv's half-unpacked build; the next cache to provision clears both,
    and leaves alone a build that another process is still making (it holds the lock)."""
    import signal
    import subprocess

    code = ("import sys; from pathlib import Path; from tests.adapters.test_environments import "
            "make_cache; from bot.core.builds import Build; import json\n"
            "make_cache(Path(sys.argv[1])).provision(Build.from_dict(json.loads(sys.argv[2])))")
    killed = subprocess.Popen([sys.executable, "-c", code, str(tmp_path),
                               json.dumps(many_files[0].to_dict())],
                              cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    try:
        _unpacking(tmp_path / "uv-cache")
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # the bot and its uv, as a cancelled job's are
        killed.wait()
    left = [p.name for p in (tmp_path / "envs").iterdir() if p.name.startswith("tbb-tmp-")]
    assert len(left) == 1 and left[0].startswith(f"tbb-tmp-{_safe(many_files[0].version)}-")
    # Another process making build 1 right now: its lock is held, its folder in use.
    live = tmp_path / "envs" / f"tbb-tmp-{_safe(many_files[1].version)}-live0001"
    live.mkdir()
    trash = tmp_path / "envs" / "tbb-trash-tbb-py3.11-gone-1-2"
    (trash / "lib").mkdir(parents=True)
    with file_lock(make_cache(tmp_path).lock_for(many_files[1])):
        env = make_cache(tmp_path).provision(many_files[0])
        gone(tmp_path / "uv-cache", "tbb-litter-*")
        gone(tmp_path / "envs", "tbb-trash-*")
        names = sorted(p.name for p in (tmp_path / "envs").iterdir() if p.is_dir())
        assert names == sorted([env.path.name, live.name])
    assert list((tmp_path / "uv-cache").glob(".tmp*")) == []
    assert env.info["torch"] == many_files[0].version


def test_a_called_off_install_does_not_wait_for_its_deletion(tmp_path, many_files,
                                                             monkeypatch):
    """Deleting a half-made environment (up to 0.57 s on the GPU host) happens on a thread
    of its own: held back here, and the called-off provision still returns at once."""
    release = threading.Event()
    delete = EnvironmentCache._delete

    def held(self, doomed):
        release.wait(30)
        delete(self, doomed)

    monkeypatch.setattr(EnvironmentCache, "_delete", held)
    cache = make_cache(tmp_path)
    worker, errors, _ = _called_off_mid_unpack(cache, many_files[1], timeout=10)
    try:
        assert not worker.is_alive(), "the provision waited for its deletion"
        assert [type(e) for e in errors] == [Cancelled]
        assert list(cache.envs.glob("tbb-tmp-*")) == []  # claimed at once, as trash
        assert list(cache.envs.glob("tbb-trash-*")), "nothing was left to delete later"
    finally:
        release.set()
    gone(cache.envs, "tbb-trash-*")
    gone(tmp_path / "uv-cache", "tbb-litter-*")


def test_uv_s_failure_is_told_by_its_cause_first():
    """A table row shows a reason's first words; uv's first line named the environment."""
    from bot.adapters.environments import uv_error

    stderr = ("Using Python 3.11.7 environment at: /cache/envs/tbb-tmp-x/venv\n"
              "  × No solution found when resolving dependencies:\n"
              "  ╰─▶ Because setuptools was not found in the package registry and you require "
              "setuptools, we can conclude that your requirements are unsatisfiable.\n")
    assert uv_error(stderr) == ("setuptools was not found in the package registry and you "
                                "require setuptools")
    assert uv_error("error: Failed to fetch: `http://x/t.whl`\n  Caused by: 404\n") == \
        "Failed to fetch: `http://x/t.whl` Caused by: 404"


# A torch whose import fails while LD_LIBRARY_PATH names a broken library folder, as a CUDA
# build's does when it points at a mismatched cuDNN.
FRAGILE = """import os
if "broken" in os.environ.get("LD_LIBRARY_PATH", ""):
    raise ImportError("libcudnn.so.9: undefined symbol: cudnnGetLibConfig")
"""


@pytest.fixture
def fragile_index(tmp_path):
    """An index of one torch build whose import depends on this machine's LD_LIBRARY_PATH,
    and a package a reproducer imports."""
    root = tmp_path / "mirror"
    version = "2.13.0.dev20260501+cpu"
    files = package_files(version, "0" * 40, None)
    files["torch/__init__.py"] = FRAGILE + files["torch/__init__.py"]
    build_wheel(root / "cpu", "torch", version, files, f"{TAG}-{TAG}-manylinux_2_28_x86_64")
    build_wheel(root / "cpu", "reprodep", "1.0", {"reprodep/__init__.py": ""})
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        yield server.variant_url("cpu"), select_builds(links, Selection(TAG, variant="cpu"))[0]


def test_a_failed_import_is_checked_again_by_the_next_bisection(tmp_path, fragile_index,
                                                               monkeypatch):
    """A build whose torch did not import was SKIPped with that error by every later
    bisection, even after the user fixed LD_LIBRARY_PATH, until the cache was deleted by
    hand: the failure was recorded with the environment for good."""
    index, build = fragile_index
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/broken/lib")
    maker = make_cache(tmp_path / "cache", index_url=index)
    first = maker.provision(build)
    assert "libcudnn.so.9" in str(first.info["import_error"])
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/fixed/lib")
    # A cache that made or checked the environment does not import torch again (a CUDA
    # build's import takes seconds, and a bisection uses an environment many times).
    assert maker.provision(build).info == first.info
    cache = make_cache(tmp_path / "cache", index_url=index)  # the next bisection's
    again = cache.provision(build)
    assert again.path == first.path and "import_error" not in again.info
    assert again.info["torch"] == build.version
    assert again.info["sha256"] == first.info["sha256"]  # the record of the install is kept
    assert "import_error" not in json.loads((again.path / MARKER).read_text())
    assert make_cache(tmp_path / "cache", index_url=index).lookup(build).info == again.info


def test_a_failed_import_beside_the_reproducer_s_packages_is_made_again(tmp_path,
                                                                        fragile_index,
                                                                        monkeypatch):
    """torch is never imported outside the sandbox with the reproducer's packages installed
    (their .pth files and entry points would run): such an environment is made again."""
    index, build = fragile_index
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/broken/lib")
    first = make_cache(tmp_path / "cache", index_url=index,
                       issue_packages=("reprodep",)).provision(build)
    assert "import_error" in first.info and first.info["issue_packages"] == ["reprodep"]
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    again = make_cache(tmp_path / "cache", index_url=index,
                       issue_packages=("reprodep",)).provision(build)
    assert "import_error" not in again.info and again.info["issue_packages"] == ["reprodep"]
    assert again.info["installed_at"] > first.info["installed_at"]


def test_a_wheel_cut_short_on_the_server_is_fetched_again_once_it_is_whole(tmp_path):
    """A partial upload, fixed later under the same name: the cut wheel was kept with its
    checksum and reused for good, and every install failed with uv's "unable to locate the
    end of central directory record"."""
    root = tmp_path / "mirror"
    build_mirror(root, start=dt.date(2026, 5, 1), days=2, missing=())
    wheel = sorted((root / "cpu").glob(f"torch-*-{TAG}-*.whl"))[0]
    whole = wheel.read_bytes()
    wheel.write_bytes(whole[: len(whole) // 2])
    with IndexServer(root) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        build = next(b for b in select_builds(links, Selection(TAG, variant="cpu"))
                     if b.wheel.filename == wheel.name)
        cache = make_cache(tmp_path / "cache", index_url=server.variant_url("cpu"))
        with pytest.raises(ProvisionError) as cut:
            cache.provision(build)
        wheel.write_bytes(whole)  # the upload is fixed
        env = cache.provision(build)
    assert env.info["torch"] == build.version
    assert env.info["sha256"] == hashlib.sha256(whole).hexdigest()
    assert "is not a readable wheel" in str(cut.value)


@pytest.mark.parametrize("hashes", [False, True], ids=["by-url", "by-sha256"])
def test_two_indexes_serving_one_version_as_different_files_get_their_own_environments(
        tmp_path, builds, hashes):
    """A mirror (or a rebuild) whose 05-21 nightly is another file under the same version:
    the environment was keyed by the version alone, so the second index's build got the
    first's environment, and torch said the first's commit."""
    other = build_mirror(tmp_path / "other", start=dt.date(2026, 5, 21), days=1,
                         python_tags=(TAG,), git_version_for=lambda _: "e" * 40)
    first = next(b for b in builds if b.version == "2.13.0.dev20260521+cpu")
    cache = make_cache(tmp_path / "cache")
    mine = cache.provision(first)
    with IndexServer(other.root, hashes=hashes) as server:
        links = WheelIndex(server.variant_url("cpu")).project_links()
        (second,) = select_builds(links, Selection(TAG, variant="cpu"))
        assert second.version == first.version and bool(second.wheel.sha256) == hashes
        theirs = cache.provision(second)
    assert theirs.info["git_version"] == "e" * 40
    assert mine.info["git_version"] != "e" * 40
    assert theirs.path != mine.path and cache.lookup(first) == mine


def test_an_evicted_environment_s_lock_file_goes_with_it(tmp_path, builds):
    """Lock files were never deleted: one for every environment ever made stayed in envs/."""
    cache = make_cache(tmp_path, budget_bytes=1)
    first = cache.provision(builds[9])
    with cache.using(builds[9]):
        assert cache.use_lock(first.path).exists()
    cache.provision(builds[10])
    assert not first.path.exists() and not cache.use_lock(first.path).exists()


def test_a_wait_on_a_lock_file_deleted_by_its_holder_locks_the_file_named_now(tmp_path):
    """The classic race of deleting lock files: a waiter that opened the file before its
    holder deleted it got the lock of a file no path names, and a third process took the
    lock of the new file at the path beside it (an eviction, of an environment in use)."""
    path = tmp_path / "tbb-use-x.lock"
    holder = try_lock(path)
    assert holder is not None
    inside, leave = threading.Event(), threading.Event()

    def wait_for_it() -> None:
        with file_lock(path, fcntl.LOCK_SH):
            inside.set()
            leave.wait(30)

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.3)  # the waiter has opened the file and waits on it
    delete_held(path)
    holder.close()
    assert inside.wait(30)
    assert try_lock(path) is None, "the waiter holds the lock of the file the path names"
    leave.set()
    waiter.join(30)
