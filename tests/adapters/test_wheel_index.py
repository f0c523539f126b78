"""The index adapter over real HTTP: pages, PEP 691 negotiation, metadata, retries, errors."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.core.builds import Selection, select_builds, unlisted_link
from bot.core.errors import UserError
from tests.fakes.mirror import Fault, IndexServer

FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.02, total_s=5)


def test_reads_the_mirror_page(index_server, mirror):
    links = WheelIndex(index_server.variant_url("cpu"), retry=FAST).project_links()
    builds = select_builds(links, Selection("cp311", variant="cpu"))
    assert [b.version for b in builds] == list(mirror.versions)


def test_metadata_without_the_wheel(index_server):
    index = WheelIndex(index_server.variant_url("cpu"), retry=FAST)
    link = index.project_links()[0]
    assert "Name: torch" in (index.core_metadata(link) or "")


def test_retries_a_server_error_then_succeeds(index_server):
    index_server.faults.append(Fault("/torch/", status=503, times=2))
    links = WheelIndex(index_server.variant_url("cpu"), retry=FAST).project_links()
    assert links and not index_server.faults[-1].times


def test_gives_up_with_a_clear_message(index_server):
    index_server.faults.append(Fault("/torch/", status=500, times=5))
    with pytest.raises(UserError, match="HTTP 500 .after 3 attempts"):
        WheelIndex(index_server.variant_url("cpu"), retry=FAST).project_links()
    index_server.faults.clear()


def test_a_missing_variant_is_a_user_error(index_server):
    with pytest.raises(UserError, match="no page for 'torch'"):
        WheelIndex(index_server.variant_url("cu999"), retry=FAST).project_links()


def test_unreachable_index_is_a_user_error():
    with pytest.raises(UserError, match="cannot read http://127.0.0.1:9/"):
        WheelIndex("http://127.0.0.1:9/whl/nightly/cpu", retry=FAST, timeout_s=1).project_links()


def test_a_file_the_page_no_longer_lists_is_found_by_its_url(mirror, tmp_path):
    """The stand-in lists only the newest versions, as the nightly index lists its newest 60."""
    with IndexServer(mirror.root, listed=5) as server:
        index = WheelIndex(server.variant_url("cpu"), retry=FAST)
        listed = index.project_links()
        builds = select_builds(listed, Selection("cp311", variant="cpu"))
        assert [b.version for b in builds] == list(mirror.versions[-5:])
        older = unlisted_link(builds[0], "2.13.0", dt.date(2026, 5, 2))
        gone = unlisted_link(builds[0], "2.13.0", dt.date(2026, 5, 9))  # never published
        deleted = unlisted_link(builds[0], "2.13.0", dt.date(2026, 5, 3))
        server.faults.append(Fault("20260502", status=503, times=1))  # retried, then there
        server.faults.append(Fault("20260503", status=403, times=1))  # S3's "not for you"
        assert index.present([older, gone, deleted, builds[0].wheel]) == [True, False, False,
                                                                         True]
        assert older.url == server.variant_url("cpu") + (
            "torch-2.13.0.dev20260502%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl")
        assert server.requests.count(f"/whl/nightly/cpu/{older.filename}") == 2
