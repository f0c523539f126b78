"""Good ends older than the index lists: the older nightlies are found by their URLs.

The stand-in index lists only its newest 8 versions here, as the nightly index lists its
newest 60, while every wheel stays downloadable; main moves from 2.12 to 2.13 on 02-20.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from dataclasses import replace

import pytest
from packaging.version import Version

from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Reach, Selection, select_builds
from bot.core.results import EXIT_STATUS
from bot.jobs.cli import main
from bot.jobs.window import reach_back
from tests.conftest import PYTHON
from tests.core.test_issue_text import form_body
from tests.fakes.mirror import IndexServer, build_mirror
from tests.jobs.github_helpers import Jobs, comment_event, issue_body, labeled_event

CUT = dt.date(2026, 2, 20)
MISSING = (dt.date(2026, 2, 10), dt.date(2026, 2, 19))  # 02-19: the day before the cut
TAG = f"cp{PYTHON.replace('.', '')}"


@pytest.fixture(scope="module")
def old_mirror(tmp_path_factory):
    return build_mirror(tmp_path_factory.mktemp("cut-mirror"), start=dt.date(2026, 2, 1), days=45,
                        first_bad=dt.date(2026, 3, 3), missing=MISSING, cut=CUT)


@pytest.fixture(scope="module")
def server(old_mirror):
    with IndexServer(old_mirror.root, listed=8) as served:
        yield served


def _oldest_listed(server):
    index = WheelIndex(server.variant_url("cpu"))
    builds = select_builds(index.project_links(), Selection(TAG, variant="cpu"))
    assert len(builds) == 8 and builds[0].version == "2.13.0.dev20260310+cpu"
    return index, builds[0]


def _versions(links):
    return [link.filename.split("-")[1] for link in links]


def test_the_walk_back_crosses_the_cut_and_stops_at_the_release(server):
    index, oldest = _oldest_listed(server)
    found = _versions(reach_back(index, Reach(oldest, release=Version("2.12.0"))))
    # 03-09 back to 02-20 on 2.13, then 2.12's last nightly (02-18; 02-19 was not published)
    assert found[0] == "2.13.0.dev20260309+cpu" and found[-1] == "2.12.0.dev20260218+cpu"
    assert len(found) == 18 + 1 and all(v.startswith("2.13.0") for v in found[:-1])


def test_the_walk_back_to_a_date_takes_every_nightly_on_the_way(server, old_mirror):
    index, oldest = _oldest_listed(server)
    found = _versions(reach_back(index, Reach(oldest, until=dt.date(2026, 2, 5))))
    expected = [v for v in old_mirror.versions if "20260205" <= v[10:18] < "20260310"]
    assert found == expected[::-1]
    assert "2.12.0.dev20260218+cpu" in found and "2.13.0.dev20260220+cpu" in found
    assert len(_versions(reach_back(index, Reach(oldest, until=dt.date(2025, 1, 1)),
                                    max_days=5))) == 5


def test_a_day_without_a_nightly_is_passed_to_the_nearest_older_one(server):
    """02-10 has no nightly: the walk back stopped there, and a good end of 02-10 was "no
    build on or before that date"; among listed nightlies it takes the 9th."""
    index, oldest = _oldest_listed(server)
    found = _versions(reach_back(index, Reach(oldest, until=MISSING[0])))
    assert found[-1] == "2.12.0.dev20260209+cpu" and "2.12.0.dev20260211+cpu" in found


def test_a_bad_end_older_than_the_listed_nightlies_is_reached_not_moved(server, tmp_path,
                                                                         capsys):
    """bad=2026-03-05 with nightlies listed from 03-10 was taken as 03-10 ("no nightly of that
    day on the index; taking the nearest newer one"), a nightly the user never named, which
    may be fixed already. The builds are reached back for it, as for a good end."""
    _, err, data = _bisect(server, tmp_path, capsys, _script(tmp_path), "--bad", "2026-03-05")
    assert data["builds"][-1]["version"] == "2.13.0.dev20260305+cpu"
    assert "bad=2026-03-05 is older than the nightlies the index lists" in err
    assert "taking the nearest newer one" not in err
    assert data["first_bad"] == "2.13.0.dev20260303+cpu"


