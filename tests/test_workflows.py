"""Every workflow (ours and the templates) passes actionlint and zizmor with no findings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.core.config import parse_config
from tests.actions_expressions import evaluate, truthy

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("workflows/*.yml")])
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    """The linter from the test extra; missing is a failure, never a skip."""
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def test_there_are_workflows_to_lint():
    names = {path.relative_to(ROOT).as_posix() for path in WORKFLOWS}
    assert {".github/workflows/bisect.yml", ".github/workflows/ci.yml",
            "workflows/torch-bisect-bot.yml"} <= names


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_actionlint_finds_nothing(path):
    done = subprocess.run([_tool("actionlint"), "-format", "{{json .}}", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout or "[]") == []


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_zizmor_finds_nothing(path):
    done = subprocess.run([_tool("zizmor"), "--offline", "--format", "json", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == []


def test_the_linters_do_find_problems(tmp_path):
    """The checks above can fail: an unpinned action and a script injection are caught."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: issue_comment\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - uses: actions/checkout@v4\n"
                   "      - run: echo \"${{ github.event.comment.body }}\"\n")
    lint = subprocess.run([_tool("actionlint"), str(bad)], capture_output=True, text=True)
    audit = subprocess.run([_tool("zizmor"), "--offline", "--format", "json", str(bad)],
                           capture_output=True, text=True)
    assert lint.returncode != 0 and "github.event.comment.body" in lint.stdout
    found = {finding["ident"] for finding in json.loads(audit.stdout)}
    assert {"unpinned-uses", "template-injection"} <= found


def test_run_job_holds_no_token_and_plan_and_report_least_permissions():
    jobs = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())["jobs"]
    assert jobs["run"]["permissions"] == {}
    assert "GITHUB_TOKEN" not in json.dumps(jobs["run"]) and "secrets" not in json.dumps(jobs["run"])
    assert jobs["plan"]["permissions"] == {"contents": "read", "issues": "write",
                                           "actions": "write"}
    assert jobs["report"]["permissions"] == {"issues": "write"}
    assert "issue.number" in jobs["run"]["concurrency"]["group"]


def test_rounds_over_runners_hold_no_token_and_report_when_done():
    workflow = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())
    jobs = workflow["jobs"]
    assert workflow[True]["workflow_call"]["inputs"]["runners"]["default"] == 1  # `on` is True
    rounds = ["rounds-start", "probe-1", "merge-1", "probe-2", "merge-2", "probe-3", "merge-3",
              "rounds-triage"]
    for name in rounds:
        assert jobs[name]["permissions"] == {}, name
        text = json.dumps(jobs[name])
        assert "GITHUB_TOKEN" not in text and "secrets" not in text, name
    assert {"run", "rounds-start", "merge-1", "merge-2", "merge-3",
            "rounds-triage"} <= set(jobs["report"]["needs"])
    scripts = "\n".join(step.get("run", "") for name in rounds for step in jobs[name]["steps"])
    for command in ("round from-plan", "round plan", "bisect-bot probe", "round merge",
                    "round outcome", "round triage"):
        assert command in scripts, command
    assert "inputs.runners" in jobs["run"]["if"] and "inputs.runners" in jobs["rounds-start"]["if"]
    # The triage runs on a GPU runner once any merge has an answer.
    triage = jobs["rounds-triage"]
    assert triage["runs-on"] == jobs["probe-1"]["runs-on"]
    assert all(f"needs.merge-{n}.outputs.triage == 'true'" in triage["if"] for n in (1, 2, 3))
    assert all("triage" in jobs[f"merge-{n}"]["outputs"] for n in (1, 2, 3))
    # Between rounds the comment shows the builds tested so far, before the report.
    for n in (1, 2):
        progress = jobs[f"progress-{n}"]
        assert f"merge-{n}" in progress["needs"] and progress["permissions"] == {"issues": "write"}
        assert f"needs.merge-{n}.outputs.done == 'false'" in progress["if"]
        assert "bisect-bot progress outcome/outcome.json" in progress["steps"][-1]["run"]
        assert f"progress-{n}" in jobs["report"]["needs"]


