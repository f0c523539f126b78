"""Wheel downloads cut mid-way are retried; a server that never answers is an outage, a 404 the build's SKIP."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
import requests

from bot.adapters.environments import EnvironmentCache, IndexOutage, ProvisionError
from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.adapters.wheel_store import DownloadError, WheelStore
from bot.core.builds import Selection, select_builds
from bot.demo.index_server import Fault, IndexServer
from tests.conftest import PYTHON
from tests.faults.helpers import BISECT_BOT, bisect_argv, counting_script, run_lines

FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.05)


@pytest.fixture
def flaky_index(mirror) -> Iterator[IndexServer]:
    with IndexServer(mirror.root) as server:
        yield server


@pytest.fixture
def newest_build(flaky_index):
    return _builds_of(flaky_index)[-1]


def test_a_cut_download_is_retried_then_kept_whole(flaky_index, newest_build, tmp_path, mirror):
    flaky_index.faults.append(Fault(".whl", truncate_to=1000, times=2))
    path, sha256 = WheelStore(tmp_path, retry=FAST).fetch(newest_build)
    assert flaky_index.faults[0].times == 0
    original = next(mirror.root.rglob(newest_build.wheel.filename))
    assert path.read_bytes() == original.read_bytes() and len(sha256) == 64
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("tbb-part-")] == []


def test_a_download_that_keeps_failing_names_the_url(flaky_index, newest_build, tmp_path):
    flaky_index.faults.append(Fault(".whl", truncate_to=1000, times=100))
    with pytest.raises(DownloadError, match=r"failed after 3 attempts: the body was cut short"
                       r".*http://127\.0\.0\.1"):
        WheelStore(tmp_path, retry=FAST).fetch(newest_build)
    assert list(tmp_path.iterdir()) == []


def test_a_build_that_cannot_be_downloaded_is_skipped(flaky_index, mirror, tmp_path):
    # 2026-05-24 is a build the search probes (see test_resume); its wheel is gone (a 404 is
    # the build's own; a 503 is the server's, test_a_wheel_host_that_keeps_answering_503_...).
    flaky_index.faults.append(Fault("dev20260524", status=404, times=1000))
    script, _ = counting_script(tmp_path)
    report = tmp_path / "r.json"
    argv = bisect_argv(script, flaky_index.variant_url("cpu"), tmp_path / "cache",
                       tmp_path / "h.db", report)
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    skipped = [p for p in data["probes"] if "dev20260524" in p["version"]]
    assert skipped and skipped[0]["verdict"] == "skip"
    assert "download" in skipped[0]["reason"] and "failed" in skipped[0]["reason"]
    assert data["first_bad"] == mirror.first_bad


def test_a_wheel_host_that_keeps_answering_503_is_an_outage_and_a_404_the_build_s(
        flaky_index, tmp_path):
    """The index pages answer, the wheels 503 after every retry: the install was a failure
    of the build (SKIP, "broken"), so a server out for a minute took builds from the search
    for good. It is an outage of the wheel host, as a 404 is still the build's own."""
    newest, older = _builds_of(flaky_index)[-1], _builds_of(flaky_index)[-2]
    flaky_index.faults += [Fault(newest.wheel.filename, status=503, times=1000),
                           Fault(older.wheel.filename, status=404, times=1000)]
    cache = EnvironmentCache(root=tmp_path, python=PYTHON, extra_packages=(),
                             index_url=flaky_index.variant_url("cpu"))
    with pytest.raises(IndexOutage) as outage:
        cache.provision(newest)
    host = f"127.0.0.1:{flaky_index._server.server_address[1]}"
    assert str(outage.value).startswith(f"the wheel host {host} did not answer, though the "
                                        f"index {flaky_index.variant_url('cpu')} does")
    assert "HTTP 503" in str(outage.value)
    with pytest.raises(ProvisionError) as gone:
        cache.provision(older)
    assert not isinstance(gone.value, IndexOutage) and "HTTP 404" in str(gone.value)
    assert cache.lookup(newest) is None and cache.lookup(older) is None


def _original(mirror, build) -> bytes:
    return next(mirror.root.rglob(build.wheel.filename)).read_bytes()


def _builds_of(server: IndexServer):
    links = WheelIndex(server.variant_url("cpu")).project_links()
    return select_builds(links, Selection("cp" + PYTHON.replace(".", ""), variant="cpu"))


