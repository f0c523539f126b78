"""A reproducer that takes command-line arguments (`python repro.py --size 8`) runs with those
the issue shows, or those given (`--args`, `args=`), in every run: probes, the triage, rounds
of runners, the GitHub jobs. Run without them, an argparse script whose flag is required
failed on every build alike ("not a regression"), and one whose flag has a default tested
something else ("not reproduced"). A run that stops at the script's own usage error is
"needs command-line arguments" (SKIP), never BAD. Real uv, real HTTP, real sandboxed runs.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from bot.core import issue_facts
from bot.core.bisection import Bisection
from bot.core.builds import existing_build
from bot.core.errors import UserError
from bot.core.issue_text import Reproducer, extract_reproducer
from bot.core.results import BisectResult, ProbeRecord
from bot.core.verdicts import Policy, RunResult, Stage, Verdict, judge
from bot.jobs.cli import main
from bot.jobs.resume import from_partial_outcome
from tests.jobs.github_helpers import Jobs, comment_event, labeled_event, sticky
from tests.jobs.test_rounds import bisect_in_rounds, start

# The mirror's planted builds round torch.compile's outputs to bfloat16: a running sum of 256
# values drifts from eager there, one of a single value (0.0) never does.
SCRIPT = '''import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--size", type=int, {how})
args = parser.parse_args()
print(f"size {{args.size}}")


def running_sum(values):
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


values = [((i * 37) % 101) / 101.0 for i in range(args.size)]
torch.testing.assert_close(torch.compile(running_sum)(values), running_sum(values))
'''
REQUIRED = SCRIPT.format(how="required=True")
DEFAULTED = SCRIPT.format(how="default=1")  # passes on every build when run without it


def _issue(script: str, command: str = "python repro.py --size 256") -> str:
    return ("### 🐛 Describe the bug\n\nThe compiled running sum drifts from eager.\n\n"
            f"Run it as `{command}`:\n\n```python\n{script}```\n\n"
            "### Versions\n\ntorch 2.13.0.dev20260521+cpu\n")


def _ran_with(records: list[dict], size: str) -> bool:
    outputs = [r["result"]["output"] for r in records if r.get("result")]
    return bool(outputs) and all(f"size {size}\n" in output for output in outputs)


@pytest.mark.parametrize(("text", "args"), [
    ("Run it as `python repro.py --size 8`", ("--size", "8")),
    ("```bash\n$ TORCH_LOGS=+dynamo python3 -u repro.py --size 8 --name 'a b' 2>&1 | tee log\n```",
     ("--size", "8", "--name", "a b")),
    ("```\ntorchrun --nproc_per_node 2 --standalone repro.py --bs 4 > out.txt\n```", ("--bs", "4")),
    ("`python -m torch.distributed.run --nproc_per_node=2 a/repro.py --x=1`", ("--x=1",)),
    ("```sh\npython repro.py \\\n  --size 8 \\\n  --steps 2\n```", ("--size", "8", "--steps", "2")),
    ("`python -W ignore repro.py --fast`", ("--fast",)),
    ("I run python repro.py --size 8 and it fails", ()),  # words, not a command
    ("`python repro.py --size $N`", ()),  # a shell's variable: not what the script saw
    ("`python repro.py --data ~/x.pt`", ()),  # the reporter's home folder
    ("`python -c 'import torch'`", ()),  # no script
    ("`python -m pytest test_repro.py -k cumsum`", ()),  # not the script's run
    ("Run `python repro.py --size 8`, and `python repro.py --size 9` works", ()),  # which?
    ("`python collect_env.py --json` then `python repro.py --size 8`", ("--size", "8")),
    ("`python repro.py " + "--a " * 40 + "`", ()),  # more than 32 words
])
def test_the_arguments_an_issue_runs_its_script_with_are_read(text, args):
    commands = issue_facts.command_lines(text.split("\n"), [text])
    assert issue_facts.reported_args(commands, lambda name: True)[0] == args


@pytest.mark.parametrize(("text", "why"), [
    ("`python repro.py --size $N`", "the arguments of `python repro.py --size $N` are not "
     "used: a shell would have changed `$N` (a variable, a glob or `~`) before the script "
     "saw it"),
    ("```sh\npython repro.py --data *.pt | tee log\n```", "the arguments of `python "
     "repro.py --data *.pt | tee log` are not used: a shell would have changed `*.pt`"),
    ("Run `python repro.py --size 8`, and `python repro.py --size 9` works",
     "the issue runs the reproducer with different arguments (`python repro.py --size 8`, "
     "`python repro.py --size 9`), so none of them are used: which run fails is not clear"),
    ("`python repro.py " + "--a " * 40 + "`", "are not used: the reproducer's arguments are "
     "at most 32 words and 1000 characters"),
])
def test_the_arguments_not_taken_from_an_issue_say_which_command_and_why(text, why):
    """They were dropped without a word: the bisection ran without them, and nobody knew."""
    commands = issue_facts.command_lines(text.split("\n"), [text])
    args, refused = issue_facts.reported_args(commands, lambda name: True)
    assert args == () and refused is not None and why in refused


def test_arguments_taken_or_never_given_need_no_word():
    for text in ("`python repro.py --size 8`", "`python repro.py`", "no command at all",
                 "`python repro.py --size 8` and again: `python repro.py --size 8 2>&1`"):
        commands = issue_facts.command_lines([text], [])
        assert issue_facts.reported_args(commands, lambda name: True)[1] is None, text


def test_the_arguments_are_taken_only_for_the_reproducer():
    block = "```python\nimport torch\nassert torch.ones(1).sum() == 1\n```\n\n"
    other = "```python\nimport torch\nprint(torch.zeros(2))\n```\n\n"
    command = "Run `python other.py --size 8`.\n"
    # The issue's only script: the command runs it, whatever its name.
    assert extract_reproducer(block + command).args == ("--size", "8")
    assert extract_reproducer(block + other + command).args == ()  # other.py is which?
    named = block.replace("import torch", "# other.py\nimport torch")
    assert extract_reproducer(named + other + command).args == ("--size", "8")  # its 1st line
    led = "Save this as other.py:\n\n" + block + "and this as b.py:\n\n" + other + command
    assert extract_reproducer(led).args == ("--size", "8")  # the line that introduces it
    assert extract_reproducer("Save this as a.py:\n\n" + block + "and this as b.py:\n\n"
                              + other + command).args == ()


def test_an_issue_s_arguments_survive_its_plan():
    found = extract_reproducer(_issue(REQUIRED))
    assert found.args == ("--size", "256")
    assert Reproducer.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def test_given_arguments_are_split_as_a_shell_would_and_capped():
    assert issue_facts.split_args("--size 8 --name 'a b' --x=\"1 2\"") == (
        "--size", "8", "--name", "a b", "--x=1 2")
    assert issue_facts.split_args("") == ()
    for refused in ("--name 'a b", "--x " * 40, "a" * 1001, "--x '\x1b[2J'"):
        with pytest.raises(UserError):
            issue_facts.split_args(refused)


def test_a_run_job_resumes_no_attempt_that_ran_with_other_arguments(tmp_path):
    """`run --resume outcome.json`: a lost attempt's verdicts hold for the same arguments
    only (a plan from another command's `args=`)."""
    builds = tuple(existing_build(f"/py{i}", f"2.13.0.dev2026052{i}") for i in range(3))
    start = BisectResult(builds, Bisection(3, 0), (), script_name="repro.py", index_url="",
                         options={"script_args": ["--size", "256"]})
    record = ProbeRecord(index=2, version=builds[2].version, verdict=Verdict.GOOD,
                         reason="exit 0", seconds=1.0)
    partial = tmp_path / "previous.json"
    for args, resumed in ((["--size", "1"], False), (["--size", "256"], True)):
        saved = replace(start, bisection=Bisection(3, 0).record(2, Verdict.GOOD),
                        probes=(record,), options={"script_args": args})
        partial.write_text(json.dumps(saved.to_dict()))
        assert bool(from_partial_outcome(partial, start).probes) is resumed


@pytest.mark.parametrize("output", [
    "usage: repro.py [-h] --size SIZE\nrepro.py: error: the following arguments are required: "
    "--size\n",
    "usage: repro.py [-h] [--size SIZE]\nrepro.py: error: unrecognized arguments: --sise 8\n",
    "Usage: repro.py [OPTIONS]\nTry 'repro.py --help' for help.\n\nError: Missing option "
    "'--size'.\n",  # click's
])
def test_a_run_that_stops_at_its_usage_error_cannot_be_tested(output):
    judged = judge(RunResult(Stage.RUN, exit_code=2, output=output), Policy())
    assert judged.verdict is Verdict.SKIP
    assert judged.reason.startswith("needs command-line arguments: ")
    # Not argparse's: a failure as any other.
    assert judge(RunResult(Stage.RUN, exit_code=2, output="error: the following arguments are "
                           "required"), Policy()).verdict is Verdict.BAD
    traced = "Traceback (most recent call last):\n  x\nValueError: usage: bad\n" + output
    assert judge(RunResult(Stage.RUN, exit_code=1, output=traced), Policy()).verdict \
        is Verdict.BAD


@pytest.mark.parametrize("script", [REQUIRED, DEFAULTED], ids=["required", "defaulted"])
def test_the_github_jobs_run_the_script_with_the_issue_s_arguments(
        script, tmp_path, github_server, github_repo, monkeypatch, index_server, mirror,
        cache_dir):
    """The auditor's case: labelled `bisect`, the required flag's issue read "not a
    regression" (exit 2 on every build), the defaulted one's "not reproduced"."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled running sum drifts", _issue(script),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    queued = sticky(issue)
    outcome = jobs.outcome(cache_dir)
    assert (outcome["status"], outcome["first_bad"]) == ("found", mirror.first_bad)
    assert "| script arguments | `--size 256` (the reproducer's argv in every run" in queued
    assert _ran_with(outcome["probe_records"], "256")
    assert outcome["triage"]["records"] and _ran_with(outcome["triage"]["records"], "256")
    jobs.report()
    body = sticky(issue)
    assert "Script arguments, in every run: `--size 256`" in body
    rerun = body[body.index("### Rerun locally"):].split("```")[1]
    assert "'--args=--size 256'" in rerun
    assert "bisect: found" in issue.labels


def test_a_triager_s_args_are_the_arguments_over_the_issue_s(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled running sum drifts",
                                  _issue(REQUIRED, "python repro.py --size 1"))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(
        issue.number, '/bisect good=2026-05-15 args="--size 256"'))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["reproducer"]["args"] == ["--size", "256"]
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert _ran_with(outcome["probe_records"], "256")


def _bisect_argv(target: Path, index_server, cache_dir: Path, tmp_path: Path, *extra: str
                 ) -> list[str]:
    return ["bisect", str(target), "--index", index_server.variant_url("cpu"),
            "--cache-dir", str(cache_dir), "--no-default-packages", "--no-commit-tier",
            "--no-bisector", "--good", "2026-05-15", "--bad", "2026-05-23",
            "--db", str(tmp_path / "history.sqlite3"), "--json", str(tmp_path / "report.json"),
            "--markdown", str(tmp_path / "report.md"), *extra]


def test_args_runs_a_script_file_with_them_and_the_rerun_command_carries_them(
        index_server, mirror, cache_dir, tmp_path, capsys):
    script = tmp_path / "repro.py"
    script.write_text(REQUIRED)
    assert main(_bisect_argv(script, index_server, cache_dir, tmp_path,
                             "--args=--size 256")) == 0
    assert "running it as `python repro.py --size 256`, as --args gives them" in \
        capsys.readouterr().err
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["status"] == "found" and data["first_bad"] == mirror.first_bad
    assert data["options"]["script_args"] == ["--size", "256"]
    assert _ran_with(data["probe_records"], "256")
    assert data["triage"]["records"] and _ran_with(data["triage"]["records"], "256")
    markdown = (tmp_path / "report.md").read_text()
    rerun = shlex.split(markdown[markdown.index("### Rerun locally"):].split("```")[1]
                        .removeprefix("sh\n"))
    assert "--args=--size 256" in rerun


def test_args_wins_over_the_issue_s(index_server, mirror, cache_dir, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue(DEFAULTED, "python repro.py --size 1"))
    assert main(_bisect_argv(issue, index_server, cache_dir, tmp_path, "--no-triage",
                             "--args", "--size 256")) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["first_bad"] == mirror.first_bad and _ran_with(data["probe_records"], "256")


def test_a_script_run_without_the_arguments_it_requires_cannot_be_tested(
        index_server, cache_dir, tmp_path, capsys):
    """It used to be "not a regression in range: fails on every build tested ... exit 2"."""
    script = tmp_path / "repro.py"
    script.write_text(REQUIRED)
    code = main(_bisect_argv(script, index_server, cache_dir, tmp_path, "--no-triage"))
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["status"] == "cannot-test", data["status"]
    assert code == 6
    assert all(r["verdict"] == "skip" and r["reason"].startswith(
        "needs command-line arguments: repro.py: error: the following arguments are required")
        for r in data["probe_records"])
    markdown = (tmp_path / "report.md").read_text()
    assert "It needs command-line arguments: give them with `args=\"...\"`" in markdown
    assert "show the `python repro.py ...` command in the issue" in markdown


REFUSED = ("the arguments of `python repro.py --size $SIZE` are not used: a shell would have "
           "changed `$SIZE` (a variable, a glob or `~`) before the script saw it")


def test_the_github_jobs_say_why_the_issue_s_arguments_were_not_used(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir):
    """Run without them, the defaulted script passes everywhere: "not reproduced", and
    neither comment said that the issue's `--size $SIZE` had been dropped."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled running sum drifts",
                                  _issue(DEFAULTED, "python repro.py --size $SIZE"),
                                  labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    assert (f"| script arguments | none: {REFUSED}; `args=\"...\"` gives them |"
            in sticky(issue))
    assert jobs.outcome(cache_dir, "--no-triage")["status"] == "not-reproduced"
    jobs.report()
    assert (f"Script arguments: none; {REFUSED}. Give them with `args=\"...\"` in a "
            "`/bisect` command (`--args='...'` locally).") in sticky(issue)


def test_bisect_says_why_the_issue_s_arguments_were_not_used(
        index_server, mirror, cache_dir, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue(DEFAULTED, "python repro.py --size $SIZE"))
    assert main(_bisect_argv(issue, index_server, cache_dir, tmp_path, "--no-triage")) == 4
    assert f"running it without arguments: {REFUSED}; --args gives them" in \
        capsys.readouterr().err
    assert f"Script arguments: none; {REFUSED}." in (tmp_path / "report.md").read_text()
    # Given, they are the arguments: nothing is said of the issue's.
    assert main(_bisect_argv(issue, index_server, cache_dir, tmp_path, "--no-triage",
                             "--args=--size 256")) == 0
    assert "running it without arguments" not in capsys.readouterr().err
    assert "Script arguments: none" not in (tmp_path / "report.md").read_text()


def test_rounds_of_runners_run_the_script_with_its_arguments(
        index_server, mirror, cache_dir, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue(REQUIRED))
    state = start(tmp_path, index_server, issue, "--good", "2026-05-15")
    assert json.loads(state.read_text())["options"]["script_args"] == ["--size", "256"]
    _, final = bisect_in_rounds(state, 4, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad
    assert _ran_with(final["probe_records"], "256")
