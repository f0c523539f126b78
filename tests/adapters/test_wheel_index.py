"""The index adapter over real HTTP: pages, PEP 691 negotiation, metadata, retries, errors."""

from __future__ import annotations

import pytest

from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.core.builds import Selection, select_builds
from bot.core.errors import UserError
from tests.fakes.mirror import Fault

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
