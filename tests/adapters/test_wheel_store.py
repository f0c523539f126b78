"""The wheel store keeps a few wheels, and never deletes one that an install is reading."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from bot.adapters.environments import EnvironmentCache
from bot.adapters.wheel_index import WheelIndex
from bot.adapters.wheel_store import WheelStore
from bot.core.builds import Selection, select_builds
from tests.conftest import PYTHON

HOLD = """\
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from bot.adapters.wheel_store import WheelStore
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, select_builds
builds = select_builds(WheelIndex({url!r}).project_links(), Selection({tag!r}, variant="cpu"))
with WheelStore(Path({store!r}), keep=1).held(builds[0]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def builds(index_server):
    links = WheelIndex(index_server.variant_url("cpu")).project_links()
    return select_builds(links, Selection("cp" + PYTHON.replace(".", ""), variant="cpu"))


def wheels(root: Path) -> set[str]:
    """The kept wheels, in the folders of their files' identities too (`path_for`)."""
    return {p.name for p in root.rglob("*.whl")}


def test_trim_keeps_the_newest_wheels(tmp_path, builds):
    store = WheelStore(tmp_path, keep=2)
    for build in builds[:4]:
        store.fetch(build)
    assert wheels(tmp_path) == {b.wheel.filename for b in builds[2:4]}


def test_trim_keeps_the_wheels_within_their_bytes(tmp_path, builds):
    """A cache budget holds the kept wheels too: six CUDA nightlies would be many GB."""
    first = WheelStore(tmp_path / "probe").fetch(builds[0])[0].stat().st_size
    store = WheelStore(tmp_path / "kept", keep=6, keep_bytes=2 * first + first // 2)
    for build in builds[:5]:
        store.fetch(build)
    assert wheels(tmp_path / "kept") == {b.wheel.filename for b in builds[3:5]}


def test_a_held_wheel_outlives_the_trims_of_other_downloads(tmp_path, builds):
    store = WheelStore(tmp_path, keep=1)
    with store.held(builds[0]) as (path, sha256):
        for build in builds[1:4]:
            store.fetch(build)
        assert path.is_file() and len(sha256) == 64
    # Released: the next trim is free to take it, and the store is back to `keep`.
    assert wheels(tmp_path) == {builds[3].wheel.filename}
    assert [p.name for p in tmp_path.rglob("*") if ".pin-" in p.name] == []


def test_another_process_s_pin_is_respected_until_it_ends(tmp_path, builds, index_server):
    root = str(Path(__file__).resolve().parents[2])
    code = HOLD.format(root=root, url=index_server.variant_url("cpu"), store=str(tmp_path),
                       tag="cp" + PYTHON.replace(".", ""))
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        store = WheelStore(tmp_path, keep=1)
        for build in builds[1:3]:
            store.fetch(build)
        assert builds[0].wheel.filename in wheels(tmp_path)
    finally:
        holder.communicate("\n", timeout=30)
    store.trim()
    assert wheels(tmp_path) == {builds[2].wheel.filename}


def test_a_dead_process_s_pin_holds_nothing(tmp_path, builds):
    store = WheelStore(tmp_path, keep=1)
    store.fetch(builds[0])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    kept = store.path_for(builds[0])
    kept.with_name(f"{kept.name}.pin-{dead}-1").touch()
    store.fetch(builds[1])
    assert wheels(tmp_path) == {builds[1].wheel.filename}
    assert [p.name for p in tmp_path.rglob("*") if ".pin-" in p.name] == []
    assert not kept.parent.exists()  # the folder of its identity went with it


def test_more_installs_at_once_than_the_store_keeps_all_succeed(tmp_path, builds,
                                                                 index_server):
    """Twelve installs at once with six wheels kept lost four builds to "uv pip failed: ...
    Distribution not found" before wheels were held; here two are kept and six run."""
    cache = EnvironmentCache(root=tmp_path, python=PYTHON, extra_packages=(), keep_wheels=2,
                             index_url=index_server.variant_url("cpu"))
    errors: list[BaseException] = []

    def make(build) -> None:
        try:
            cache.provision(build)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(b,)) for b in builds[:6]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(cache.lookup(b) is not None for b in builds[:6])
    assert len(wheels(tmp_path / "wheels")) <= 2


def test_a_kept_wheel_that_is_no_longer_a_readable_zip_is_fetched_again(tmp_path, builds):
    """A kept wheel with its checksum file was trusted as it was on disk; one cut short
    (a disk that filled, a copy killed half way) failed every install of its build."""
    store = WheelStore(tmp_path)
    path, sha256 = store.fetch(builds[0])
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    again, again_sha256 = store.fetch(builds[0])
    assert again == path and again.read_bytes() == whole and again_sha256 == sha256
    assert zipfile.ZipFile(again).testzip() is None
    path.write_bytes(b"")  # an empty file is no wheel either
    assert store.fetch(builds[0])[0].read_bytes() == whole


def test_a_trim_passes_over_a_folder_another_install_drops_meanwhile(tmp_path) -> None:
    """An identity folder emptied and removed by another install (`_drop_folder`) while a
    trim listed the store made pathlib's glob raise FileNotFoundError naming the folder on
    Python 3.11, and that install's build was lost ("cannot make the environment of ...: No
    such file or directory: '.../wheels/tbb-w...'", seen once in a fresh-clone CI run of
    `test_more_installs_at_once_than_the_store_keeps_all_succeed`). Folders come and go here
    as fast as they can while trims run. A wheel pinned (`WheelStore.pin`) is never deleted
    by a trim, however the two interleave: the churner's own deletes would fail if it were."""
    store = WheelStore(tmp_path, keep=1)
    (tmp_path / "kept.whl").write_bytes(b"w")
    stop = threading.Event()

    churned: list[object] = []
    pins: list[Path] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                for n in range(20):
                    wheel = tmp_path / f"tbb-w{n:04d}" / "x.whl"
                    pins.append(store.pin(wheel))  # as an install does: held from now on
                    wheel.write_bytes(b"w")  # downloaded
                for pin in pins:  # the installs end: each drops its folder, as a trim would
                    pin.with_name("x.whl").unlink()
                    pin.unlink()
                    pin.parent.rmdir()
                pins.clear()
                churned.append(True)
        except BaseException as exc:  # noqa: BLE001 - reported below
            churned.append(exc)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    errors: list[BaseException] = []
    try:
        for _ in range(3000):
            try:
                store.trim()
            except OSError as exc:
                errors.append(exc)
                break
    finally:
        stop.set()
        churner.join()
    assert errors == []
    assert churned and all(c is True for c in churned), churned[-1:]
    assert (tmp_path / "kept.whl").exists()


def test_an_install_pins_its_wheel_while_a_trim_deletes(tmp_path, monkeypatch) -> None:
    """A trim holds the store's lock while it chooses what goes, not while it deletes: on
    the GPU host deleting a GB took 1.7 s, and every install's pin waits for that lock. A
    trash file an earlier trim left (killed on the way) goes with the next one."""
    store = WheelStore(tmp_path, keep=1)
    for name in ("old.whl", "new.whl"):
        (tmp_path / name).write_bytes(b"w")
    os.utime(tmp_path / "old.whl", (1, 1))  # the least recently used: it goes
    (tmp_path / "tbb-trash-1-left").write_bytes(b"w")  # a killed trim's
    deleting, release = threading.Event(), threading.Event()
    unlink = Path.unlink

    def slow_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.startswith("tbb-trash-"):
            deleting.set()
            assert release.wait(10), "never released"
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", slow_unlink)
    trimming = threading.Thread(target=store.trim)
    trimming.start()
    try:
        assert deleting.wait(10), "the trim deleted nothing"
        pinned: list[Path] = []
        pinning = threading.Thread(target=lambda: pinned.append(store.pin(tmp_path / "x.whl")))
        pinning.start()
        pinning.join(5)
        assert pinned, "the pin waited for the trim's deletions"
    finally:
        release.set()
        trimming.join()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")
                  and ".pin-" not in p.name) == ["new.whl"]