def test_bisect_with_a_release_as_the_good_end(server, tmp_path, capsys):
    _, err, data = _bisect(server, tmp_path, capsys, _script(tmp_path), "--good", "2.12.0")
    assert data["first_bad"] == "2.13.0.dev20260303+cpu"
    assert data["builds"][0]["version"] == "2.12.0.dev20260218+cpu"
    assert "found 19 older ones on its server, back to 2.12.0.dev20260218+cpu" in err


def _planned(command, server, tmp_path, github_server, github_repo, monkeypatch):
    """The plan job's plan.json for `command` commented on an issue, and its builds."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    issue = github_repo.add_issue("t", issue_body("import torch\n"))
    github_repo.set_role("alice", "write")
    assert jobs.plan("issue_comment", comment_event(issue.number, command))
    plan = json.loads((tmp_path / "plan.json").read_text())
    return plan, [build["version"] for build in plan["builds"]]


def test_a_comment_s_good_release_is_reached_by_the_plan_job(server, tmp_path, github_server,
                                                             github_repo, monkeypatch):
    _, versions = _planned("@torch-bisect-bot bisect good=2.12.0", server, tmp_path,
                           github_server, github_repo, monkeypatch)
    assert versions[0] == "2.12.0.dev20260218+cpu" and versions[-1] == "2.13.0.dev20260317+cpu"
    assert len(versions) == 19 + 8


def _bisect(server, tmp_path, capsys, target, *extra):
    """`bisect-bot bisect` over the stand-in: exit code, stdout, stderr and the JSON report."""
    report = tmp_path / "r.json"
    code = main(["bisect", str(target), "--index", server.variant_url("cpu"),
                 "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                 "--no-triage", "--no-commit-tier", "--work-dir", str(tmp_path / "work"),
                 "--json", str(report), *extra])
    out, err = capsys.readouterr()
    data = json.loads(report.read_text())
    assert code == EXIT_STATUS[data["status"]], err[-2000:]
    return out, err, data


def _script(tmp_path):
    from bot.jobs.demo import example_path

    return example_path(tmp_path, "cumsum_repro.py")


def _issue(tmp_path, prose):
    script = _script(tmp_path).read_text()
    issue = tmp_path / "issue.md"
    issue.write_text(f"{prose}\n\n```python\n{script}```\n")
    return issue


def test_the_issue_s_words_give_the_good_end(server, tmp_path, capsys):
    _, err, data = _bisect(server, tmp_path, capsys,
                           _issue(tmp_path, "It worked in torch 2.12.0, not since."))
    assert 'good end from the issue: 2.12.0 ("worked in torch 2.12.0")' in err
    assert data["builds"][0]["version"] == "2.12.0.dev20260218+cpu"
    assert data["first_bad"] == "2.13.0.dev20260303+cpu"


def test_an_unusable_good_end_from_the_issue_is_dropped_not_fatal(server, tmp_path, capsys):
    out, err, data = _bisect(server, tmp_path, capsys,
                             _issue(tmp_path, "It worked in torch 2.99.0."))
    assert ('the issue says "worked in torch 2.99.0", but good=2.99.0: no nightly of 2.99 is on '
            "the index yet" in err)
    # searched back from the bad end: the 8 listed nightlies all fail, and so it went on
    assert data["status"] == "found" and data["first_bad"] == "2.13.0.dev20260303+cpu"


def test_a_search_without_a_good_end_goes_on_past_the_listed_nightlies(server, tmp_path,
                                                                      capsys):
    db = tmp_path / "history.db"
    out, err, data = _bisect(server, tmp_path, capsys, _script(tmp_path), "--db", str(db))
    assert ("every build back to 2.13.0.dev20260310+cpu fails; found 28 older nightlies on the "
            "index's server, back to 2.12.0.dev20260208+cpu; searching them") in err
    assert data["status"] == "found" and data["first_bad"] == "2.13.0.dev20260303+cpu"
    assert data["last_good"] == "2.13.0.dev20260302+cpu"
    # every verdict of the listed nightlies was kept, under its own version
    listed = {p["version"]: p["verdict"] for p in data["probes"] if p["version"] >= "2.13.0.dev20260310"}
    assert listed and set(listed.values()) == {"bad"}
    assert len(data["probes"]) == len({p["version"] for p in data["probes"]})
    assert "To look further back" not in out
    # The checkpoint's plan holds the older nightlies too: `resume` goes on over all of them.
    with sqlite3.connect(db) as conn:
        (state,) = [json.loads(row[0]) for row in conn.execute("SELECT state FROM bisections")]
    assert state["resume"]["plan"]["builds"] == data["builds"] and len(data["builds"]) == 36


def test_a_failure_older_than_every_nightly_stops_at_the_oldest_with_a_hint(server, tmp_path,
                                                                            capsys):
    always = tmp_path / "always.py"
    always.write_text("import torch\nraise SystemExit('fails on every build')\n")
    out, err, data = _bisect(server, tmp_path, capsys, always)
    assert "back to 2.12.0.dev20260208+cpu" in err and "back to 2.12.0.dev20260201+cpu" in err
    assert data["status"] == "not-a-regression"
    assert data["builds"][0]["version"] == "2.12.0.dev20260201+cpu"  # the server's oldest
    assert ("The search stopped at the oldest nightly it found, after looking up to a year "
            "before the oldest one the index lists: 2.12.0.dev20260201+cpu") in out


def test_a_labelled_issue_s_words_give_the_plan_its_good_end(server, tmp_path, github_server,
                                                             github_repo, monkeypatch):
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    body = "Worked fine in PyTorch 2.12.0.\n\n" + issue_body("import torch\n")
    issue = github_repo.add_issue("t", body, labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["builds"][0]["version"] == "2.12.0.dev20260218+cpu"
    assert plan["settings"]["good_said"] == "Worked fine in PyTorch 2.12.0"
    (sticky,) = [c.body for c in issue.comments if c.author.endswith("[bot]")]
    assert 'The good end is from the issue: "Worked fine in PyTorch 2.12.0"' in sticky
    # an explicit good= wins over the issue's words
    github_repo.set_role("alice", "write")
    assert jobs.plan("issue_comment", comment_event(issue.number,
                                                    "@torch-bisect-bot bisect good=2026-03-12"),
                     run_id="2")
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["builds"][0]["version"] == "2.13.0.dev20260312+cpu"
    assert plan["settings"]["good_said"] is None


def test_the_nightly_a_labelled_issue_reports_is_the_plan_s_bad_end(
        server, tmp_path, github_server, github_repo, monkeypatch):
    """As `bisect-bot bisect` takes it: on GitHub the bad end was always the newest nightly,
    so a bug fixed since came back "not reproduced" instead of bisected."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    body = (issue_body("import torch\n")
            + "\n### Versions\nPyTorch version: 2.13.0.dev20260314+cpu\n")
    issue = github_repo.add_issue("t", body, labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["builds"][-1]["version"] == "2.13.0.dev20260314+cpu"
    (sticky,) = [c.body for c in issue.comments if c.author.endswith("[bot]")]
    assert "The bad end is the nightly the issue reports failing on." in sticky
    github_repo.set_role("alice", "write")  # a command's bad= wins
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect bad=latest"),
                     run_id="2")
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["builds"][-1]["version"] == "2.13.0.dev20260317+cpu"