@pytest.mark.parametrize("path", [ROOT / ".github/workflows/bisect.yml",
                                  ROOT / "workflows/torch-bisect-bot-rounds.yml"],
                         ids=lambda path: path.name)
def test_a_dead_probe_job_skips_no_later_round(path):
    """A probe job that died (a lost runner) is planned again by the next round, so no job
    after it may carry the implicit `success()`, which looks at every job before it (a failed
    probe-1 would skip probe-2 through merge-1's success: actions/runner#2205)."""
    jobs = yaml.safe_load(path.read_text())["jobs"]

    def after_a_probe(name, seen=()):
        needs = jobs[name].get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        return any(n.startswith("probe-") or (n not in seen and after_a_probe(n, (*seen, n)))
                   for n in needs)

    later = [name for name in jobs if after_a_probe(name)]
    assert {"merge-1", "probe-2", "probe-3"} <= set(later)
    for name in later:
        condition = str(jobs[name].get("if", ""))
        assert "!cancelled()" in condition or "always()" in condition, name


def test_the_jobs_that_hold_a_token_install_only_the_plan_job_s_sealed_plan():
    """The plan artifact holds the wheel the token jobs install and run: a job that runs a
    reproducer (and holds the run's artifact credentials) must not be able to swap it."""
    jobs = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())["jobs"]
    assert "steps.seal.outputs.digest" in jobs["plan"]["outputs"]["digest"]
    seal = next(step for step in jobs["plan"]["steps"] if step.get("id") == "seal")
    holders = [name for name, job in jobs.items()
               if (job.get("permissions") or {}).get("issues") == "write" and name != "plan"]
    assert set(holders) == {"started", "progress-1", "progress-2", "report"}
    for name in holders:
        steps = jobs[name]["steps"]
        check = next(i for i, step in enumerate(steps) if "needs.plan.outputs.digest" in
                     json.dumps(step))
        install = next(i for i, step in enumerate(steps) if "pip install" in step.get("run", ""))
        assert check < install, name
        assert seal["run"].split("$(")[1].split(")")[0] in steps[check]["run"], name


def test_every_gpu_job_sets_up_the_python_the_plan_chose():
    """uv makes environments only with interpreters the runner has (downloads are off), so every
    job on a GPU runner sets up the plan job's `python` output beside the bot's own."""
    jobs = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())["jobs"]
    assert jobs["plan"]["outputs"]["python"] == "${{ steps.plan.outputs.python }}"
    on_gpu = [name for name, job in jobs.items() if "gpu-runner" in job["runs-on"]]
    assert set(on_gpu) == {"run", "probe-1", "probe-2", "probe-3", "rounds-triage"}
    for name in on_gpu:
        needs = jobs[name]["needs"]
        assert "plan" in ([needs] if isinstance(needs, str) else needs), name
        setup = [step["with"]["python-version"] for step in jobs[name]["steps"]
                 if step.get("uses", "").startswith("actions/setup-python@")]
        assert len(setup) == 1, name
        # setup-python puts every listed version on PATH; the last is `python`, the bot's own.
        versions = setup[0].strip().splitlines()
        assert versions[0] == "${{ needs.plan.outputs.python }}", name
        assert versions[-1] == "${{ inputs.python || '3.12' }}", name


