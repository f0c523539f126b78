"""plan -> run -> report against the fake GitHub and the local nightly mirror, end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from bot.core.report import MARKER, owner_run
from bot.demo.index_server import Fault, IndexServer
from bot.jobs.cli import main
from tests.jobs.github_helpers import (
    BISECT_BOT,
    PYTHON,
    Jobs,
    comment_event,
    edited_event,
    issue_body,
    labeled_event,
)
from tests.jobs.test_rounds import bisect_in_rounds, probe_round
from tests.jobs.test_rounds import plan as plan_round


@pytest.fixture
def jobs(tmp_path, github_server, monkeypatch, index_server):
    return Jobs(tmp_path, github_server, monkeypatch, index_server.url)


def bot_comments(issue):
    return [c for c in issue.comments if c.author.endswith("[bot]")]


def test_label_to_verdict_end_to_end(jobs, github_server, github_repo, mirror, cache_dir,
                                     example_script):
    issue = github_repo.add_issue("compiled cumsum is off", issue_body(example_script.read_text()),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    queued = bot_comments(issue)
    assert len(queued) == 1 and "Bisection queued" in queued[0].body
    assert "bisect: queued" in issue.labels

    jobs.mark_running()
    assert "bisect: running" in issue.labels and "bisect: queued" not in issue.labels

    done = jobs.run(cache_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((jobs.tmp / "outcome.json").read_text())["first_bad"] == mirror.first_bad

    jobs.report()
    comments = bot_comments(issue)
    assert len(comments) == 1
    assert "bisect: running" not in issue.labels
    body = comments[0].body
    assert MARKER in body and "2.13.0.dev20260521+cpu" in body and "Regression found" in body
    assert "https://github.com/pytorch/pytorch/compare/" in body
    # The mirror's commits are not on this GitHub: the commit section says so, and no more
    assert "_GitHub lookup failed: HTTP 422: Validation Failed_" in body
    assert "### Triage of `2.13.0.dev20260521+cpu`" in body and "precision difference" in body
    assert "bisect: found" in issue.labels and "bisect: queued" not in issue.labels
    assert "Regression found" in jobs.summary.read_text()
    assert github_server.rejected == []


def test_a_reproducer_that_only_prints_is_told_why_it_may_not_reproduce(jobs, github_repo,
                                                                        cache_dir):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    done = jobs.run(cache_dir, "--no-triage")
    assert done.returncode == 0, done.stderr[-3000:]
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "Not reproduced" in comment.body
    assert "This reproducer never checks a result" in comment.body
    assert "bisect: not-reproduced" in issue.labels


def test_a_bad_end_given_that_passes_is_no_not_reproduced(jobs, github_repo, cache_dir,
                                                          example_script):
    """`bad=` at a nightly before the regression: the comment said "Not reproduced ... (maybe
    already fixed)" with the `bisect: not-reproduced` label, though no newer nightly was tested,
    and its rerun command bisected up to the newest one."""
    issue = github_repo.add_issue("t", issue_body(example_script.read_text()))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect bad=2026-05-15"))
    assert jobs.outcome(cache_dir, "--no-triage")["status"] == "not-reproduced"
    jobs.report()
    (comment,) = bot_comments(issue)
    assert comment.body.split("\n")[2] == ("## The bad end you gave, `2.13.0.dev20260515+cpu`, "
                                           "passes; 16 newer nightlies were not tested")
    assert "maybe already fixed" not in comment.body
    assert "--bad 2.13.0.dev20260515+cpu" in comment.body.split("### Rerun locally")[1]
    assert issue.labels == []  # neither not-reproduced nor left queued


def test_the_run_job_installs_every_build_with_uv_when_told(jobs, github_repo, example_script,
                                                            tmp_path):
    """`run --no-derive` reaches the environment cache: no environment is derived."""
    issue = github_repo.add_issue("t", issue_body(example_script.read_text()))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect"))
    by_default = jobs.outcome(tmp_path / "derived", "--no-triage")
    told = jobs.outcome(tmp_path / "uv", "--no-triage", "--no-derive")
    assert by_default["first_bad"] == told["first_bad"] == "2.13.0.dev20260521+cpu"

    def derived(outcome):
        return [p["version"] for p in outcome["probe_records"]
                if p.get("info", {}).get("derived_from")]

    assert derived(by_default) and derived(told) == []


def test_a_good_end_given_that_fails_is_no_not_a_regression(jobs, github_repo, cache_dir,
                                                           example_script):
    """`good=` after the regression: "Not a regression in range", labelled so."""
    issue = github_repo.add_issue("t", issue_body(example_script.read_text()))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-23 bad=latest"))
    assert jobs.outcome(cache_dir, "--no-triage")["status"] == "not-a-regression"
    jobs.report()
    (comment,) = bot_comments(issue)
    assert comment.body.split("\n")[2] == ("## The good end you gave, "
                                           "`2.13.0.dev20260523+cpu`, fails, as the newer "
                                           "builds tested do")
    assert issue.labels == []


def test_second_trigger_edits_the_same_comment(jobs, github_server, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2) + 1)\n"))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issues", labeled_event(issue.number), run_id="1")
    first = bot_comments(issue)[0]
    assert jobs.plan("issue_comment", comment_event(
        issue.number, "@torch-bisect-bot bisect good=2026-05-02 bad=2026-05-25"), run_id="2")
    comments = bot_comments(issue)
    assert len(comments) == 1 and comments[0].id == first.id
    assert "torch-bisect-bot:run=2" in comments[0].body and "2.13.0.dev20260502" in comments[0].body
    plan = json.loads((jobs.tmp / "plan.json").read_text())
    assert plan["comment_id"] == first.id and len(plan["builds"]) == 23  # 05-02..05-25, 05-09 missing
    assert github_server.rejected == []


def test_superseded_run_does_not_overwrite_the_newer_comment(jobs, github_repo, tmp_path):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    assert jobs.plan("issues", labeled_event(issue.number), run_id="1")
    old_plan = (tmp_path / "plan.json").read_text()
    assert jobs.plan("issues", labeled_event(issue.number), run_id="2")
    (tmp_path / "plan.json").write_text(old_plan)
    jobs.report()  # run 1's report, with no outcome: it must leave run 2's comment alone
    assert "Bisection queued" in bot_comments(issue)[0].body
    assert "bisect: failed" not in issue.labels


@pytest.mark.parametrize("role", ["read", "none"])
def test_unauthorized_commenter_is_refused_and_nothing_runs(jobs, github_server, github_repo,
                                                            role):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("mallory", role)
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect", "mallory"))
    assert "should_run<<" in jobs.output.read_text() and "\nfalse\n" in jobs.output.read_text()
    comments = bot_comments(issue)
    assert len(comments) == 1 and "Only people with the `triage` role" in comments[0].body
    assert MARKER not in comments[0].body and issue.labels == []
    assert github_server.rejected == []


@pytest.mark.parametrize("text", ["/bisect good=yesterday", "@torch-bisect-bot thanks!"])
def test_a_reader_s_malformed_command_is_refused_as_a_comment_not_as_the_form_s_label(
        jobs, github_repo, text):
    """The refusal of a comment that is no valid command spoke of the `bisect` label "that
    came with the issue": the usage decision carried no comment, so it read as a label's."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("reporter", "read")
    assert not jobs.plan("issue_comment", comment_event(issue.number, text, "reporter"))
    (reply,) = bot_comments(issue)
    assert reply.body.startswith("Thanks for the request, @reporter! Only people with the "
                                 "`triage` role")
    assert "label starts a bisection" not in reply.body and issue.labels == []


