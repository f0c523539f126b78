"""Whole bisections over a damaged or cramped environment cache still reach the right answer."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.faults.helpers import bisect_argv, counting_script


def _bisect(tmp_path: Path, url: str, cache: Path, name: str, *extra: str) -> dict:
    script, _ = counting_script(tmp_path)
    report = tmp_path / f"{name}.json"
    done = subprocess.run(bisect_argv(script, url, cache, tmp_path / f"{name}.db", report,
                                      *extra), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    return json.loads(report.read_text())


def test_a_corrupted_cache_entry_is_rebuilt_by_the_next_bisection(index_server, tmp_path):
    cache = tmp_path / "cache"
    url = index_server.variant_url("cpu")
    first = _bisect(tmp_path, url, cache, "first")
    envs = sorted((cache / "envs").glob("tbb-py*"))
    assert envs and first["first_bad"] == "2.13.0.dev20260521+cpu"
    for env in envs:  # every environment damaged a different way
        if "0521_cpu" in env.name:  # named tbb-py3.X-<version, + as _>-w<wheel>
            (env / "bin" / "python").unlink()
        else:
            (env / ".tbb-env.json").write_text("{not json")
    second = _bisect(tmp_path, url, cache, "second")
    assert {k: second[k] for k in ("status", "first_bad", "last_good")} == {
        k: first[k] for k in ("status", "first_bad", "last_good")}
    assert all(p["verdict"] != "skip" for p in second["probes"])
    rebuilt = [e for e in sorted((cache / "envs").glob("tbb-py*"))]
    assert all((e / "bin" / "python").exists() for e in rebuilt)


def test_an_environment_half_deleted_by_hand_is_made_again_by_the_next_bisection(
        index_server, tmp_path):
    """An `rm -rf` of the cache stopped part way (or a disk cleaner) took torch's files but
    left the interpreter and the marker: the environment was taken as ready, its runs failed
    with "No module named 'torch'", read as a build too old for the script (SKIP), and the
    answer was `ambiguous` instead of the first bad nightly, on every bisection after."""
    cache = tmp_path / "cache"
    url = index_server.variant_url("cpu")
    first = _bisect(tmp_path, url, cache, "first")
    envs = sorted((cache / "envs").glob("tbb-py*"))
    assert envs and first["first_bad"] == "2.13.0.dev20260521+cpu"
    for number, env in enumerate(envs):  # torch's package gone, or only one of its files
        torch = next(env.glob("lib/python*/site-packages/torch"))
        if number % 2:
            shutil.rmtree(torch)
        else:
            (torch / "__init__.py").unlink()
    second = _bisect(tmp_path, url, cache, "second")
    assert {k: second[k] for k in ("status", "first_bad", "last_good")} == {
        k: first[k] for k in ("status", "first_bad", "last_good")}
    assert all(p["verdict"] != "skip" for p in second["probes"]), second["probes"]


def test_a_budget_smaller_than_two_environments_still_finishes(index_server, tmp_path):
    cache = tmp_path / "cache"
    data = _bisect(tmp_path, index_server.variant_url("cpu"), cache, "small",
                   "--cache-budget-gb", "0.000001")
    assert data["status"] == "found" and data["first_bad"] == "2.13.0.dev20260521+cpu"
    assert len(data["probes"]) >= 4
    # Older environments were evicted as newer ones were made: never the whole window on disk.
    assert len(list((cache / "envs").glob("tbb-py*"))) <= 2