def _event(name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A real webhook example (octokit's, tests/data/webhooks), changed for one case."""
    payload = json.loads((ROOT / "tests/data/webhooks" / f"{name}.1.json").read_text())
    change(payload)
    return payload


def _labeled(label: str) -> Callable[[dict[str, Any]], None]:
    return lambda payload: payload["label"].update(name=label)


def _edited(*labels: str) -> Callable[[dict[str, Any]], None]:
    return lambda payload: payload["issue"].update(labels=[{"name": n} for n in labels])


def _comment(body: str, on_pull_request: bool = False) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        payload["comment"]["body"] = body
        if on_pull_request:  # GitHub's issue_comment on a pull request: the issue has this key
            payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    return change


# (event, action's payload file, change, whether a job may start)
_STARTS = [
    ("issues", "issues.labeled", _labeled("bisect"), True),
    ("issues", "issues.labeled", _labeled("Bisect"), True),  # the plan job decides exactly
    ("issues", "issues.labeled", _labeled("triaged"), False),
    ("issues", "issues.labeled", _labeled("module: inductor"), False),
    ("issues", "issues.labeled", _labeled("bisect: queued"), False),  # the bot's own state label
    ("issues", "issues.edited", _edited("bisect", "bisect: cannot-test"), True),
    ("issues", "issues.edited", _edited("bisect", "bisect: found"), False),
    ("issues", "issues.edited", _edited("bug"), False),
    ("issue_comment", "issue_comment.created", _comment("@torch-bisect-bot bisect"), True),
    ("issue_comment", "issue_comment.created", _comment("@Torch-Bisect-Bot bisect"), True),
    ("issue_comment", "issue_comment.created", _comment("/bisect good=2026-05-01"), True),
    ("issue_comment", "issue_comment.created", _comment("cc @ezyang @eellison"), False),
    ("issue_comment", "issue_comment.created", _comment("Looks like a dynamo bug."), False),
    ("issue_comment", "issue_comment.created", _comment("@pytorchbot merge", True), False),
    ("issue_comment", "issue_comment.created", _comment("/bisect", True), False),
]


@pytest.mark.parametrize(("event", "example", "change", "starts"), _STARTS,
                         ids=[f"{e[1]}-{i}" for i, e in enumerate(_STARTS)])
def test_only_what_can_start_a_bisection_starts_a_job(event, example, change, starts):
    """Every other label and comment of a busy repository (pytorch/pytorch has thousands a
    day, most on pull requests) would take a hosted runner to find nothing to do. The
    conditions are evaluated as Actions does, on GitHub's own example payloads."""
    for path in (".github/workflows/bisect.yml", "workflows/torch-bisect-bot.yml"):
        workflow = yaml.safe_load((ROOT / path).read_text())
        assert workflow[True]["issues"]["types"] == ["labeled", "edited"], path  # `on` is True
    caller = yaml.safe_load((ROOT / "workflows/torch-bisect-bot.yml").read_text())["jobs"]
    plan = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())["jobs"]["plan"]
    context = {"github": {"event_name": event, "event": _event(example, change)}}
    for where, condition in (("caller", caller["bisect"]["if"]), ("plan", plan["if"])):
        assert truthy(evaluate(condition, context)) is starts, where


def test_the_expression_evaluator_follows_github_s_documented_examples():
    """The examples of GitHub's expression reference, so the test above can fail."""
    event = {"issue": {"labels": [{"name": "bug"}, {"name": "triage"}], "title": "Crash"}}
    context = {"github": {"event": event, "event_name": "issues"}}
    assert evaluate("contains('Hello world', 'llo')", context) is True
    assert evaluate("contains(github.event.issue.labels.*.name, 'bug')", context) is True
    assert evaluate("contains(github.event.issue.labels.*.name, 'bu')", context) is False
    assert evaluate("join(github.event.issue.labels.*.name, ', ')", context) == "bug, triage"
    assert evaluate("github.event.issue.title == 'CRASH'", context) is True  # ignores case
    assert evaluate("startsWith('Hello world', 'He')", context) is True
    assert evaluate("null == 0", context) is True
    assert evaluate("github.event.nothing.here", context) is None
    assert evaluate("github.event.nothing || 'default'", context) == "default"
    assert evaluate("!github.event.issue.pull_request", context) is True
    assert evaluate("fromJSON('{\"a\": 1}').a", context) == 1
    with pytest.raises(ValueError):
        evaluate("github.event_name == ", context)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_condition_of_every_workflow_can_be_read(path):
    """actionlint checks the syntax; this checks the evaluator reads all of it, so no
    condition it is trusted with above is read in part."""
    workflow = yaml.safe_load(path.read_text())
    conditions = [job["if"] for job in workflow["jobs"].values() if "if" in job]
    conditions += [step["if"] for job in workflow["jobs"].values()
                   for step in job.get("steps", []) if "if" in step]
    for condition in conditions:
        evaluate(str(condition), {"github": {"event_name": "issues", "event": {}},
                                  "inputs": {}, "needs": {}, "steps": {}, "matrix": {}})


def test_every_action_is_pinned_to_a_full_sha_with_a_version_comment():
    import re
    for path in WORKFLOWS:
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40}\s+# v\d", line), f"{path.name}: {line.strip()}"


