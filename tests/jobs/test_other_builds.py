"""Builds that are not nightlies: published releases, and interpreters someone already set up."""

from __future__ import annotations

import json
import sys

from bot.adapters.environments import EnvironmentCache
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, select_builds
from bot.demo.synthetic_torch import package_files
from bot.demo.wheels import build_wheel
from bot.jobs.cli import main
from tests.fakes.mirror import IndexServer

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
BUG = {"subsystem": "inductor", "kind": "precision"}


def test_release_channel_bisects_releases(tmp_path, example_script, capsys):
    releases = ["2.10.0", "2.10.1", "2.11.0", "2.12.0", "2.12.1", "2.13.0"]
    for version in [*releases, "2.14.0.dev20260601"]:  # a dev build on the page is ignored
        bug = BUG if version >= "2.12.0" else None
        build_wheel(tmp_path / "mirror" / "rel", "torch", version,
                    package_files(version, "0" * 40, bug), f"{TAG}-{TAG}-manylinux_2_28_x86_64")
    report = tmp_path / "r.json"
    with IndexServer(tmp_path / "mirror") as server:
        code = main(["bisect", str(example_script), "--index", server.variant_url("rel"),
                     "--channel", "release", "--cache-dir", str(tmp_path / "cache"),
                     "--no-default-packages", "--good", "2.10.0", "--json", str(report)])
    data = json.loads(report.read_text())
    assert code == 0 and data["status"] == "found"
    assert (data["last_good"], data["first_bad"]) == ("2.11.0", "2.12.0")
    assert all(".dev" not in p["version"] for p in data["probes"])


def test_existing_interpreters_are_builds_in_the_order_given(index_server, cache_dir,
                                                           example_script, tmp_path, capsys):
    links = WheelIndex(index_server.variant_url("cpu")).project_links()
    builds = {b.version: b for b in select_builds(links, Selection(TAG, variant="cpu"))}
    cache = EnvironmentCache(cache_dir, python=PYTHON, extra_packages=())
    pythons = [cache.provision(builds[f"2.13.0.dev202605{day}+cpu"]).python
               for day in ("10", "18", "21", "28")]
    listing = tmp_path / "pythons.txt"
    listing.write_text("# one interpreter a line\n" + "\n".join(map(str, pythons[1:])) + "\n")
    report = tmp_path / "r.json"
    code = main(["bisect", str(example_script), "--builds-from-python", str(pythons[0]),
                 f"@{listing}", "--good", "2.13.0.dev20260510+cpu", "--json", str(report)])
    data = json.loads(report.read_text())
    assert code == 0 and data["first_bad"] == "2.13.0.dev20260521+cpu"
    assert data["last_good"] == "2.13.0.dev20260518+cpu"
    probed = next(p for p in json.loads(report.read_text())["probe_records"]
                  if p["version"] == data["first_bad"])
    assert probed["info"]["torch"] == data["first_bad"]
    assert "bisecting 4 builds of the given interpreters (2.13.0.dev20260510+cpu .. " \
        in capsys.readouterr().err


def test_an_interpreter_without_torch_is_a_clear_error(example_script, capsys):
    code = main(["bisect", str(example_script), "--builds-from-python", sys.executable])
    assert code == 2 and "torch does not import there" in capsys.readouterr().err
