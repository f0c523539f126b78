"""Wheel downloads cut mid-way are retried; one that never succeeds is SKIP and the search goes on."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.adapters.wheel_store import DownloadError, WheelStore
from bot.core.builds import Selection, select_builds
from bot.demo.index_server import Fault, IndexServer
from tests.conftest import PYTHON
from tests.faults.helpers import bisect_argv, counting_script

FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.05)


@pytest.fixture
def flaky_index(mirror) -> Iterator[IndexServer]:
    with IndexServer(mirror.root) as server:
        yield server


@pytest.fixture
def newest_build(flaky_index):
    links = WheelIndex(flaky_index.variant_url("cpu")).project_links()
    return select_builds(links, Selection("cp" + PYTHON.replace(".", ""), variant="cpu"))[-1]


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
    # 2026-05-24 is a build the search probes (see test_resume); it never downloads.
    flaky_index.faults.append(Fault("dev20260524", status=503, times=1000))
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
