"""The CUDA variant of the build the issue reports makes the environments, where the runners
can run it: a bug can depend on the CUDA version (cuBLAS, cuDNN), and a driver runs builds of
older CUDA versions, not newer ones. Real uv, real HTTP (one stand-in index of two variants).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from bot.core.job_plan import issue_variant
from bot.jobs.cli import main
from tests.fakes.mirror import IndexServer, build_mirror
from tests.jobs.github_helpers import PYTHON, Jobs, comment_event, labeled_event, sticky

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "example_issue.md"
REPORTED = "2.13.0.dev20260531+cpu"  # what examples/example_issue.md says, twice


@pytest.mark.parametrize(("reported", "default", "taken"), [
    ("2.13.0.dev20260521+cu126", "cu130", "cu126"),
    ("2.13.0.dev20260521+cu118", "cu130", "cu118"),
    ("2.13.0.dev20260521+cu132", "cu130", None),  # newer than the runners' driver may run
    ("2.13.0.dev20260521+cu130", "cu130", None),  # the default already
    ("2.13.0.dev20260521+cpu", "cu130", None),  # a CPU build says nothing of CUDA
    ("2.13.0.dev20260521+rocm6.4", "cu130", None),  # another kind of GPU
    ("2.13.0.dev20260521+cu126", "cpu", None),  # runners without CUDA
    ("2.13.0.dev20260521", "cu130", None),
    (None, "cu130", None),
])
def test_the_issue_s_variant_is_taken_when_the_runners_run_it(reported, default, taken):
    assert issue_variant(reported, default) == taken


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """cpu, cu126 and cu130 nightlies of the same days (the regression on 05-21 in each)."""
    root = tmp_path_factory.mktemp("variants")
    tag = f"cp{PYTHON.replace('.', '')}"
    for variant in ("cpu", "cu126", "cu130"):
        build_mirror(root, start=dt.date(2026, 5, 18), days=6, missing=(), python_tags=(tag,),
                     variant=variant)
    with IndexServer(root) as server:
        yield server


def _issue(tmp_path: Path, variant: str) -> Path:
    issue = tmp_path / "issue.md"
    text = EXAMPLE.read_text()
    assert text.count(REPORTED) == 2
    issue.write_text(text.replace(REPORTED, f"2.13.0.dev20260521+{variant}"))
    return issue


def _bisect(tmp_path, capsys, variants, cache_dir, reported, *extra):
    report = tmp_path / "report.json"
    code = main(["bisect", str(_issue(tmp_path, reported)), "--index",
                 variants.url + "{variant}/", "--cache-dir", str(cache_dir),
                 "--no-default-packages", "--no-triage", "--no-commit-tier",
                 "--good", "2026-05-19", "--json", str(report), *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    data = json.loads(report.read_text())
    labels = {record["info"]["torch"].split("+")[1] for record in data["probe_records"]}
    return data, labels, err


@pytest.mark.parametrize(("reported", "used", "said"), [
    ("cu126", "cu126", "variant cu126, as the issue's build reports; --variant overrides it"),
    ("cu132", "cu130", None),
    ("cu118", "cu130", "no builds of variant cu118"),
    # A CPU build reported, and a script that needs no GPU: the CPU nightlies (it was cu130).
    ("cpu", "cpu", "variant cpu, as the issue's build reports; --variant overrides it"),
])
def test_a_local_bisection_takes_the_issue_s_variant(variants, cache_dir, tmp_path, capsys,
                                                      reported, used, said):
    data, labels, err = _bisect(tmp_path, capsys, variants, cache_dir, reported)
    assert labels == {used} and data["options"]["variant"] == used
    assert data["first_bad"] == f"2.13.0.dev20260521+{used}"  # the issue's bad end, too
    assert (said in err) if said else "issue's" not in err


def test_a_build_named_with_its_variant_names_the_variant(variants, cache_dir, tmp_path,
                                                          capsys):
    data, labels, err = _bisect(tmp_path, capsys, variants, cache_dir, "cu130",
                                "--good", "2.13.0.dev20260519+cu126")
    assert labels == {"cu126"} and data["last_good"] == "2.13.0.dev20260520+cu126"
    assert "variant cu126, as --good 2.13.0.dev20260519+cu126 names it" in err


def test_a_variant_given_wins_over_the_issue_s(variants, cache_dir, tmp_path, capsys):
    _, labels, err = _bisect(tmp_path, capsys, variants, cache_dir, "cu126",
                             "--variant", "cu130")
    assert labels == {"cu130"} and "issue's" not in err


def test_the_plan_job_takes_the_issue_s_variant_and_says_so(
        tmp_path, github_server, github_repo, monkeypatch, variants, cache_dir):
    jobs = Jobs(tmp_path, github_server, monkeypatch, variants.url)
    jobs.config.write_text(jobs.config.read_text().replace("variant: cpu", "variant: cu130"))
    github_repo.set_role("alice", "triage")
    cases = [("cu126", "", "cu126", "| variant | `cu126` (the issue's build) |"),
             ("cu118", "", "cu130",
              "| variant | `cu130` (the issue's `cu118` has no nightlies on the index) |"),
             ("cu126", " variant=cu130", "cu130", "| variant | `cu130` |")]
    for run, (reported, option, used, row) in enumerate(cases, start=1):
        issue = github_repo.add_issue("t", _issue(tmp_path, reported).read_text())
        assert jobs.plan("issue_comment", comment_event(
            issue.number, "/bisect good=2026-05-19" + option), run_id=str(run))
        settings = json.loads((tmp_path / "plan.json").read_text())["settings"]
        assert settings["variant"] == used
        assert settings["index_url"] == f"{variants.url}{used}/"
        assert row in sticky(issue)
    # A label starts the same: the reporter's variant without a command.
    issue = github_repo.add_issue("t", _issue(tmp_path, "cu126").read_text(), labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number), run_id="9")
    assert json.loads((tmp_path / "plan.json").read_text())["settings"]["variant"] == "cu126"
    done = jobs.run(cache_dir, "--no-triage")
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert {r["info"]["torch"].split("+")[1] for r in outcome["probe_records"]} == {"cu126"}
    assert outcome["first_bad"] == "2.13.0.dev20260521+cu126"


def test_an_index_given_to_the_plan_job_takes_the_chosen_variant(
        tmp_path, github_server, github_repo, monkeypatch, variants):
    """The workflow's `index-url` input (`plan --index`) is a template as the config's is: its
    {variant} was filled with the config's variant, so `variant=cu126` read the cu130 index,
    and the issue's own variant was never tried."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, "https://unused.example/")
    jobs.config.write_text(jobs.config.read_text().replace("variant: cpu", "variant: cu130"))
    github_repo.set_role("alice", "triage")
    index = ("--index", variants.url + "{variant}/")
    issue = github_repo.add_issue("t", _issue(tmp_path, "cu130").read_text())
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect variant=cu126 "
                                                    "good=2026-05-19"), "1", *index)
    settings = json.loads((tmp_path / "plan.json").read_text())["settings"]
    assert (settings["variant"], settings["index_url"]) == ("cu126", f"{variants.url}cu126/")
    issue = github_repo.add_issue("t", _issue(tmp_path, "cu126").read_text(), labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number), "2", *index)
    settings = json.loads((tmp_path / "plan.json").read_text())["settings"]
    assert (settings["variant"], settings["index_url"]) == ("cu126", f"{variants.url}cu126/")
