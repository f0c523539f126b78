"""A reproducer the issue runs with torchrun (`torchrun --nproc_per_node=2 repro.py`) is run that
way for every build: probes, the triage, rounds of runners, the GitHub jobs. Run as `python
repro.py`, a distributed script fails on every build alike ("RANK expected"), which reads as
"not a regression". Real uv, real HTTP, real sandboxed runs; the mirror's torch has a
`torch.distributed.run` that behaves as torchrun does towards a bisection (bot/demo/synthetic_torch.py),
and the script's ranks talk over the run's own loopback.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bot.core.issue_facts import reported_processes
from bot.core.issue_text import Reproducer, extract_reproducer
from bot.jobs.cli import main
from bot.jobs.gpu import gpu_slots
from bot.jobs.targets import processes_count
from tests.jobs.github_helpers import Jobs, comment_event, sticky
from tests.jobs.test_rounds import bisect_in_rounds, start

# Rank 1 sends its share to rank 0 over 127.0.0.1 (as gloo would); each rank then compares
# torch.compile's running sum with eager's, which the mirror's planted builds break.
SCRIPT = '''import os
import socket
import time
from itertools import accumulate

import torch

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
port = int(os.environ["MASTER_PORT"])
assert world == 2, world
if rank == 0:
    with socket.create_server(("127.0.0.1", port)) as server:
        peer, _ = server.accept()
        share = float(peer.recv(64).decode())
else:
    for _ in range(400):
        try:
            peer = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(0.025)
    share = 1.0 + rank
    peer.sendall(str(share).encode())
print(f"rank {rank} of {world}: share {share}")


def running_sum(values):
    return list(accumulate(values))


values = [share * ((i * 37) % 101) / 101.0 for i in range(256)]
torch.testing.assert_close(torch.compile(running_sum)(values), running_sum(values))
'''


@pytest.mark.parametrize(("text", "processes"), [
    ("torchrun --nproc_per_node=2 repro.py", "2"),
    ("TORCH_LOGS=+dynamo torchrun --nnodes=1 --nproc-per-node 4 --standalone test.py --bs 3",
     "4"),
    ("python -m torch.distributed.run --nproc_per_node=gpu x.py", "gpu"),
    ("python3 -m torch.distributed.launch --nproc_per_node 2 --use_env a/b/train.py", "2"),
    ("torchrun repro.py", "1"),  # torchrun's default
    ("run `torchrun --nnodes=2 --nproc_per_node=4 t.py`", "8"),  # the same world, one node
    ("torchrun --nnodes 4 --nproc_per_node=8 t.py", "16"),  # at most 16
    ("torchrun \\\n  --nproc_per_node=2 \\\n  repro.py", "2"),
    ("torchrun --nproc_per_node=2 --master_port 29501 repro.py", "2"),
    ('  File "/usr/bin/torchrun", line 8, in <module>', None),  # a traceback's frame
    ("python repro.py", None),
    ("we use torchrun in production", None),  # words, no script
])
def test_the_processes_an_issue_runs_its_script_on_are_read(text, processes):
    assert reported_processes(text) == processes


def _issue() -> str:
    return ("### 🐛 Describe the bug\n\nThe compiled running sum drifts on every rank.\n\n"
            f"```python\n{SCRIPT}```\n\nRun it with\n\n```\ntorchrun --nproc_per_node=2 "
            "repro.py\n```\n\n### Versions\n\ntorch 2.13.0.dev20260521+cpu\n")


def test_an_issue_s_processes_survive_its_plan():
    found = extract_reproducer(_issue())
    assert found.processes == "2"
    assert Reproducer.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def _ran_on_two_ranks(records: list[dict]) -> bool:
    outputs = [r["result"]["output"] for r in records if r.get("result")]
    return bool(outputs) and all("rank 0 of 2: share 2.0" in out and "rank 1 of 2" in out
                                 for out in outputs)


def test_a_local_bisection_and_its_triage_run_the_script_with_torchrun(
        index_server, mirror, cache_dir, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue())
    report = tmp_path / "report.json"
    assert main(["bisect", str(issue), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--no-commit-tier",
                 "--no-bisector", "--good", "2026-05-15", "--json", str(report),
                 "--markdown", str(tmp_path / "report.md")]) == 0
    assert "running it with torchrun on 2 processes, as the issue does" in \
        capsys.readouterr().err
    data = json.loads(report.read_text())
    assert data["status"] == "found" and data["first_bad"] == mirror.first_bad
    assert data["options"]["processes"] == "2"
    bad = next(r for r in data["probe_records"] if r["version"] == mirror.first_bad)
    # The rank's own failure, not torchrun's ChildFailedError.
    assert bad["reason"].startswith("AssertionError: Tensor-likes are not close!")
    assert "[rank" in bad["result"]["output"] and "ChildFailedError" in bad["result"]["output"]
    assert _ran_on_two_ranks(data["probe_records"])
    assert data["triage"]["records"], "the triage ran"
    assert _ran_on_two_ranks(data["triage"]["records"])
    assert "--nproc-per-node 2" in (tmp_path / "report.md").read_text()


def test_nproc_per_node_runs_a_script_file_with_torchrun(
        index_server, mirror, cache_dir, tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.json"
    common = ["--index", index_server.variant_url("cpu"), "--cache-dir", str(cache_dir),
              "--no-default-packages", "--no-commit-tier", "--no-triage",
              "--good", "2026-05-18", "--bad", "2026-05-22", "--json", str(report)]
    assert main(["bisect", str(script), "--nproc-per-node", "2", *common]) == 0
    assert json.loads(report.read_text())["first_bad"] == mirror.first_bad
    # The same script run by python alone fails alike everywhere: that is what was wrong.
    code = main(["bisect", str(script), *common, "--db", str(tmp_path / "h2.sqlite3")])
    plain = json.loads(report.read_text())
    assert plain["status"] != "found" and code != 0
    assert all("KeyError: 'RANK'" in r["reason"] for r in plain["probe_records"])


def test_rounds_of_runners_run_the_script_with_torchrun(
        index_server, mirror, cache_dir, tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text(_issue())
    state = start(tmp_path, index_server, issue, "--good", "2026-05-15")
    assert json.loads(state.read_text())["options"]["processes"] == "2"
    _, final = bisect_in_rounds(state, 4, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad
    assert _ran_on_two_ranks(final["probe_records"])


def test_the_github_jobs_run_the_script_with_torchrun_and_say_so(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled running sum drifts on every rank", _issue())
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-15"))
    assert "| launched with | `torchrun --nproc_per_node=2` (`--standalone`" in sticky(issue)
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert _ran_on_two_ranks(outcome["probe_records"])


def test_a_resumed_bisection_runs_with_torchrun_again(tmp_path):
    from bot.jobs.local import probe_options
    from bot.jobs.resume import stored_plan

    script = tmp_path / "repro.py"
    script.write_text("import torch\n")
    saved = {"options": {"processes": "2"},
             "resume": {"script": "import torch\n", "plan": {
                 "script": str(script), "index_url": "http://127.0.0.1:1/", "variant": "cpu",
                 "python": "3.11", "builds": [], "good_given": False, "needs_cuda": False}}}
    args = argparse.Namespace(resume_state=saved, db=tmp_path / "h.sqlite3", timeout=60.0,
                              repeat=1, on_timeout="skip", match=None, metric=None,
                              threshold=None, processes=None)
    assert stored_plan(args) is not None
    assert probe_options(args).processes == "2"


def test_each_worker_gets_a_gpu_a_process():
    assert gpu_slots(("0", "1", "2", "3"), "2") == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                    {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert gpu_slots(("0", "1", "2"), "2") == [{"CUDA_VISIBLE_DEVICES": "0,1"}]
    assert gpu_slots(("0", "1"), None) == [{"CUDA_VISIBLE_DEVICES": "0"},
                                           {"CUDA_VISIBLE_DEVICES": "1"}]
    assert gpu_slots(("0", "1"), "gpu") == [{"CUDA_VISIBLE_DEVICES": "0"},
                                            {"CUDA_VISIBLE_DEVICES": "1"}]
    assert gpu_slots((), "2") == []
    with pytest.raises(Exception, match="runs on 4 processes, a GPU each"):
        gpu_slots(("0", "1"), "4")


@pytest.mark.parametrize("text", ["0", "17", "-1", "two", "2.5"])
def test_nproc_per_node_takes_what_torchrun_takes(text):
    with pytest.raises(argparse.ArgumentTypeError):
        processes_count(text)
    assert [processes_count(t) for t in ("1", "16", "gpu", "auto")] == ["1", "16", "gpu", "auto"]


def test_a_bad_nproc_per_node_is_a_usage_error(capsys, tmp_path: Path):
    with pytest.raises(SystemExit) as stopped:
        main(["bisect", str(tmp_path / "x.py"), "--nproc-per-node", "0"])
    assert stopped.value.code == 2
    assert "expected 1 to 16, or gpu, cpu or auto" in capsys.readouterr().err


def _no_count() -> str:
    return _issue().replace("Run it with\n\n```\ntorchrun --nproc_per_node=2 repro.py\n```\n\n",
                            "It needs two ranks.\n\n")


def test_a_script_that_reads_torchrun_s_variables_runs_with_torchrun_where_the_issue_names_no_count(
        tmp_path, github_server, github_repo, monkeypatch, index_server, mirror, cache_dir):
    """Run as `python repro.py` it failed on every build alike: "not a regression"."""
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    found = extract_reproducer(_no_count())
    assert (found.processes, found.processes_guessed) == ("2", True)
    issue = github_repo.add_issue("running sum drifts on two ranks", _no_count())
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect good=2026-05-15"))
    assert ("| launched with | `torchrun --nproc_per_node=2` (a guess: the script reads "
            "torchrun's variables and the issue names no count; `nproc=N` sets it) |"
            in sticky(issue))
    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert _ran_on_two_ranks(outcome["probe_records"])


def test_a_triager_s_nproc_is_the_count_over_a_guess_and_over_the_issue_s(
        tmp_path, github_server, github_repo, monkeypatch, index_server):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    github_repo.set_role("alice", "triage")
    for body in (_no_count(), _issue()):
        issue = github_repo.add_issue("running sum drifts on two ranks", body)
        assert jobs.plan("issue_comment",
                         comment_event(issue.number, "/bisect good=2026-05-15 nproc=3"))
        assert ("| launched with | `torchrun --nproc_per_node=3` (`--standalone`"
                in sticky(issue))
        plan = json.loads((tmp_path / "plan.json").read_text())
        assert (plan["reproducer"]["processes"], plan["reproducer"]["processes_guessed"]) == (
            "3", False)


def test_the_plan_job_says_how_many_gpus_a_probe_needs(
        tmp_path, github_server, github_repo, monkeypatch, index_server):
    """The workflow sends a CUDA reproducer run on 4 processes to runners with several GPUs.
    (A CUDA variant's index: the plan job answers a CUDA reproducer on the cpu variant.)"""
    import datetime as dt
    import sys

    from bot.demo.index_server import IndexServer
    from bot.demo.mirror import build_mirror

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 1), days=3, missing=(),
                 variant="cu130", python_tags=(tag,), bug_for=lambda _: None)
    with IndexServer(tmp_path / "mirror") as served:
        jobs = Jobs(tmp_path, github_server, monkeypatch, served.url)
        body = (Path(__file__).resolve().parents[1] / "data" / "issues" /
                "torchrun_launched.md").read_text()
        issue = github_repo.add_issue("loss differs between ranks", body)
        github_repo.set_role("alice", "triage")
        assert jobs.plan("issue_comment", comment_event(issue.number, "/bisect variant=cu130"))
        assert "gpus<<" in jobs.output.read_text() and "\n4\n" in jobs.output.read_text()
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    plain = github_repo.add_issue("one process", _issue().replace(
        "torchrun --nproc_per_node=2 repro.py", "python repro.py"))
    assert jobs.plan("issue_comment", comment_event(plain.number, "/bisect variant=cpu"))
    outputs = jobs.output.read_text()
    assert outputs[outputs.index("gpus<<"):].splitlines()[1] == "1"
