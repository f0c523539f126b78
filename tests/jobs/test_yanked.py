"""Yanked nightlies (PEP 592): left out of a bisection and said so, unless named exactly.

The stand-in index marks the first bad nightly (05-21) as yanked, in its HTML page's
`data-yanked` and its PEP 691 JSON's `yanked`, as an index does for a withdrawn file.
"""

from __future__ import annotations

import json

import pytest
import requests

from bot.core.builds import parse_simple_html, parse_simple_json
from bot.core.results import EXIT_STATUS
from bot.demo.index_server import JSON_TYPE
from bot.jobs.cli import main
from tests.conftest import PYTHON
from tests.fakes.mirror import IndexServer

TAG = f"cp{PYTHON.replace('.', '')}"
YANKED = "2.13.0.dev20260521+cpu"
REASON = "broken upload"


@pytest.fixture(scope="module")
def yanking_server(mirror):
    with IndexServer(mirror.root) as served:
        name = f"torch-{YANKED}-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"
        served.yanked = {name: REASON}
        yield served


@pytest.mark.parametrize(("accept", "parse"), [("text/html", parse_simple_html),
                                               (JSON_TYPE, parse_simple_json)])
def test_both_page_forms_mark_the_file_yanked(yanking_server, accept, parse):
    page = f"{yanking_server.variant_url('cpu')}torch/"
    response = requests.get(page, headers={"Accept": accept}, timeout=10)
    assert response.headers["Content-Type"].startswith(accept)
    yanked = {link.filename: link.yanked for link in parse(response.text, page)
              if link.yanked is not None}
    assert yanked == {f"torch-{YANKED}-{TAG}-{TAG}-manylinux_2_28_x86_64.whl": REASON}


def _bisect(server, tmp_path, capsys, example_script, *ends):
    report = tmp_path / "r.json"
    code = main(["bisect", str(example_script), "--index", server.variant_url("cpu"),
                 "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                 "--no-triage", "--no-commit-tier", "--no-prefetch",
                 "--work-dir", str(tmp_path / "work"), "--json", str(report), *ends])
    err = capsys.readouterr().err
    data = json.loads(report.read_text())
    assert code == EXIT_STATUS[data["status"]], err[-2000:]
    return err, data


def test_a_yanked_nightly_is_left_out_and_said(yanking_server, tmp_path, capsys,
                                               example_script):
    err, data = _bisect(yanking_server, tmp_path, capsys, example_script,
                        "--good", "2026-05-19", "--bad", "2026-05-23")
    assert YANKED not in [build["version"] for build in data["builds"]]
    assert data["first_bad"] == "2.13.0.dev20260522+cpu"
    assert (f"left out 1 build the index marks as yanked (withdrawn; pip and uv skip them): "
            f"{YANKED} ({REASON}); name one exactly as the good or bad end") in err


def test_a_yanked_nightly_named_exactly_is_tested_and_said(yanking_server, tmp_path, capsys,
                                                           example_script):
    err, data = _bisect(yanking_server, tmp_path, capsys, example_script,
                        "--good", "2026-05-19", "--bad", YANKED)
    assert data["builds"][-1]["version"] == YANKED
    assert data["first_bad"] == YANKED
    assert (f"bad={YANKED}: {YANKED} is yanked on the index ({REASON}); testing it all the "
            "same, as it was named exactly") in err
    assert "left out" not in err