def test_issue_without_reproducer_gets_told_what_to_add(jobs, github_server, github_repo):
    issue = github_repo.add_issue("t", "torch.compile is slower than last week, please look")
    assert not jobs.plan("issues", labeled_event(issue.number))
    comments = bot_comments(issue)
    assert len(comments) == 1 and MARKER in comments[0].body
    assert "```python" in comments[0].body and "Cannot bisect" in comments[0].body
    assert "bisect: cannot-test" in issue.labels
    assert github_server.rejected == []


def test_an_issue_that_could_not_start_is_tried_again_once_edited(jobs, github_repo,
                                                                  example_script):
    issue = github_repo.add_issue("t", "compile is slow since last week", labels=("bisect",))
    assert not jobs.plan("issues", labeled_event(issue.number))
    assert "bisect: cannot-test" in issue.labels
    (told,) = bot_comments(issue)
    assert ("while it has the `bisect` and `bisect: cannot-test` labels, the bot tries again "
            "after each edit that changes the reproducer") in told.body
    before = issue.body
    issue.body = issue_body(example_script.read_text())  # the author adds the reproducer
    event = edited_event(issue.number, tuple(issue.labels), before, sender="octocat",
                         after=issue.body)
    assert jobs.plan("issues", event, run_id="2")
    (queued,) = bot_comments(issue)
    assert queued.id == told.id and "Bisection queued" in queued.body
    assert "bisect: queued" in issue.labels and "bisect: cannot-test" not in issue.labels
    # Now that it is queued, another edit starts nothing.
    assert not jobs.plan("issues", edited_event(issue.number, tuple(issue.labels)), run_id="3")


def report_comment(issue):
    """The body of the bot's sticky comment (not of its replies)."""
    return next(c.body for c in bot_comments(issue) if MARKER in c.body)


def _cannot_test_after_a_command(jobs, github_repo, body):
    """An issue the form labelled for its reader reporter (refused), then a triager's command
    with options, whose run job could not test it."""
    issue = github_repo.add_issue("t", body, author="reporter", labels=("bisect",))
    github_repo.set_role("reporter", "read")
    github_repo.set_role("alice", "triage")
    assert not jobs.plan("issues", labeled_event(issue.number, sender="reporter"))
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect repeat=5 good=2026-05-02",
                                                    "alice"), "2")
    (jobs.tmp / "outcome.json").write_text(json.dumps({"error": "needs a CUDA GPU",
                                                       "state": "cannot_test"}))
    jobs.report()
    assert issue.labels == ["bisect", "bisect: cannot-test"]
    return issue


@pytest.mark.parametrize("editor", ["reporter", "alice"])
def test_an_edit_does_not_restart_a_command_s_bisection(jobs, github_repo, editor):
    """An edit by the reader reporter started a GPU run in their name, without the triager's
    repeat= and good=; the comment had told the triager to comment the command again."""
    body = issue_body("import torch\nassert torch.ones(2).sum() == 2\n")
    issue = _cannot_test_after_a_command(jobs, github_repo, body)
    told = report_comment(issue)
    issue.body = body.replace("== 2", "== 2.0")
    assert not jobs.plan("issues", edited_event(issue.number, tuple(issue.labels), body,
                                                sender=editor, after=issue.body), "3")
    assert report_comment(issue) == told and issue.labels == ["bisect", "bisect: cannot-test"]


def test_an_edit_restarts_a_bisection_the_label_started_whoever_edits(jobs, github_repo):
    """The triager's label started it (its role was checked): the reporter's edit that adds
    what was missing tries again, as the comment says."""
    body = issue_body("import torch\nassert torch.ones(2).sum() == 2\n")
    issue = github_repo.add_issue("t", body, author="reporter", labels=("bisect",))
    github_repo.set_role("reporter", "read")
    assert jobs.plan("issues", labeled_event(issue.number))  # by the triager
    (jobs.tmp / "outcome.json").write_text(json.dumps({"error": "needs a CUDA GPU",
                                                       "state": "cannot_test"}))
    jobs.report()
    assert "Edit the issue" in report_comment(issue)
    issue.body = body.replace("== 2", "== 2.0")
    assert jobs.plan("issues", edited_event(issue.number, tuple(issue.labels), body,
                                            sender="reporter", after=issue.body), "2")
    assert "Bisection queued" in report_comment(issue)


@pytest.mark.parametrize(("role", "restarts"), [("read", False), ("triage", True)])
def test_an_edit_after_a_comment_that_does_not_say_what_started_it_needs_the_role(
        jobs, github_repo, role, restarts):
    """A comment the bot wrote before it said what started the bisection: only an editor who
    may start the bot starts it again."""
    body = issue_body("import torch\nassert torch.ones(2).sum() == 2\n")
    issue = _cannot_test_after_a_command(jobs, github_repo, body)
    comment = next(c for c in bot_comments(issue) if MARKER in c.body)
    comment.body = re.sub(r"<!-- torch-bisect-bot:started-by=\w+ -->", "", comment.body)
    github_repo.set_role("editor", role)
    issue.body = body.replace("== 2", "== 2.0")
    assert jobs.plan("issues", edited_event(issue.number, tuple(issue.labels), body,
                                            sender="editor", after=issue.body), "3") is restarts