def _headers(server: IndexServer) -> list[str]:
    return [header for _, header in server.ranges_asked]


def _names(server: IndexServer) -> list[str]:
    return [name for name, _ in server.ranges_asked]


def _asked(server: IndexServer) -> list[tuple[int, int]]:
    """The byte ranges the store asked for after its first-byte probe, end exclusive."""
    spans = [tuple(int(x) for x in r.removeprefix("bytes=").split("-"))
             for r in _headers(server) if r != "bytes=0-0"]
    return [(start, end + 1) for start, end in spans]


def test_a_wheel_comes_in_ranges_over_several_connections(flaky_index, newest_build,
                                                          tmp_path, mirror):
    whole = _original(mirror, newest_build)
    store = WheelStore(tmp_path, retry=FAST, part_bytes=1000, connections=3)
    path, sha256 = store.fetch(newest_build)
    assert path.read_bytes() == whole
    assert sha256 == hashlib.sha256(whole).hexdigest()
    expected = [(start, min(len(whole), start + 1000)) for start in range(0, len(whole), 1000)]
    assert len(expected) > 3
    assert sorted(_asked(flaky_index)) == expected  # every byte asked for once
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("tbb-part-")] == []


def test_a_cut_range_resumes_from_its_first_missing_byte(flaky_index, newest_build,
                                                         tmp_path, mirror):
    # The first fault meets the probe for byte 0, the second cuts the first range at 300.
    flaky_index.faults.append(Fault(".whl", truncate_to=300, times=2))
    store = WheelStore(tmp_path, retry=FAST, part_bytes=1000, connections=1)
    path, _ = store.fetch(newest_build)
    assert path.read_bytes() == _original(mirror, newest_build)
    asked = _asked(flaky_index)
    assert asked[:2] == [(0, 1000), (300, 1000)]  # resumed, not started again
    assert sum(end - start for start, end in asked) == path.stat().st_size + 700


def test_a_server_without_ranges_sends_the_whole_wheel(mirror, tmp_path):
    with IndexServer(mirror.root, ranges=False) as plain:
        build = _builds_of(plain)[-1]
        path, sha256 = WheelStore(tmp_path, retry=FAST, part_bytes=1000).fetch(build)
        assert plain.ranges_asked == []
    whole = _original(mirror, build)
    assert path.read_bytes() == whole and sha256 == hashlib.sha256(whole).hexdigest()


def test_a_range_answer_without_the_wheel_s_size_gets_the_whole_wheel(mirror, tmp_path):
    """A 206 for byte 0 that does not say how big the wheel is (`bytes 0-0/*`) must not be
    taken for the wheel: it was once stored as a 1-byte wheel. The whole body is asked for."""
    with IndexServer(mirror.root, range_sizes=False) as server:
        build = _builds_of(server)[-1]
        path, sha256 = WheelStore(tmp_path, retry=FAST, part_bytes=1000).fetch(build)
        assert _headers(server) == ["bytes=0-0"]
    whole = _original(mirror, build)
    assert path.read_bytes() == whole and sha256 == hashlib.sha256(whole).hexdigest()


def test_a_prefetch_download_gives_the_link_to_a_probe_s(mirror, tmp_path):
    """While a probe's download runs, a prefetch's download starts no new range (a network
    link has no `nice`); it finishes afterwards."""
    # 2,000 bytes a second: the prefetch's 14 ranges take about 2 s, so plenty are left when
    # the probe starts, even on a loaded machine.
    with IndexServer(mirror.root, rate_bytes_s=2_000) as server:
        builds = _builds_of(server)
        ahead, probe = builds[0].wheel.filename, builds[-1].wheel.filename
        background = WheelStore(tmp_path / "ahead", part_bytes=250, connections=1,
                                background=True)
        prefetch = threading.Thread(target=background.fetch, args=(builds[0],))
        prefetch.start()
        deadline = time.monotonic() + 30
        while _names(server).count(ahead) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        WheelStore(tmp_path / "probe", part_bytes=500, connections=1).fetch(builds[-1])
        prefetch.join(timeout=60)
        order = _names(server)
    first = order.index(probe)
    last = len(order) - 1 - order[::-1].index(probe)
    assert order[first:last + 1].count(probe) >= 7  # the probe's wheel came in ranges
    # At most one prefetch range starts inside: its check can just precede the probe's start.
    assert order[first:last + 1].count(ahead) <= 1, order
    assert order[last + 1:].count(ahead) >= 1  # and the prefetch went on afterwards
    whole = _original(mirror, builds[0])
    assert background.path_for(builds[0]).read_bytes() == whole


