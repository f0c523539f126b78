"""The index misbehaves (500s, a stall, a cut page): the bisection completes or says why in a line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from bot.adapters.wheel_index import RetryPolicy, WheelIndex
from bot.core.errors import UserError
from bot.demo.index_server import Fault, IndexServer
from tests.faults.helpers import bisect_argv, counting_script


@pytest.fixture
def flaky_index(mirror) -> Iterator[IndexServer]:
    """The session's mirror behind a server of its own, so its faults touch no other test."""
    with IndexServer(mirror.root) as server:
        yield server


def _bisect(server, cache_dir, tmp_path):
    script, _ = counting_script(tmp_path)
    report = tmp_path / "r.json"
    argv = bisect_argv(script, server.variant_url("cpu"), cache_dir, tmp_path / "h.db", report)
    done = subprocess.run(argv, capture_output=True, text=True)
    return done, report


@pytest.mark.parametrize("fault", [Fault("/torch/", status=500, times=2),
                                   Fault("/torch/", truncate_to=200, times=1)],
                         ids=["500-twice", "cut-page"])
def test_the_bisection_completes_despite_the_fault(fault, flaky_index, mirror, cache_dir,
                                                   tmp_path):
    flaky_index.faults.append(fault)
    done, report = _bisect(flaky_index, cache_dir, tmp_path)
    assert done.returncode == 0, done.stderr
    assert fault.times == 0, "the fault was never hit"
    assert json.loads(report.read_text())["first_bad"] == mirror.first_bad


def test_an_index_that_keeps_failing_is_one_clear_line(flaky_index, cache_dir, tmp_path):
    flaky_index.faults.append(Fault("/torch/", status=500, times=100))
    done, _ = _bisect(flaky_index, cache_dir, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "cannot read" in done.stderr and "HTTP 500" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_stalled_page_is_retried(flaky_index):
    flaky_index.faults.append(Fault("/torch/", delay_s=2.0, times=1))
    index = WheelIndex(flaky_index.variant_url("cpu"), timeout_s=0.5,
                       retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=0.05))
    assert index.project_links()
    assert flaky_index.faults[0].times == 0


@pytest.mark.parametrize("where", ["file://{folder}", "{folder}"])
def test_a_local_folder_as_the_index_is_refused_at_once_saying_what_to_do(
        where, mirror, cache_dir, tmp_path):
    """requests reads no file:// URL: it was tried 4 times with backoff, then "cannot read
    file:///...: InvalidSchema (after 4 attempts)", which said neither why nor what to do."""
    script, _ = counting_script(tmp_path)
    index = where.format(folder=mirror.root / "cpu")
    argv = bisect_argv(script, index, cache_dir, tmp_path / "h.db", tmp_path / "r.json")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bisect-bot: error: cannot read the index {index}: indexes are read over http(s) "
        "only; for a folder of wheels, put them in FOLDER/torch/, serve it with `python -m "
        "http.server --bind 127.0.0.1 --directory FOLDER 8000` and give "
        "http://127.0.0.1:8000/"]


def test_a_url_no_retry_can_mend_is_not_retried():
    slept: list[float] = []
    with pytest.raises(UserError, match="cannot read the index: Invalid URL .http:/torch/.: No host supplied"):
        WheelIndex("http://", sleep=slept.append).project_links()
    assert slept == []