def test_malformed_command_gets_the_usage(jobs, github_server, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\n"))
    github_repo.set_role("alice", "write")
    assert not jobs.plan("issue_comment",
                         comment_event(issue.number, "@torch-bisect-bot bisect repeat=many"))
    comments = bot_comments(issue)
    assert len(comments) == 1 and "repeat=many" in comments[0].body
    assert "**Usage**" in comments[0].body
    assert github_server.rejected == []


def test_a_malformed_value_s_backticks_and_mentions_stay_quoted_in_the_usage(jobs, github_repo):
    """The value was put between single backticks: one inside it ended the code span and a
    team named after it was pinged by the bot."""
    issue = github_repo.add_issue("t", issue_body("import torch\n"))
    github_repo.set_role("alice", "write")
    assert not jobs.plan("issue_comment",
                         comment_event(issue.number, "/bisect good=a`@pytorch/team`b"))
    [reply] = bot_comments(issue)
    assert "``good=a`@\u200dpytorch/team`b``: " in reply.body
    assert "@pytorch" not in reply.body and "**Usage**" in reply.body


def test_help_is_answered_for_anyone(jobs, github_repo):
    issue = github_repo.add_issue("t", "")
    github_repo.set_role("bob", "read")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect help", "bob"))
    assert "**Usage**" in bot_comments(issue)[0].body


def test_cancel_marks_the_comment_and_clears_the_state(jobs, github_repo, tmp_path):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "maintain")
    assert jobs.plan("issues", labeled_event(issue.number), run_id="1")
    plan = (tmp_path / "plan.json").read_text()
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect cancel"), "2")
    assert "Bisection cancelled" in bot_comments(issue)[0].body
    assert not any(label.startswith("bisect: ") for label in issue.labels)
    (tmp_path / "plan.json").write_text(plan)
    jobs.report()  # the cancelled run's report leaves the comment as it is
    assert "Bisection cancelled" in bot_comments(issue)[0].body


def test_cancel_cancels_the_workflow_run_that_owns_the_bisection(jobs, github_repo):
    """Marking the comment alone left the GPU job running to its end (hours, with rounds
    of runners that no concurrency group stops); the run itself is cancelled."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "maintain")
    github_repo.runs.update({41: "in_progress", 42: "in_progress"})
    assert jobs.plan("issues", labeled_event(issue.number), run_id="41")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect cancel"), "42")
    assert github_repo.runs == {41: "cancelled", 42: "in_progress"}
    body = bot_comments(issue)[0].body
    assert "Its workflow run (41) was cancelled, which gives its runners back." in body
    assert owner_run(body) is None  # no report of run 41 may take the comment back


def test_a_token_that_may_not_cancel_runs_is_said_in_the_comment(jobs, github_repo,
                                                                 github_server):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "maintain")
    github_repo.runs[41] = "in_progress"
    assert jobs.plan("issues", labeled_event(issue.number), run_id="41")
    github_server.inject(403, {"message": "Resource not accessible by integration"},
                         method="POST", path="/repos/pytorch/pytorch/actions/runs/41/cancel")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect cancel"), "42")
    body = bot_comments(issue)[0].body
    assert "Bisection cancelled" in body and github_repo.runs[41] == "in_progress"
    assert "goes on until it ends, because this workflow's token may not cancel runs " \
        "(the plan job needs `actions: write`); what it finds is not posted." in body


def test_a_new_bisection_cancels_the_run_of_the_one_it_replaces(jobs, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "maintain")
    github_repo.runs.update({41: "in_progress", 42: "in_progress", 43: "in_progress"})
    assert jobs.plan("issues", labeled_event(issue.number), run_id="41")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect repeat=2"), "42")
    assert github_repo.runs == {41: "cancelled", 42: "in_progress", 43: "in_progress"}
    assert owner_run(bot_comments(issue)[0].body) == "42"
    # an answered bisection has no run to stop: a later command cancels nothing
    github_repo.runs[42] = "completed"
    issue.labels = [name for name in issue.labels if not name.startswith("bisect: ")]
    issue.labels.append("bisect: found")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect repeat=3"), "43")
    assert github_repo.runs == {41: "cancelled", 42: "completed", 43: "in_progress"}


def _answered(jobs, github_repo):
    """An issue whose bisection was queued by its label and has been answered since: the
    sticky comment as the report job leaves it, and the state label."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issues", labeled_event(issue.number), run_id="1")
    (sticky_comment,) = bot_comments(issue)
    sticky_comment.body = sticky_comment.body.replace("Bisection queued", "Regression found")
    github_repo.add_label("bisect")
    issue.labels = ["bisect", "bisect: found"]
    return issue, sticky_comment.body


def test_cancel_after_the_answer_leaves_the_answer(jobs, github_repo):
    issue, answer = _answered(jobs, github_repo)
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect cancel"), "2")
    first, reply = bot_comments(issue)
    assert first.body == answer and "bisect: found" in issue.labels
    assert "nothing to cancel; its last answer stays as it is" in reply.body


def test_a_command_that_cannot_start_is_answered_and_the_issue_s_answer_stays(jobs, github_repo):
    issue, answer = _answered(jobs, github_repo)
    broken = "/bisect\n```python\nimport torch\ndef f(:\n    pass\n```\n"
    assert not jobs.plan("issue_comment", comment_event(issue.number, broken), "2")
    first, reply = bot_comments(issue)
    assert first.body == answer and issue.labels == ["bisect", "bisect: found"]
    assert reply.body.startswith("I cannot start this bisection: The script in the comment "
                                 "that asked cannot be run: I found Python code, but")
    assert "comment the command again" in reply.body and MARKER not in reply.body


FORM_WITH_MENTION = ("### Reproducer\n\n```python\nimport torch\nassert torch.ones(2).sum() == 2\n"
                     "```\n\n### Last known good version\n\n@victim-user please look at #12\n\n"
                     "### First known bad version\n\n_No response_\n")


