"""The variables an issue runs its script with (`TORCHINDUCTOR_FREEZING=1 python repro.py`) are
set for every run of it: probes, the triage, rounds of runners, the GitHub jobs. Real uv, real
HTTP, real sandboxed runs; the script itself checks that it got them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.issue_facts import reported_env
from bot.core.issue_text import Reproducer, extract_reproducer
from bot.jobs.cli import main
from tests.jobs.github_helpers import Jobs, comment_event, sticky
from tests.jobs.test_rounds import bisect_in_rounds, start

NEEDS = ("import os\nif os.environ.get('TORCHINDUCTOR_FREEZING') != '1':\n"
         "    raise SystemExit('run without TORCHINDUCTOR_FREEZING=1')\n")


@pytest.mark.parametrize(("text", "env"), [
    ("run `TORCHINDUCTOR_FREEZING=1 python repro.py`", {"TORCHINDUCTOR_FREEZING": "1"}),
    ('$ TORCH_LOGS="+dynamo,graph" CUDA_LAUNCH_BLOCKING=1 python3.12 x.py',
     {"TORCH_LOGS": "+dynamo,graph", "CUDA_LAUNCH_BLOCKING": "1"}),
    ("export TORCHDYNAMO_VERBOSE=1\nexport LD_PRELOAD=/evil.so\n", {"TORCHDYNAMO_VERBOSE": "1"}),
    ("LD_PRELOAD=/x.so PYTHONPATH=/y python a.py", {}),  # not torch's: never taken
    ("TORCHINDUCTOR_CACHE_DIR=/x TRITON_HOME=/y python a.py", {}),  # the runner's folders
    ("PYTORCH_NO_CUDA_MEMORY_CACHING=1 torchrun --nproc-per-node 2 a.py",
     {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    ("I set TORCH_LOGS=+dynamo and it printed a lot", {}),  # words, not a command line
])
def test_the_variables_an_issue_runs_its_script_with_are_read(text, env):
    assert dict(reported_env(text)) == env


def _issue(example_script: Path) -> str:
    script = example_script.read_text().replace("\nimport torch\n", "\nimport torch\n" + NEEDS, 1)
    return ("### 🐛 Describe the bug\n\nCompiled with freezing, the running sum drifts. Run it "
            "as `TORCHINDUCTOR_FREEZING=1 python repro.py`.\n\n"
            f"```python\n{script}```\n\n### Versions\n\ntorch 2.13.0.dev20260521+cpu\n")


def test_an_issue_s_variables_survive_its_plan():
    found = extract_reproducer("Run `TORCHINDUCTOR_FREEZING=1 python repro.py`.\n\n"
                               "```python\nimport torch\nprint(torch.ones(1))\n```\n")
    assert found.env == (("TORCHINDUCTOR_FREEZING", "1"),)
    assert Reproducer.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def test_a_local_bisection_and_its_triage_run_with_the_issue_s_variables(
        index_server, mirror, cache_dir, example_script, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue(example_script))
    report = tmp_path / "report.json"
    assert main(["bisect", str(issue), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--no-commit-tier",
                 "--good", "2026-05-15", "--json", str(report)]) == 0
    assert "running it with TORCHINDUCTOR_FREEZING=1, as the issue does" in \
        capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["first_bad"] == mirror.first_bad
    assert data["options"]["env"] == {"TORCHINDUCTOR_FREEZING": "1"}
    runs = [r["result"]["output"] for r in data["probe_records"]]
    assert runs and not any("run without" in output for output in runs)
    assert data["triage"]["records"], "the triage ran"
    assert not any("run without" in r["result"]["output"] for r in data["triage"]["records"])


def test_rounds_of_runners_run_with_the_issue_s_variables(
        index_server, mirror, cache_dir, example_script, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue(example_script))
    state = start(tmp_path, index_server, issue, "--good", "2026-05-15")
    assert json.loads(state.read_text())["options"]["issue_env"] == {"TORCHINDUCTOR_FREEZING": "1"}
    _, final = bisect_in_rounds(state, 4, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad


def test_the_github_jobs_run_with_the_issue_s_variables_and_say_so(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir,
        example_script):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled cumsum drifts with freezing", _issue(example_script))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-15"))
    assert "| variables | `TORCHINDUCTOR_FREEZING=1` (set for every run) |" in sticky(issue)
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert not any("run without" in r["result"]["output"] for r in outcome["probe_records"])


def test_a_resumed_bisection_runs_with_the_issue_s_variables_again(tmp_path):
    from argparse import Namespace

    from bot.jobs.local import probe_options
    from bot.jobs.resume import stored_plan

    script = tmp_path / "repro.py"
    script.write_text("import torch\n")
    saved = {"options": {"env": {"TORCHINDUCTOR_FREEZING": "1"}},
             "resume": {"script": "import torch\n", "plan": {
                 "script": str(script), "index_url": "http://127.0.0.1:1/", "variant": "cpu",
                 "python": "3.11", "builds": [], "good_given": False, "needs_cuda": False}}}
    args = Namespace(resume_state=saved, db=tmp_path / "h.sqlite3", timeout=60.0, repeat=1,
                     on_timeout="skip", match=None, metric=None, threshold=None)
    assert stored_plan(args) is not None
    assert dict(probe_options(args).env) == {"TORCHINDUCTOR_FREEZING": "1"}


def test_a_script_file_runs_with_the_variables_given_and_the_rerun_keeps_them(
        index_server, mirror, cache_dir, example_script, tmp_path, capsys):
    script = tmp_path / "repro.py"
    script.write_text(example_script.read_text().replace("\nimport torch\n",
                                                         "\nimport torch\n" + NEEDS, 1))
    report, markdown = tmp_path / "report.json", tmp_path / "report.md"
    common = [str(script), "--index", index_server.variant_url("cpu"), "--cache-dir",
              str(cache_dir), "--no-default-packages", "--no-commit-tier", "--no-triage",
              "--good", "2026-05-18", "--bad", "2026-05-22"]
    assert main(["bisect", *common, "--env", "TORCHINDUCTOR_FREEZING=1", "--json", str(report),
                 "--markdown", str(markdown)]) == 0
    assert json.loads(report.read_text())["first_bad"] == mirror.first_bad
    assert "--env TORCHINDUCTOR_FREEZING=1" in markdown.read_text()
    capsys.readouterr()
    assert main(["bisect", *common, "--env", "LD_PRELOAD=/x.so"]) == 2
    assert "--env: LD_PRELOAD: only torch's, Triton's and CUDA's switches" in \
        capsys.readouterr().err


def test_a_command_s_variables_are_set_beside_the_issue_s(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir,
        example_script):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    body = _issue(example_script).replace("Run it as `TORCHINDUCTOR_FREEZING=1 python "
                                          "repro.py`.", "")
    assert extract_reproducer(body).env == ()
    issue = github_repo.add_issue("compiled cumsum drifts with freezing", body)
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(
        issue.number, '/bisect good=2026-05-15 env="TORCHINDUCTOR_FREEZING=1 TORCH_LOGS=+dynamo"'))
    assert "| variables | `TORCHINDUCTOR_FREEZING=1`, `TORCH_LOGS=+dynamo` (set for every run) |" \
        in sticky(issue)
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert not any("run without" in r["result"]["output"] for r in outcome["probe_records"])