def test_example_config_parses_to_the_defaults():
    assert parse_config((ROOT / ".github/torch-bisect-bot.yml").read_text()) == parse_config(None)


def test_a_probe_that_needs_several_gpus_goes_to_the_multi_gpu_runners():
    """A CUDA reproducer run with torchrun on N processes needs N GPUs on one runner: the plan
    job says how many (`gpus`), and every GPU job takes `multi-gpu-runner` then."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]  # `on:` reads as True in YAML 1.1
    assert inputs["multi-gpu-runner"]["default"] == ""
    jobs = workflow["jobs"]
    assert jobs["plan"]["outputs"]["gpus"] == "${{ steps.plan.outputs.gpus }}"
    on_gpu = [job["runs-on"] for job in jobs.values() if "gpu-runner" in job["runs-on"]]
    assert len(on_gpu) == 5 and set(on_gpu) == {
        "${{ (needs.plan.outputs.gpus > 1 && inputs.multi-gpu-runner) || inputs.gpu-runner "
        "|| 'gpu' }}"}


def test_an_input_callers_of_earlier_versions_pass_is_still_declared():
    """GitHub refuses to start a caller that passes an input the called workflow does not
    declare: the template once passed `variant`, which nothing reads any more."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]  # `on` is True
    assert inputs["variant"]["default"] == "" and "Not read" in inputs["variant"]["description"]
    assert "inputs.variant" not in (ROOT / ".github/workflows/bisect.yml").read_text()


def _invocations(path):
    """The words after `bisect-bot` of every command a workflow's steps run."""
    import re
    import shlex
    jobs = yaml.safe_load(path.read_text()).get("jobs") or {}
    for job in jobs.values():
        for step in job.get("steps") or ():
            script = re.sub(r"\\\n\s*", " ", step.get("run") or "")
            script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", script)
            for line in script.splitlines():
                if line.strip().startswith("#"):
                    continue
                for part in re.split(r"\|\||&&|;|\||\$\(|\)", line):
                    found = re.search(r"(?:^|\s)bisect-bot\s+(.*)$", part)
                    if found:
                        yield shlex.split(re.sub(r"\s\d?>&?\s*\S+", "", found.group(1)))


def test_every_bisect_bot_command_in_a_workflow_names_options_the_cli_has():
    """A workflow that passes a flag the CLI lost (or never had) fails only on GitHub, at
    night; every option the workflows give is one the named subcommand takes."""
    import argparse

    from bot.jobs.cli import build_parser

    def subcommand(words):
        parser, path = build_parser(), []
        while words:
            nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not nested or words[0] not in nested[0].choices:
                break
            parser, path, words = nested[0].choices[words[0]], [*path, words[0]], words[1:]
        return parser, path, words

    seen = set()
    for path in WORKFLOWS:
        for words in _invocations(path):
            parser, names, rest = subcommand(words)
            assert names, f"{path.name}: `bisect-bot {' '.join(words)}` names no subcommand"
            for word in rest:
                if word.startswith("--"):
                    option = word.split("=", 1)[0]
                    assert option in parser._option_string_actions, \
                        f"{path.name}: `bisect-bot {' '.join(names)}` has no {option}"
            seen.add(" ".join(names))
    assert {"plan", "run", "report", "round plan", "round merge", "sweep", "sweep-merge",
            "sweep-plan"} <= seen


def test_every_artifact_upload_overwrites_so_a_job_can_be_run_again():
    """upload-artifact v4 refuses (409) a name the run already has: 'Re-run failed jobs'
    after a lost runner failed at its upload, and a re-run collect job lost the history."""
    missing = []
    for path in WORKFLOWS:
        for name, job in (yaml.safe_load(path.read_text()).get("jobs") or {}).items():
            for step in job.get("steps") or ():
                uploads = "actions/upload-artifact@" in str(step.get("uses", ""))
                if uploads and (step.get("with") or {}).get("overwrite") is not True:
                    missing.append(f"{path.name}: {name}: {step['with'].get('name')}")
    assert missing == []