@pytest.mark.parametrize("start", ["command", "label"])
def test_a_form_answer_the_bot_cannot_use_is_quoted_and_pings_nobody(jobs, github_repo, start):
    """The reply to a command posted the answer as it was written: the bot's comment pinged
    @victim-user and referenced issue #12."""
    issue = github_repo.add_issue("[bisect] t", FORM_WITH_MENTION, author="reporter")
    github_repo.set_role("alice", "triage")
    event = (comment_event(issue.number, "/bisect", "alice") if start == "command"
             else labeled_event(issue.number))
    assert not jobs.plan("issue_comment" if start == "command" else "issues", event)
    (reply,) = bot_comments(issue)
    assert '"Last known good version" (`@\u200dvictim-user please look at #12`): give a version' \
        in reply.body
    assert "@victim-user" not in reply.body


def test_a_label_the_issue_form_adds_for_a_reporter_starts_nothing(jobs, github_repo):
    """The bisection form (.github/ISSUE_TEMPLATE/bisect.yml) adds the trigger label for
    whoever opens the issue; only the configured role may start a GPU run."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("reporter", "read")
    assert not jobs.plan("issues", labeled_event(issue.number, sender="reporter"))
    (reply,) = bot_comments(issue)
    assert "The `bisect` label starts a bisection only when someone with the `triage`" in \
        reply.body and "comment `/bisect`" in reply.body
    assert MARKER not in reply.body and not any(
        label.startswith("bisect: ") for label in issue.labels)


def test_a_label_an_app_adds_is_refused_as_the_app_s_not_thanked_as_a_report(jobs, github_repo):
    """`@pytorchbot label bisect`: the label's sender is the app, whose role the permission
    endpoint does not give. The reply thanked the app for its report, which 'came with the
    issue'."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    assert not jobs.plan("issues", labeled_event(issue.number, sender="pytorch-bot[bot]"))
    (reply,) = bot_comments(issue)
    assert reply.body.startswith("The `bisect` label was added by `pytorch-bot[bot]`, an app")
    assert "Thanks" not in reply.body and "@pytorch-bot" not in reply.body
    assert not any(label.startswith("bisect: ") for label in issue.labels)


@pytest.mark.parametrize("author,kind", [("torch-bisect-bot[bot]", "Bot"),
                                          ("dependabot[bot]", "Bot")])
def test_bot_comments_are_ignored(jobs, github_repo, author, kind):
    issue = github_repo.add_issue("t", "")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect", author, kind))
    assert issue.comments == []


@pytest.mark.parametrize("damaged", ['{"status": "fou', "", "\udcff", "{}",
                                     '{"status": "found"}', '{"error": null}'])
def test_a_damaged_outcome_is_a_failed_bisection_not_a_queued_one_forever(
        jobs, github_repo, damaged):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    assert jobs.plan("issues", labeled_event(issue.number))
    (jobs.tmp / "outcome.json").write_text(damaged, errors="surrogateescape")
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "Bisection failed" in comment.body and "None" not in comment.body
    assert "bisect: failed" in issue.labels and "bisect: queued" not in issue.labels


def test_report_survives_a_bad_gateway_and_a_secondary_rate_limit(
        jobs, github_server, github_repo, tmp_path):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    assert jobs.plan("issues", labeled_event(issue.number))
    (jobs.tmp / "outcome.json").write_text(json.dumps({"error": "no GPU", "state": "cannot_test"}))
    github_server.inject(502, method="PATCH")
    github_server.inject_secondary_rate_limit(retry_after=1, method="POST")
    jobs.report()
    comments = bot_comments(issue)
    assert len(comments) == 1 and "No GPU." in comments[0].body
    assert "bisect: cannot-test" in issue.labels
    assert github_server.rejected == []
    assert len(github_server.served_faults) == 2


def test_a_rerun_continues_from_the_checkpoint_of_the_lost_attempt(
        jobs, github_repo, mirror, cache_dir):
    from bot.core.bisection import Bisection
    from bot.core.results import BisectResult

    script = ("import torch\n"
              "assert torch.__version__ < '2.13.0.dev20260521', 'regressed'\n")
    # No nightly named: the issue's nightly would be the bad end, and two probes the answer.
    body = issue_body(script).replace("torch 2.13.0.dev20260521+cpu", "a nightly of May")
    issue = github_repo.add_issue("t", body)
    assert jobs.plan("issues", labeled_event(issue.number))
    assert jobs.run(cache_dir).returncode == 0
    full = BisectResult.from_dict(json.loads((jobs.tmp / "outcome.json").read_text()))
    # What a lost attempt left behind: the checkpoint after its first two probes.
    kept = full.probes[:2]
    state = Bisection(full.bisection.size, full.bisection.good_index)
    for probe in kept:
        state = state.record(probe.index, probe.verdict)
    partial = jobs.tmp / "previous.json"
    partial.write_text(json.dumps(
        BisectResult(full.builds, state, kept, full.signature, full.script_name,
                     full.index_url, full.options).to_dict()))
    # Reported as it was left, the comment says how to go on from its narrowest window.
    (jobs.tmp / "outcome.json").write_text(partial.read_text())
    jobs.report()
    (stopped,) = bot_comments(issue)
    assert "\n## Bisection stopped before its answer\n" in stopped.body  # not "in progress"
    assert "The bisection stopped before its answer" in stopped.body
    assert "To go on from where it stopped, comment" in stopped.body
    oldest_bad = min(probe.index for probe in kept if probe.verdict.value == "bad")
    assert f"\n/bisect bad={full.builds[oldest_bad].version} variant=cpu python=" in stopped.body
    done = jobs.run(cache_dir, "--resume", str(partial))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 probes already done" in done.stderr
    again = json.loads((jobs.tmp / "outcome.json").read_text())
    assert again["first_bad"] == full.summary()["first_bad"] == mirror.first_bad
    assert again["probe_records"][:2] == [p.to_dict() for p in kept]  # not run again