def test_a_labelled_issue_s_title_gives_the_plan_its_good_end(server, tmp_path, github_server,
                                                              github_repo, monkeypatch):
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    issue = github_repo.add_issue("Wrong cumsum on the nightly, works in 2.12.0",
                                  issue_body("import torch\n"), labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["builds"][0]["version"] == "2.12.0.dev20260218+cpu"
    assert plan["settings"]["good_said"] == "works in 2.12.0"


def test_the_issue_form_s_answers_give_the_window(server, tmp_path, github_server,
                                                  github_repo, monkeypatch, capsys):
    body = form_body({"good": "2.12.0", "bad": "2026-03-12", "variant": "cpu"},
                     script=_script(tmp_path).read_text())
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    issue = github_repo.add_issue("[bisect] cumsum", body, labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((tmp_path / "plan.json").read_text())
    versions = [build["version"] for build in plan["builds"]]
    assert (versions[0], versions[-1]) == ("2.12.0.dev20260218+cpu", "2.13.0.dev20260312+cpu")
    # the same issue on the command line
    (tmp_path / "issue.md").write_text(body)
    _, err, data = _bisect(server, tmp_path, capsys, tmp_path / "issue.md")
    assert "good from the issue form: 2.12.0" in err
    assert [b["version"] for b in data["builds"]] == versions
    assert data["first_bad"] == "2.13.0.dev20260303+cpu"


def test_a_wrong_answer_in_the_form_is_told_not_run(server, tmp_path, github_server,
                                                    github_repo, monkeypatch):
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    issue = github_repo.add_issue("[bisect] x", form_body({"good": "last week"}),
                                  labels=("bisect",))
    assert not jobs.plan("issues", labeled_event(issue.number))
    (sticky,) = [c.body for c in issue.comments if c.author.endswith("[bot]")]
    assert "Cannot bisect this issue yet" in sticky
    assert 'The form\'s "Last known good version" (`last week`): give a version like' in sticky


def test_the_run_job_goes_on_past_the_listed_nightlies_and_resumes_there(
        server, tmp_path, github_server, github_repo, monkeypatch):
    jobs = Jobs(tmp_path, github_server, monkeypatch, server.url)
    issue = github_repo.add_issue("t", issue_body(_script(tmp_path).read_text()),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    assert len(json.loads((tmp_path / "plan.json").read_text())["builds"]) == 8
    done = jobs.run(tmp_path / "cache", "--no-triage")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every build back to 2.13.0.dev20260310+cpu fails" in done.stderr
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["first_bad"] == "2.13.0.dev20260303+cpu" and len(outcome["builds"]) > 8
    # A rerun of the job continues from its checkpoint, older nightlies and all.
    (tmp_path / "previous.json").write_text((tmp_path / "outcome.json").read_text())
    again = jobs.run(tmp_path / "cache", "--no-triage", "--resume", str(tmp_path / "previous.json"))
    assert again.returncode == 0 and "probes already done" in again.stderr, again.stderr[-2000:]
    assert json.loads((tmp_path / "outcome.json").read_text())["probes"] == outcome["probes"]


def test_rounds_of_runners_go_on_past_the_listed_nightlies(server, tmp_path, capsys):
    from tests.jobs.test_rounds import bisect_in_rounds, start

    state = start(tmp_path, server, _script(tmp_path))
    assert len(json.loads(state.read_text())["builds"]) == 8
    rounds, final = bisect_in_rounds(state, 4, tmp_path / "cache", tmp_path, capsys)
    assert final["status"] == "found" and final["first_bad"] == "2.13.0.dev20260303+cpu"
    assert final["builds"][0]["version"] < "2.13.0.dev20260310+cpu" and rounds <= 6


def test_a_step_back_stays_within_the_limit_its_first_step_set(server):
    from bot.core.bisection import Bisection
    from bot.core.results import BisectResult
    from bot.core.verdicts import Verdict
    from bot.jobs.window import step_back

    _, oldest = _oldest_listed(server)
    index = WheelIndex(server.variant_url("cpu"))
    listed = tuple(select_builds(index.project_links(), Selection(TAG, variant="cpu")))
    bisection = Bisection(len(listed))
    for position in range(len(listed)):
        bisection = bisection.record(position, Verdict.BAD)
    failed = BisectResult(listed, bisection, (), index_url=server.variant_url("cpu"))
    assert failed.failed_back_to_the_oldest and oldest == listed[0]
    said = []
    stepped, grown = step_back(failed, Selection(TAG, variant="cpu"), said.append)
    assert grown and len(stepped.builds) == 8 + 28 and stepped.options["back_to"] == "2025-03-09"
    limited = replace(failed, options={"back_to": "2026-03-05"})  # as a later step finds it
    stepped, grown = step_back(limited, Selection(TAG, variant="cpu"), said.append)
    assert grown and [b.version for b in stepped.builds[:5]] == [
        f"2.13.0.dev202603{day:02d}+cpu" for day in range(5, 10)]
    assert len(said) == 2


def test_a_good_end_further_back_than_the_bot_looks_is_told_so(server, tmp_path, capsys):
    """It walked a year of days in vain and said "no build on or before that date", as if
    the wheels were gone (an audit: ~340 requests)."""
    code = main(["bisect", str(_script(tmp_path)), "--index", server.variant_url("cpu"),
                 "--cache-dir", str(tmp_path / "cache"), "--good", "2025-01-02",
                 "--no-triage", "--no-commit-tier"])
    err = capsys.readouterr().err
    assert code == 2
    assert ("good=2025-01-02 is more than 366 days before the oldest nightly the index lists "
            "(2.13.0.dev20260310+cpu), further back than the bot looks for unlisted ones: give "
            "a good end from 2025-03-09 on") in err
    # the issue's words that far back are dropped, and the search starts from the bad end
    _, err, data = _bisect(server, tmp_path, capsys,
                           _issue(tmp_path, "It worked in torch 2.5.0.dev20250101 fine."))
    assert "further back than the bot looks" in err and data["status"] == "found"


def test_a_comment_looking_for_the_fix_takes_its_bad_release_as_the_older_end(
        server, tmp_path, github_server, github_repo, monkeypatch):
    """`fix bad=2.12.0`: the build it fails on is where a search for the fix starts (the
    window ran to it, and the older nightlies were not reached back for)."""
    plan, versions = _planned("@torch-bisect-bot bisect fix bad=2.12.0", server, tmp_path,
                              github_server, github_repo, monkeypatch)
    assert versions[0] == "2.12.0.dev20260218+cpu" and versions[-1] == "2.13.0.dev20260317+cpu"
    assert plan["good_given"] is True  # the failing end given: no search back from it


def test_a_page_of_several_variants_is_not_mixed_one_per_day():
    """An index URL that names no variant (a mirror, .../whl/nightly) gave the newest build
    of each day whatever its variant: cu130 one day, cpu the next (when cu130 missed it)."""
    from bot.core.builds import WheelLink
    from bot.core.errors import UserError
    from bot.jobs.window import one_variant

    names = [f"torch-2.13.0.dev202605{day}+{variant}-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"
             for day, variant in (("11", "cu130"), ("12", "cpu"), ("13", "cpu"), ("14", "cu130"))]
    links = [WheelLink(name, f"http://127.0.0.1/{name}") for name in names]
    anything = Selection(TAG, arch="x86_64")
    with pytest.raises(UserError, match=r"lists torch builds of 2 variants \(cpu, cu130\): name "
                       "one with --variant"):
        one_variant(select_builds(links, anything), anything)
    cu130 = Selection(TAG, variant="cu130", arch="x86_64")
    assert [b.variant for b in one_variant(select_builds(links, cu130), cu130)] == ["cu130"] * 2