FAKE_GH = '''#!{python}
"""`gh api PATH [--jq FILTER]`: the JSON stored for PATH (its query aside), through jq."""
import json, os, subprocess, sys
args = sys.argv[1:]
assert args[:1] == ["api"], args
path = args[1]
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(path + "\\n")
routes = json.load(open(os.environ["FAKE_GH_ROUTES"]))
found = routes.get(path.split("?")[0])
if found is None:
    sys.exit("gh: Not Found (HTTP 404)")
text = json.dumps(found)
if "--jq" in args:
    jq = args[args.index("--jq") + 1]
    sys.exit(subprocess.run(["jq", "-r", jq], input=text, text=True).returncode)
print(text)
'''


def _run_step(tmp_path, workflow, job, step_id, routes):
    """A step's script as the runner runs it (bash -eo pipefail), with `gh` answering from
    `routes` and the real jq: its outputs, and the paths it asked for."""
    assert shutil.which("jq"), "jq is not installed (the runners have it)"
    steps = yaml.safe_load((ROOT / workflow).read_text())["jobs"][job]["steps"]
    script = next(step["run"] for step in steps if step.get("id") == step_id)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable))
    gh.chmod(0o755)
    (tmp_path / "routes.json").write_text(json.dumps(routes))
    output = tmp_path / "output"
    output.touch()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GITHUB_REPOSITORY": "pytorch/pytorch",
           "GITHUB_OUTPUT": str(output), "GH_TOKEN": "token",
           "FAKE_GH_ROUTES": str(tmp_path / "routes.json"), "FAKE_GH_LOG": str(tmp_path / "log")}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, (tmp_path / "log").read_text().splitlines()


def _sweep_run(number, event="schedule", branch="main", head="pytorch/pytorch",
               status="completed", conclusion="failure"):
    return {"id": number, "event": event, "head_branch": branch, "status": status,
            "conclusion": conclusion, "path": ".github/workflows/sweep.yml",
            "head_repository": {"full_name": head}, "repository": {"full_name": "pytorch/pytorch"}}


def _artifacts(expired=None):
    listed = [] if expired is None else [{"id": 7, "name": "bisect-history", "expired": expired}]
    return {"total_count": len(listed), "artifacts": listed}


def test_the_sweep_takes_the_history_of_its_own_runs_on_the_default_branch_alone(tmp_path):
    """Any run can upload a `bisect-history` artifact (a fork's pull request runs ci.yml), and
    the collect job, which holds `issues: write`, edits every issue the history names: the
    newest such artifact of the repository was taken, whoever uploaded it."""
    repo = "repos/pytorch/pytorch"
    routes = {
        repo: {"default_branch": "main"},
        # the repository's newest `bisect-history`: a fork's pull request uploaded it
        f"{repo}/actions/artifacts": {"total_count": 2, "artifacts": [
            {"id": 2, "name": "bisect-history", "expired": False,
             "workflow_run": {"id": 999, "head_repository_id": 123456789,
                              "head_branch": "evil-pr-branch"}},
            {"id": 1, "name": "bisect-history", "expired": False,
             "workflow_run": {"id": 555, "head_repository_id": 65600975,
                              "head_branch": "main"}}]},
        f"{repo}/actions/workflows/sweep.yml/runs": {"total_count": 7, "workflow_runs": [
            _sweep_run(1000, status="in_progress"),  # this very run
            _sweep_run(999, event="pull_request", head="mallory/pytorch"),  # its edited sweep.yml
            _sweep_run(998, event="pull_request", branch="main", head="mallory/pytorch"),
            _sweep_run(997, event="push", branch="feature"),
            _sweep_run(996, branch="main", head="mallory/pytorch"),
            _sweep_run(990),  # this repository's, its history expired
            _sweep_run(555, event="workflow_dispatch", conclusion="success"),
            _sweep_run(554)]},
        **{f"{repo}/actions/runs/{n}/artifacts": _artifacts(False)
           for n in (1000, 999, 998, 997, 996, 555, 554)},
        f"{repo}/actions/runs/990/artifacts": _artifacts(True),
    }
    outputs, asked = _run_step(tmp_path, ".github/workflows/sweep.yml", "plan", "previous",
                               routes)
    assert outputs == {"run-id": "555"}
    runs = next(path for path in asked if "/runs?" in path)
    assert "branch=main" in runs and "status=completed" in runs
    assert not any(f"/runs/{n}/" in path for path in asked for n in (1000, 999, 998, 997, 996))