def test_a_range_that_keeps_failing_fails_the_wheel_and_leaves_nothing(flaky_index,
                                                                       newest_build, tmp_path):
    flaky_index.faults += [Fault(".whl", times=1), Fault(".whl", status=503, times=100)]
    store = WheelStore(tmp_path, retry=FAST, part_bytes=1000, connections=2)
    with pytest.raises(DownloadError, match=r"failed after 3 attempts: HTTP 503"):
        store.fetch(newest_build)
    assert list(tmp_path.iterdir()) == []


def test_a_cancelled_ranged_download_stops_and_leaves_nothing(flaky_index, newest_build,
                                                              tmp_path):
    # The probe goes through; every range then stalls 3 s before its first byte.
    flaky_index.faults += [Fault(".whl", times=1), Fault(".whl", delay_s=3.0, times=100)]
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    store = WheelStore(tmp_path, retry=FAST, part_bytes=1000, connections=2)
    with pytest.raises(DownloadError, match="cancelled"):
        store.fetch(newest_build, cancel)
    assert list(tmp_path.iterdir()) == []


def test_the_index_names_each_file_s_version_as_the_cdn_does(mirror):
    """ETag and Last-Modified on every file, and 304 to a request that names the version it
    has (S3 behind CloudFront, download.pytorch.org's CDN, does both); uv relies on them to
    take a wheel another uv just fetched from its cache instead of fetching it again."""
    with IndexServer(mirror.root) as server:
        url = _builds_of(server)[-1].wheel.url
        first = requests.get(url, timeout=30)
        etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
        same = requests.get(url, headers={"If-None-Match": etag}, timeout=30)
        since = requests.get(url, headers={"If-Modified-Since": modified}, timeout=30)
        other = requests.get(url, headers={"If-None-Match": '"another"'}, timeout=30)
        older = requests.get(url, headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"},
                             timeout=30)
        answered = list(server.not_modified)
    assert first.status_code == 200 and first.content[:2] == b"PK"
    assert (same.status_code, same.content, same.headers["ETag"]) == (304, b"", etag)
    assert since.status_code == 304
    assert other.status_code == 200 and other.content == first.content
    assert older.status_code == 200
    assert len(answered) == 2


def test_an_index_gone_mid_bisection_stops_it_unfinished_and_resumable(mirror, tmp_path):
    """The index stopped after the first probes (an outage, a mirror restarting): every
    download left failed, each build was SKIP ("could not be installed"), and the run ended
    "ambiguous", exit 3, finished, so a rerun started afresh. It stops unfinished (exit 7),
    saying the index did not answer, and a resume once it is back finds the first bad
    nightly without running a probe again."""
    from tests.faults.test_resume import _stored_versions

    script, runs = counting_script(tmp_path, sleep=0.5)
    db, report = tmp_path / "h.db", tmp_path / "r.json"
    server = IndexServer(mirror.root).start()
    url, port = server.variant_url("cpu"), server._server.server_address[1]
    argv = bisect_argv(script, url, tmp_path / "cache", db, report)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while len(_stored_versions(db)) < 2 and process.poll() is None:
            time.sleep(0.05)
    finally:
        server.stop()
    _, stderr = process.communicate(timeout=300)
    done_before = run_lines(runs)
    assert process.returncode == 7, stderr
    assert f"the index {url} did not answer" in stderr and "Traceback" not in stderr
    assert "bisect-bot resume" in stderr
    with sqlite3.connect(db) as conn:
        (status, state), = conn.execute("SELECT status, state FROM bisections").fetchall()
    assert status == "running"
    probes = json.loads(state)["probes"]
    assert len(probes) >= 2 and [p for p in probes if p["verdict"] == "skip"] == [], probes
    with IndexServer(mirror.root, port=port):
        resumed = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                                 text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(report.read_text())["first_bad"] == mirror.first_bad
    lines = run_lines(runs)
    assert done_before and lines[:len(done_before)] == done_before
    assert len(lines) == len(set(lines)), lines  # no probe ran twice
