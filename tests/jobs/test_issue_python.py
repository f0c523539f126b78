"""The Python of the issue's environment makes the environments, where it can.

Dynamo's bytecode handling differs from one Python to the next, so a reproducer can fail on
the reporter's Python only. collect_env's "Python version: X.Y.Z" names it. Locally it is
taken when uv finds that interpreter here; on GitHub the plan job names it and the GPU jobs
set it up (tests/test_workflows.py checks the workflow). Real uv, real HTTP, real interpreters.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest

from bot.jobs.cli import main
from tests.conftest import PYTHON
from tests.fakes.mirror import IndexServer, build_mirror
from tests.jobs.github_helpers import Jobs, comment_event, issue_body, labeled_event, sticky
from tests.jobs.test_rounds import outputs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "example_issue.md"
WINDOW = ["--good", "2026-05-19", "--bad", "2026-05-22"]  # 4 builds; 05-21 is the first bad
REPORTED = "Python version: 3.11.7"  # what examples/example_issue.md says


def _other_python() -> tuple[str, Path]:
    """A Python X.Y besides this one, and the folder that holds it (put first on PATH, uv
    finds it there)."""
    for version in ("3.12", "3.13", "3.10"):
        if version == PYTHON:
            continue
        homes = [*sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin")),
                 Path("/usr/bin"), Path("/usr/local/bin")]
        for home in homes:
            python = home / f"python{version}"
            if python.exists() and subprocess.run([python, "-c", "pass"],
                                                  check=False).returncode == 0:
                return version, home
    pytest.skip("needs a second Python (3.10, 3.12 or 3.13) besides the one running the tests")


@pytest.fixture
def other(monkeypatch):
    version, home = _other_python()
    monkeypatch.setenv("PATH", f"{home}{os.pathsep}{os.environ['PATH']}")
    return version


def _issue(tmp_path: Path, python: str) -> Path:
    issue = tmp_path / "issue.md"
    text = EXAMPLE.read_text()
    assert REPORTED in text
    issue.write_text(text.replace(REPORTED, f"Python version: {python}.1"))
    return issue


def _bisect(tmp_path, capsys, index_url, cache_dir, *extra):
    report = tmp_path / "report.json"
    code = main(["bisect", str(_issue(tmp_path, extra[0])), "--index", index_url,
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--no-triage",
                 "--work-dir", str(tmp_path / "work"), "--json", str(report), *WINDOW,
                 *extra[1:]])
    err = capsys.readouterr().err
    assert code == 0, err
    data = json.loads(report.read_text())
    pythons = {record["info"]["python"].rsplit(".", 1)[0] for record in data["probe_records"]}
    return data, pythons, err


def test_the_issue_s_python_makes_the_environments(other, index_server, cache_dir, mirror,
                                                    tmp_path, capsys):
    data, pythons, err = _bisect(tmp_path, capsys, index_server.variant_url("cpu"), cache_dir,
                                 other)
    assert f"Python {other}, as the issue's environment reports" in err
    assert data["first_bad"] == mirror.first_bad
    assert data["options"]["python"] == other and pythons == {other}
    tag = f"-cp{other.replace('.', '')}-"
    assert all(tag in record["info"]["wheel"] for record in data["probe_records"])


def test_python_given_wins_over_the_issue_s(other, index_server, cache_dir, tmp_path, capsys):
    data, pythons, err = _bisect(tmp_path, capsys, index_server.variant_url("cpu"), cache_dir,
                                 other, "--python", PYTHON)
    assert data["options"]["python"] == PYTHON and pythons == {PYTHON}
    assert "issue's environment" not in err


def test_a_python_uv_does_not_find_gives_way_to_this_one(index_server, cache_dir, tmp_path,
                                                         capsys):
    # 3.14 is one nightlies are built for, and no interpreter of it is installed here.
    data, pythons, err = _bisect(tmp_path, capsys, index_server.variant_url("cpu"), cache_dir,
                                 "3.14")
    assert f"Python 3.14, which uv does not find here; bisecting with {PYTHON}" in err
    assert data["options"]["python"] == PYTHON and pythons == {PYTHON}


def test_a_python_nightlies_are_not_built_for_gives_way_and_says_so(index_server, cache_dir,
                                                                   tmp_path, capsys):
    data, pythons, err = _bisect(tmp_path, capsys, index_server.variant_url("cpu"), cache_dir,
                                 "3.9")
    assert "Python 3.9, which nightlies are not built for (3.10 to 3.14); bisecting with " \
        f"{PYTHON}" in err
    assert pythons == {PYTHON}


@pytest.fixture(scope="module")
def one_python_server(tmp_path_factory):
    """An index whose nightlies are built for the tests' Python only."""
    tag = f"cp{PYTHON.replace('.', '')}"
    root = tmp_path_factory.mktemp("one-python")
    build_mirror(root, start=dt.date(2026, 5, 18), days=6, missing=(), python_tags=(tag,))
    with IndexServer(root) as server:
        yield server


def test_a_python_without_builds_gives_way_to_this_one(other, one_python_server, cache_dir,
                                                       tmp_path, capsys):
    data, pythons, err = _bisect(tmp_path, capsys, one_python_server.variant_url("cpu"),
                                 cache_dir, other)
    assert f"no builds for the issue's Python {other}; bisecting with {PYTHON}" in err
    assert data["options"]["python"] == PYTHON and pythons == {PYTHON}
    assert data["first_bad"] == "2.13.0.dev20260521+cpu"


def _body(example_script, python):
    return issue_body(example_script.read_text()) + f"\nPython version: {python}.1 (main)\n"


def test_the_plan_job_names_the_issue_s_python_and_the_run_job_uses_it(
        other, tmp_path, github_server, github_repo, monkeypatch, index_server, cache_dir,
        mirror, example_script):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled cumsum is off", _body(example_script, other))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(
        issue.number, "@torch-bisect-bot bisect good=2026-05-19 bad=2026-05-22"))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["settings"]["python"] == other == plan["settings"]["issue_python"]
    assert outputs(jobs.output)["python"] == other  # what the GPU jobs set up
    assert f"| Python | `{other}` (the issue's environment) |" in sticky(issue)

    done = jobs.run(cache_dir, "--no-triage")
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["first_bad"] == mirror.first_bad
    assert {r["info"]["python"].rsplit(".", 1)[0] for r in outcome["probe_records"]} == {other}


def test_the_command_s_python_wins_and_a_python_without_builds_gives_way(
        tmp_path, github_server, github_repo, monkeypatch, index_server, one_python_server,
        example_script):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("t", _body(example_script, "3.12"))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(
        issue.number, f"@torch-bisect-bot bisect python={PYTHON}"))
    settings = json.loads((tmp_path / "plan.json").read_text())["settings"]
    assert settings["python"] == PYTHON and settings["issue_python"] is None
    assert outputs(jobs.output)["python"] == PYTHON

    # The stand-in builds only the tests' Python: the issue's 3.13 gives way to the config's.
    jobs = Jobs(tmp_path, github_server, monkeypatch, one_python_server.url)
    issue = github_repo.add_issue("t", _body(example_script, "3.13"), labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number), run_id="2")
    settings = json.loads((tmp_path / "plan.json").read_text())["settings"]
    assert settings["python"] == PYTHON and settings["issue_python"] == "3.13"
    assert outputs(jobs.output)["python"] == PYTHON
    assert (f"| Python | `{PYTHON}` (the issue's `3.13` has no nightlies on the index) |"
            in sticky(issue))