def _issue_in_rounds(jobs, github_repo, example_script, tmp_path):
    """An issue labelled, planned, marked running and its rounds' state started, as the
    workflow's plan, started and rounds-start jobs do: (issue, state.json, outcome.json)."""
    issue = github_repo.add_issue("compiled cumsum is off", issue_body(example_script.read_text()),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    jobs.mark_running()
    state, outcome = tmp_path / "state.json", jobs.tmp / "outcome.json"
    assert main(["round", "from-plan", str(jobs.tmp / "plan.json"), "--state", str(state),
                 "--outcome", str(outcome), "--no-default-packages"]) == 0
    return issue, state, outcome


def test_an_index_gone_mid_run_is_reported_stopped_with_how_to_go_on(
        jobs, github_repo, mirror, example_script, tmp_path):
    """The index (download.pytorch.org from the runner) stopped answering during the run job:
    every build left was SKIP, and the issue was told "Ambiguous ... untestable builds hide
    it", a false word about the nightlies. The run stops; the report says why and how to go
    on from the builds tested."""
    issue = github_repo.add_issue("compiled cumsum is off", issue_body(example_script.read_text()),
                                  labels=("bisect",))
    # The second build's wheel is held back until the server has stopped (it stops once the
    # first verdict is checkpointed), so the run meets the index gone whatever its timing.
    server = IndexServer(mirror.root, faults=[
        Fault("torch-2.13.0.dev20260520", delay_s=1.0, times=1)]).start()
    url = server.url
    try:
        assert jobs.plan("issues", labeled_event(issue.number), "1", "--index", url + "{variant}/")
        outcome = jobs.tmp / "outcome.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
        run = subprocess.Popen(
            [BISECT_BOT, "run", str(jobs.tmp / "plan.json"), "--out", str(outcome),
             "--cache-dir", str(tmp_path / "fresh-cache"), "--no-default-packages",
             "--no-prefetch", "--no-triage"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while not outcome.exists() and run.poll() is None:  # the first verdict's checkpoint
            time.sleep(0.02)
    finally:
        server.stop()
    said, _ = run.communicate(timeout=300)
    assert run.returncode == 0, said
    written = json.loads(outcome.read_text())
    assert "did not answer" in written.get("stopped", ""), said[-3000:]
    assert [p for p in written["probe_records"] if p["verdict"] == "skip"] == [], said[-3000:]
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "## Bisection stopped before its answer" in comment.body
    assert f"The bisection stopped before its answer: the index {url}" in comment.body
    assert "To go on from where it stopped, comment" in comment.body
    assert "Ambiguous" not in comment.body


def test_an_issue_bisected_in_rounds_of_runners(jobs, github_server, github_repo, mirror,
                                                cache_dir, example_script, tmp_path, capsys):
    """The reusable workflow's `runners` input: plan, then rounds of parallel probe processes
    (no token), merged, then the same report job and one comment."""
    issue, state, outcome = _issue_in_rounds(jobs, github_repo, example_script, tmp_path)
    assert not outcome.exists()
    rounds, final = bisect_in_rounds(state, 8, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad and rounds <= 2, json.dumps(final)[:3000]
    assert main(["round", "outcome", str(state), "--out", str(outcome)]) == 0
    jobs.report()
    comments = bot_comments(issue)
    assert len(comments) == 1 and "Regression found" in comments[0].body
    assert "2.13.0.dev20260521+cpu" in comments[0].body
    assert "bisect: found" in issue.labels and github_server.rejected == []


def test_between_rounds_the_comment_shows_the_builds_tested_so_far(
        jobs, github_server, github_repo, mirror, cache_dir, example_script, tmp_path, capsys):
    """The triager's one comment goes queued -> progress table -> verdict (DESIGN): with
    rounds of runners the comment said "queued" until the last round was merged."""
    issue, state, outcome = _issue_in_rounds(jobs, github_repo, example_script, tmp_path)
    first_plan = tmp_path / "plan-1.json"  # the next trigger's plan job writes plan.json
    first_plan.write_text((jobs.tmp / "plan.json").read_text())
    progress = ["progress", str(outcome), "--plan", str(first_plan), "--config", str(jobs.config)]
    tested, rounds = [], 0
    while builds := plan_round(state, 1, capsys):
        rounds += 1
        (tmp_path / f"r{rounds}").mkdir()
        verdicts = probe_round(state, builds, cache_dir, tmp_path / f"r{rounds}")
        assert main(["round", "merge", str(state), *map(str, verdicts)]) == 0
        assert main(["round", "outcome", str(state), "--out", str(outcome)]) == 0
        if json.loads(state.read_text())["status"] != "unfinished":
            break  # answered: the workflow's progress job is skipped, the report follows
        assert main(progress) == 0
        (comment,) = bot_comments(issue)
        assert "\n## Bisection in progress\n" in comment.body
        assert "this table grows after each round" in comment.body
        tested += builds
        assert all(f"`{build}`" in comment.body for build in tested), comment.body
        between = outcome.read_text()
        assert "bisect: running" in issue.labels and "bisect: queued" not in issue.labels
        capsys.readouterr()
    assert rounds >= 2 and tested  # a probe a round: at least one round in between
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "Regression found" in comment.body and "Bisection in progress" not in comment.body
    # A newer trigger took the comment over: a late progress job leaves it alone.
    assert jobs.plan("issues", labeled_event(issue.number), "2")
    taken = bot_comments(issue)[0].body
    outcome.write_text(between)
    assert main(progress) == 0
    assert "belongs to another run now" in capsys.readouterr().err
    assert bot_comments(issue)[0].body == taken
    assert github_server.rejected == []


def test_a_cuda_reproducer_with_the_cpu_variant_is_answered_before_a_runner_is_taken(
        jobs, github_repo):
    """It used to be planned, then told "cannot test" by the run job, on a GPU runner."""
    script = "import torch\nx = torch.ones(3, device='cuda')\nprint(x.sum())\n"
    issue = github_repo.add_issue("cuda thing", issue_body(script), labels=("bisect",))
    assert not jobs.plan("issues", labeled_event(issue.number))
    (comment,) = bot_comments(issue)
    assert "## Cannot bisect this issue yet" in comment.body
    assert ("yet\n\nThe reproducer uses CUDA, but the builds to bisect are the cpu variant's, "
            "which have none: give variant=cu130 (or another CUDA variant).\n\n") in comment.body
    assert "Edit the issue: while it has the `bisect`" in comment.body
    assert "bisect: cannot-test" in issue.labels
    github_repo.set_role("alice", "write")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-02"))
    reply = bot_comments(issue)[-1].body
    assert reply.startswith("I cannot start this bisection: the reproducer uses CUDA, but the "
                            "builds to bisect are the cpu variant's, which have none: give "
                            "variant=cu130 (or another CUDA variant).\n\nOnce")


def test_rounds_of_a_plan_its_runner_cannot_test_say_why_and_start_nothing(
        jobs, github_repo, tmp_path):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((jobs.tmp / "plan.json").read_text())
    plan["reproducer"]["script"] = "import torch\nprint(torch.__version__\n"  # see above
    (jobs.tmp / "plan.json").write_text(json.dumps(plan))
    state, outcome = tmp_path / "state.json", jobs.tmp / "outcome.json"
    assert main(["round", "from-plan", str(jobs.tmp / "plan.json"), "--state", str(state),
                 "--outcome", str(outcome)]) == 0
    assert not state.exists()
    assert "is not valid Python" in json.loads(outcome.read_text())["error"]
    jobs.report()
    assert "bisect: cannot-test" in issue.labels


def test_a_cannot_test_of_a_command_s_bisection_says_to_comment_it_again_not_to_edit(
        jobs, github_repo, cache_dir):
    """An edit of the issue starts nothing for a command's bisection (and would drop its
    options): the comment told the triager to edit the issue."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"))
    github_repo.set_role("alice", "write")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-02"))
    plan = json.loads((jobs.tmp / "plan.json").read_text())
    plan["reproducer"]["script"] = "import torch\nprint(torch.__version__\n"
    (jobs.tmp / "plan.json").write_text(json.dumps(plan))
    assert jobs.outcome(cache_dir)["state"] == "cannot_test"
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "and comment the command again, with corrected options." in comment.body
    assert "Edit the issue" not in comment.body


@pytest.mark.parametrize("command", [["run"], ["mark-running"], ["round", "from-plan"]])
def test_a_missing_or_damaged_plan_is_one_line_not_a_traceback(command, tmp_path, capsys):
    damaged = tmp_path / "plan.json"
    damaged.write_text("{not json")
    for plan in (tmp_path / "missing.json", damaged):
        extra = ["--state", str(tmp_path / "s.json"), "--outcome", str(tmp_path / "o.json")] \
            if command[0] == "round" else []
        assert main([*command, str(plan), *extra]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and str(plan) in err and "plan" in err


HANGS_FROM_0521 = ("import time\nimport torch\n"
                   "if torch.__version__.split('.dev')[1][:8] >= '20260521':\n"
                   "    time.sleep(600)  # the regression: a compile that never ends\n")


def test_a_regression_that_hangs_is_found_with_hang_bad(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir):
    """A timeout is untestable by default; `hang=bad` makes it the failure it is."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compile hangs", issue_body(HANGS_FROM_0521))
    github_repo.set_role("alice", "triage")
    command = "/bisect good=2026-05-15 bad=2026-05-25 timeout=3 hang=bad"
    assert jobs.plan("issue_comment", comment_event(issue.number, command))
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == "2.13.0.dev20260521+cpu"
    jobs.report()
    assert "--on-timeout bad" in bot_comments(issue)[0].body  # the rerun command
    # without it, the hint says what to do
    assert jobs.plan("issue_comment", comment_event(
        issue.number, "/bisect good=2026-05-15 bad=2026-05-25 timeout=3"), run_id="2")
    assert jobs.outcome(cache_dir, "--no-triage")["status"] == "cannot-test"
    jobs.report()
    assert "If the hang is the bug, `hang=bad` in a command" in bot_comments(issue)[0].body


def test_a_variant_the_index_lacks_is_told_before_a_gpu_runner_is_taken(jobs, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.ones(2))\n"))
    github_repo.set_role("alice", "triage")
    assert not jobs.plan("issue_comment", comment_event(issue.number, "/bisect variant=cu999"))
    (reply,) = bot_comments(issue)
    assert "the index has no nightlies of the variant `cu999`" in reply.body
    assert "`variant=cpu`" in reply.body


def test_a_regression_found_names_the_commits_between_its_nightlies_likeliest_first(
    tmp_path, github_server, github_repo, monkeypatch, example_script
):
    """The GitHub comment named no culprit: the run job has no token to look commits up. The
    report job does: it maps both nightlies to main (their subjects name it), compares, and
    ranks the commits by the reproducer's operators and the triage."""
    import datetime as dt

    from bot.demo.index_server import IndexServer
    from bot.demo.mirror import build_mirror

    days = [dt.date(2026, 5, 15) + dt.timedelta(days=n) for n in range(10)]
    first_bad, nightly, nightly_main = dt.date(2026, 5, 21), {}, {}
    for day in days:
        if day == first_bad:
            culprit = github_repo.add_commit("[inductor] Reorder the cumsum scan lowering",
                                             files=("torch/_inductor/lowering.py",))
            github_repo.add_commit("Fix a typo in the docs", files=("docs/source/index.rst",))
        else:
            github_repo.add_commit(f"[dynamo] Unrelated change of {day}",
                                   files=("torch/_dynamo/eval_frame.py",))
        nightly_main[day] = github_repo.branches["main"]
        subject = f"{day.isoformat()} nightly release ({nightly_main[day]})"
        nightly[day] = github_repo.add_commit(subject, branch="nightly").sha
    mirror = build_mirror(tmp_path / "mirror", start=days[0], days=len(days), missing=(),
                          first_bad=first_bad, git_version_for=nightly.__getitem__)
    with IndexServer(mirror.root) as served:
        jobs = Jobs(tmp_path, github_server, monkeypatch, served.url)
        issue = github_repo.add_issue("compiled cumsum is off",
                                      issue_body(example_script.read_text()), labels=("bisect",))
        assert jobs.plan("issues", labeled_event(issue.number))
        # a cache of its own: the session's has builds of these versions with other commits
        assert jobs.outcome(tmp_path / "cache")["first_bad"] == mirror.first_bad
        jobs.report()
    body = bot_comments(issue)[0].body
    section = body[body.index("### Commits"):]
    good_main, bad_main = culprit.parents[0], nightly_main[first_bad]
    assert f"/compare/{good_main}...{bad_main} (2 commits)" in section
    assert body.count("/compare/") == 1  # not the nightly branch's link above it too
    suspects = [line for line in section.splitlines() if line.startswith("| [`")]
    assert suspects and suspects[0].startswith(f"| [`{culprit.sha[:10]}`]")
    assert "Inductor files (1); Inductor in the title" in suspects[0]  # the triage's clue
    assert "Fix a typo" not in section  # no clue points at it
    assert github_server.rejected == []


def test_a_suspect_is_found_by_an_operator_its_diff_changes(github_server, github_repo):
    """A fix to cumsum lives in aten/src/ATen/native/ReduceOps.cpp, whose name says nothing
    of cumsum: its patch, in the same reply as its files, does."""
    from bot.adapters.github import GitHubClient
    from bot.core.suspects import Clues
    from bot.jobs.triage_commits import PytorchCommits, commit_range

    base = github_repo.add_commit("Base", files=("README.md",)).sha
    ends = [github_repo.add_commit(f"2026-05-01 nightly release ({base})", branch="nightly").sha]
    github_repo.add_commit("Refactor the CUDA caching allocator", files=("c10/cuda/a.cpp",),
                           patches={"c10/cuda/a.cpp": "@@ -1 +1 @@\n-int a;\n+long a;"})
    culprit = github_repo.add_commit(
        "Use a wider accumulator in scans", files=("aten/src/ATen/native/ReduceOps.cpp",),
        patches={"aten/src/ATen/native/ReduceOps.cpp":
                 "@@ -5,2 +5,2 @@ TORCH_IMPL_FUNC(cumsum_out)\n-  cumsum_stub(self);\n"
                 "+  at::_cumsum_helper(self, acc_type);\n   return;"})
    ends.append(github_repo.add_commit(
        f"2026-05-02 nightly release ({github_repo.branches['main']})", branch="nightly").sha)
    source = PytorchCommits(lambda: GitHubClient("pytorch/pytorch", "test-token",
                                                 base_url=github_server.url))

    found = commit_range(source, ends[0], ends[-1], Clues(operators=("cumsum",)))
    assert [(s.commit.sha, s.reasons) for s in found.suspects] == [
        (culprit.sha, ("its diff touches `cumsum`",))]
    assert github_server.rejected == []


@pytest.mark.parametrize("count", [3, 60, 61])
def test_a_wide_window_is_ranked_by_titles_within_a_few_requests(github_server, github_repo,
                                                                  count):
    """A commit's files cost a request each: past FILES_UP_TO commits only titles rank them."""
    from bot.adapters.github import GitHubClient
    from bot.core.suspects import Clues
    from bot.jobs.triage_commits import FILES_UP_TO, PytorchCommits, commit_range

    assert FILES_UP_TO == 60  # 3 + 60 requests: a fifth of a filing's 300
    ends = []
    for n in range(count + 1):
        title = "[inductor] Change the scan lowering" if n == 2 else f"Change {n}"
        github_repo.add_commit(title, files=("torch/_inductor/lowering.py",) if n == 2 else ())
        ends.append(github_repo.add_commit(
            f"2026-05-{20 + n // count} nightly release ({github_repo.branches['main']})",
            branch="nightly").sha)
    source = PytorchCommits(lambda: GitHubClient("pytorch/pytorch", "test-token",
                                                 base_url=github_server.url))
    before = len(github_server.log)
    found = commit_range(source, ends[0], ends[-1], Clues(subsystem="Inductor"))
    asked = github_server.log[before:]
    assert len(found.commits) == count and found.suspects[0].commit.title.startswith("[inductor]")
    files = count <= 60
    # the two nightlies' subjects, then each commit with its files
    assert sum("/commits/" in line for line in asked) == 2 + (count if files else 0)
    assert source.spent == len(asked)
    assert sum("/compare/" in line for line in asked) == 1
    reasons = found.suspects[0].reasons
    assert ("Inductor files (1)" in reasons) == files and "Inductor in the title" in reasons
    assert ("ranked by their titles" in found.note) == (not files)


def test_commit_lookups_keep_within_their_request_budget(github_server, github_repo):
    """20 new sweep windows of 25 commits cost 560 requests, over a filing's 300: one source
    (a filing's) ranks by titles, then looks nothing up, past its budget."""
    from bot.adapters.github import GitHubClient
    from bot.core.suspects import Clues
    from bot.jobs.triage_commits import PytorchCommits, commit_range

    ends = [github_repo.add_commit("2026-05-01 nightly release (x)", branch="nightly").sha]
    for n in range(5):
        github_repo.add_commit(f"Change {n}", files=(f"torch/f{n}.py",))
    ends.append(github_repo.add_commit(
        f"2026-05-02 nightly release ({github_repo.branches['main']})", branch="nightly").sha)
    main = [c.sha for c in github_repo.history(github_repo.commits[github_repo.branches["main"]])]
    github_repo.commits[ends[0]].message = f"2026-05-01 nightly release ({main[-1]})"
    source = PytorchCommits(lambda: GitHubClient("pytorch/pytorch", "test-token",
                                                 base_url=github_server.url), budget=10)
    first = commit_range(source, ends[0], ends[1], Clues())
    assert len(first.commits) == 4 and all(c.files for c in first.commits)  # 3 + 4 requests
    second = commit_range(source, ends[0], ends[1], Clues())  # 7 + 3: no room for files
    assert not any(c.files for c in second.commits) and "ranked by their titles" in second.note
    third = commit_range(source, ends[0], ends[1], Clues())
    assert third.commits == () and "requests for commit lookups are spent" in third.note
    assert source.spent <= 10


def test_a_window_past_one_page_of_the_compare_is_read_whole_and_counted(github_server,
                                                                          github_repo):
    """Three days without a nightly make a window of 260 commits: the compare pages them 100
    at a time, and each page is a request of the budget."""
    from bot.adapters.github import GitHubClient
    from bot.core.suspects import Clues, render_range_markdown
    from bot.jobs.triage_commits import PytorchCommits, commit_range

    ends = [github_repo.add_commit("2026-05-01 nightly release (x)", branch="nightly").sha]
    for n in range(260):
        title = ("[inductor] Fix cumsum scan lowering for bool (#151003)" if n == 3
                 else f"[dynamo] Change {n} (#{151000 + n})")
        github_repo.add_commit(title, files=("torch/_dynamo/eval_frame.py",))
    ends.append(github_repo.add_commit(
        f"2026-05-04 nightly release ({github_repo.branches['main']})", branch="nightly").sha)
    main = [c.sha for c in github_repo.history(github_repo.commits[github_repo.branches["main"]])]
    github_repo.commits[ends[0]].message = f"2026-05-01 nightly release ({main[-1]})"
    source = PytorchCommits(lambda: GitHubClient("pytorch/pytorch", "test-token",
                                                 base_url=github_server.url))
    before = len(github_server.log)
    found = commit_range(source, ends[0], ends[1], Clues(operators=("cumsum",)))
    asked = github_server.log[before:]
    assert len(found.commits) == 259 and "(259 commits)" in render_range_markdown(found)
    assert found.suspects[0].commit.title.startswith("[inductor] Fix cumsum")
    assert sum("/compare/" in line for line in asked) == 3
    assert source.spent == len(asked) == 5


def test_a_reproducer_the_environments_python_cannot_compile_is_told_before_any_install(
        jobs, github_repo, cache_dir):
    """The plan job compiles the script with its own Python; the builds' Python may be older
    (a `type X = int` alias is Python 3.12's, a runner's environments may be 3.11's). The
    plan stands for one whose script the plan job's Python took."""
    issue = github_repo.add_issue("aliases", issue_body("import torch\nprint(torch.ones(3))\n"),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    plan = json.loads((jobs.tmp / "plan.json").read_text())
    plan["reproducer"]["script"] = "import torch\nshape = tuple[int, ...\n"
    (jobs.tmp / "plan.json").write_text(json.dumps(plan))
    own_cache = jobs.tmp / "cache"  # the shared one holds other tests' environments
    outcome = jobs.outcome(own_cache)
    assert outcome["state"] == "cannot_test"
    assert outcome["error"].startswith(f"the reproducer is not valid Python {PYTHON} at line 2 "
                                       "(shape = tuple[int, ...): SyntaxError: ")
    assert not list(own_cache.glob("envs/*")), "an environment was made for it"
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "not valid Python" in comment.body and "shape = tuple" in comment.body
    assert "bisect: cannot-test" in issue.labels


def test_labels_the_token_may_not_set_do_not_leave_the_bisection_queued_for_ever(
        jobs, github_server, github_repo, cache_dir):
    """The queued comment was made, then the label's 403 ended the plan job with a
    traceback: no plan, no run, no report, and a comment saying "queued" for good."""
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"),
                                  labels=("bisect",))
    github_server.inject(403, {"message": "Resource not accessible by integration"},
                         method="POST", path=r"/issues/\d+/labels$")
    assert jobs.plan("issues", labeled_event(issue.number))
    assert "Bisection queued" in bot_comments(issue)[0].body
    jobs.outcome(cache_dir, "--no-triage")
    jobs.report()
    (comment,) = bot_comments(issue)
    assert "Not reproduced" in comment.body and "bisect: not-reproduced" in issue.labels


def test_a_5xx_to_the_queued_comment_is_tried_again_once_it_is_seen_not_made(
        jobs, github_server, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"),
                                  labels=("bisect",))
    github_server.inject(500, {"message": "Server Error"}, method="POST", path=r"/comments$")
    assert jobs.plan("issues", labeled_event(issue.number))
    (queued,) = bot_comments(issue)
    assert "Bisection queued" in queued.body and "bisect: queued" in issue.labels


def test_a_command_with_only_a_bad_end_at_the_oldest_listed_nightly_is_queued(
        jobs, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"))
    github_repo.set_role("alice", "write")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect bad=2026-05-01"))
    plan = json.loads((jobs.tmp / "plan.json").read_text())
    assert [b["version"] for b in plan["builds"]] == ["2.13.0.dev20260501+cpu"]
    assert "Bisection queued" in bot_comments(issue)[0].body


def test_the_queued_comment_says_which_of_the_issue_s_ends_it_could_not_use_and_why(
        jobs, github_repo, cache_dir):
    """Only the plan job's log said so; the triager reads the comment, and the answer that
    replaces it says it again."""
    body = issue_body("import torch\nprint(torch.__version__)\n").replace(
        "compiled cumsum drifts from eager", "compiled cumsum drifts; it works in torch 2.11.0"
    ).replace("torch 2.13.0.dev20260521+cpu", "torch 2.13.0.dev20260509+cpu")  # not published
    issue = github_repo.add_issue("t", body, labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    (queued,) = bot_comments(issue)
    ends = queued.body.split("About the window's ends:\n\n", 1)[1].split("\n\n", 1)[0]
    lines = ends.splitlines()
    assert len(lines) == 2 and all(line.startswith("- ") for line in lines), ends
    assert "the issue reports 2.13.0.dev20260509+cpu, which the index does not list" in ends
    assert 'the issue says "works in torch 2.11.0", but good=2.11.0' in ends
    assert "searching back from the bad end" in ends
    jobs.outcome(cache_dir, "--no-triage")
    jobs.report()
    (answer,) = bot_comments(issue)
    assert "Not reproduced" in answer.body and f"About the window's ends:\n\n{ends}" in answer.body


def test_a_queued_comment_with_ends_the_issue_gives_as_they_are_has_no_notes(jobs, github_repo):
    issue = github_repo.add_issue("t", issue_body("import torch\nprint(torch.__version__)\n"),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    assert "About the window's ends" not in bot_comments(issue)[0].body


def test_the_comment_links_the_workflow_run_from_queued_to_failed(jobs, github_repo,
                                                                  example_script, monkeypatch):
    """The triager follows the bisection live, and reads every probe's log, from the comment:
    it named the run only in a hidden marker."""
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "pytorch/bisect-runs")
    url = "https://github.com/pytorch/bisect-runs/actions/runs/77"
    issue = github_repo.add_issue("compiled cumsum is off", issue_body(example_script.read_text()),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number), "77")
    [queued] = bot_comments(issue)
    assert f"It runs in [this workflow run]({url})." in queued.body
    (jobs.tmp / "outcome.json").write_text(json.dumps({"error": "the runner was lost"}))
    jobs.report()
    [failed] = bot_comments(issue)
    assert "Bisection failed" in failed.body and f"[the workflow run's log]({url})" in failed.body