def test_the_sweep_starts_a_history_when_its_own_runs_left_none(tmp_path):
    repo = "repos/pytorch/pytorch"
    routes = {
        repo: {"default_branch": "trunk"},
        f"{repo}/actions/artifacts": {"total_count": 1, "artifacts": [
            {"id": 2, "name": "bisect-history", "expired": False,
             "workflow_run": {"id": 999, "head_branch": "trunk"}}]},
        f"{repo}/actions/workflows/sweep.yml/runs": {"total_count": 2, "workflow_runs": [
            _sweep_run(999, event="pull_request", branch="trunk", head="mallory/pytorch"),
            _sweep_run(555, branch="main")]},  # no longer the default branch
        f"{repo}/actions/runs/999/artifacts": _artifacts(False),
        f"{repo}/actions/runs/555/artifacts": _artifacts(False),
    }
    outputs, _ = _run_step(tmp_path, ".github/workflows/sweep.yml", "plan", "previous", routes)
    assert outputs == {"run-id": ""}


def test_a_sweep_shard_ends_before_its_job_s_time_limit_and_uploads_what_it_did():
    """A shard killed at the job's timeout-minutes is cancelled: its export, the cases it
    finished, was never uploaded, and a nightly that hangs every case was never filed."""
    import re
    job = yaml.safe_load((ROOT / ".github/workflows/sweep.yml").read_text())["jobs"]["shard"]
    step = next(step for step in job["steps"] if "bisect-bot sweep " in step.get("run", ""))
    deadline = re.search(r"--deadline-minutes (\d+)", step["run"])
    assert deadline, "the sweep has no deadline"
    assert int(deadline.group(1)) + 20 <= step["timeout-minutes"] < job["timeout-minutes"] - 10
    upload = next(step for step in job["steps"] if "upload-artifact" in step.get("uses", ""))
    assert upload["if"] == "${{ !cancelled() }}" and "export-" in upload["with"]["path"]


def test_a_sweep_shard_on_ubuntu_24_04_may_make_the_sandbox_s_user_namespace():
    """ubuntu-latest runs the CPU shards as a user that is not root, and its AppArmor forbids
    the unprivileged user namespace the sandbox then needs (actions/runner-images#10443): the
    shard sets the sysctl before the sweep, and the step does nothing where it is not needed
    (this machine: root, or no such knob)."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/sweep.yml").read_text())
    steps = workflow["jobs"]["shard"]["steps"]
    names = [step.get("name", "") for step in steps]
    knob = names.index("Let the sandbox make its user namespace")
    assert knob < names.index("Sweep")
    script = steps[knob]["run"]
    assert "sudo -n sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in script
    done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_caller_that_leaves_out_the_bot_s_repository_is_told_at_once(tmp_path):
    """A called workflow's `github.repository` is the caller's: without `bot-repository` the
    plan job checks out pytorch/pytorch as the bot. The step after the checkout says which
    inputs are missing instead of letting pip build PyTorch for 15 minutes."""
    steps = yaml.safe_load((ROOT / ".github/workflows/bisect.yml").read_text())["jobs"]["plan"][
        "steps"]
    names = [step.get("name", "") for step in steps]
    check = names.index("Check that the bot was checked out")
    assert names.index("Check out the bot") < check < names.index("Install the bot")
    script = steps[check]["run"]
    (tmp_path / "bot-src").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "bot-src" / "pyproject.toml")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "bot-src" / "pyproject.toml").write_text('[project]\nname = "torch"\n')
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 1
    assert "set the workflow's bot-repository and bot-ref inputs" in done.stdout
