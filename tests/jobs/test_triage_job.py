"""Triage end to end over the synthetic nightly mirror: the conclusions name the planted bug."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.demo.index_server import IndexServer
from bot.demo.mirror import Mirror, build_mirror, fake_git_version
from bot.demo.synthetic_torch import BACKENDS, COMPILE, package_files
from bot.jobs import cli, local
from bot.jobs.demo import example_path
from bot.jobs.triage_job import after_bisect, make_shim_dir
from tests.fakes.commits import FakeCommitSource

FIRST_BAD = dt.date(2026, 5, 21)


def serve(tmp_path: Path, bug: dict[str, Any]) -> Iterator[tuple[Mirror, str]]:
    mirror = build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 15), days=10,
                          first_bad=FIRST_BAD, missing=(),
                          bug_for=lambda date: bug if date >= FIRST_BAD else None)
    with IndexServer(mirror.root) as server:
        yield mirror, server.variant_url(mirror.variant)


@pytest.fixture(params=[
    ({"subsystem": "aot_eager_decomp_partition", "kind": "wrong"}, "decompositions"),
    ({"subsystem": "inductor", "kind": "precision"}, "precision"),
], ids=["wrong-decomposition", "inductor-precision"])
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, ...]]:
    bug, expected = request.param
    for mirror, url in serve(tmp_path, bug):
        yield mirror, url, expected


def bisect_args(tmp_path: Path, url: str, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    local.add_bisect_arguments(parser)
    return parser.parse_args([
        str(example_path(tmp_path)), "--index", url, "--cache-dir", str(tmp_path / "cache"),
        "--no-default-packages", "--timeout", "60", "--good", "2026-05-15",
        "--work-dir", str(tmp_path / "work"),
        "--json", str(tmp_path / "report.json"), "--markdown", str(tmp_path / "report.md"),
        *extra,
    ])


def test_bisect_triages_the_first_bad_build(planted: tuple[Any, ...], tmp_path: Path) -> None:
    mirror, url, expected = planted
    assert local.bisect_main(bisect_args(tmp_path, url)) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["first_bad"] == mirror.first_bad
    triage = report["triage"]["triage"]
    assert triage["version"] == mirror.first_bad
    kinds = [f["kind"] for f in triage["findings"]]
    texts = " | ".join(f["text"] for f in triage["findings"])
    if expected == "decompositions":
        assert kinds == ["not-precision", "subsystem"]
        assert "fails from aot_eager_decomp_partition on: decompositions" in texts
        assert triage["labels"] == ["module: decompositions", "oncall: pt2",
                                    "module: correctness (silent)"]
    else:
        assert kinds == ["precision", "subsystem"] and triage["precision"] is True
        assert ("fails only with inductor (the eager, aot_eager and aot_eager_decomp_partition "
                "backends pass): Inductor") in texts
    # Triage runs are recorded like probes, with variant_env set, and stay out of the table.
    records = [p for p in report["probe_records"] if p["variant_env"]]
    assert len(records) == 7 and {p["version"] for p in records} == {mirror.first_bad}
    markdown = (tmp_path / "report.md").read_text()
    assert f"### Triage of `{mirror.first_bad}`" in markdown
    good_sha = fake_git_version(FIRST_BAD - dt.timedelta(days=1))
    assert f"compare/{good_sha}...{fake_git_version(FIRST_BAD)}" in markdown
    assert markdown.index("### Triage") < markdown.index("### Builds tested")


def test_no_triage_flag_skips_it(tmp_path: Path) -> None:
    for _, url in serve(tmp_path, {"subsystem": "inductor", "kind": "wrong"}):
        local.bisect_main(bisect_args(tmp_path, url, "--no-triage"))
    report = json.loads((tmp_path / "report.json").read_text())
    assert "triage" not in report
    assert not [p for p in report["probe_records"] if p["variant_env"]]


def test_commit_range_maps_nightlies_to_main_and_ranks(tmp_path: Path) -> None:
    source = FakeCommitSource()
    good_main = source.add_main("[dynamo] unrelated", ["torch/_dynamo/eval_frame.py"])
    source.add_main("[inductor] scan codegen rewrite", ["torch/_inductor/codegen/cpp.py"])
    source.add_main("Update docs", ["docs/source/index.rst"])
    bad_main = source.add_main("[inductor] keep bf16 precision in cumsum lowering",
                               ["torch/_inductor/lowering.py"])
    for date, sha in ((FIRST_BAD - dt.timedelta(days=1), good_main), (FIRST_BAD, bad_main)):
        source.add_nightly(fake_git_version(date), date.isoformat(), sha)
    for _, url in serve(tmp_path, {"subsystem": "inductor", "kind": "precision"}):
        args = bisect_args(tmp_path, url)
        plan = local.plan_from_args(args)
        _, outcome = after_bisect(args, plan, local.run_bisection(args, plan), source)
    assert outcome is not None and outcome.commits is not None
    commits = outcome.commits
    assert (commits.good_main, commits.bad_main) == (good_main, bad_main)
    assert commits.url == f"https://github.com/pytorch/pytorch/compare/{good_main}...{bad_main}"
    assert [s.commit.title for s in commits.suspects] == [
        "[inductor] keep bf16 precision in cumsum lowering", "[inductor] scan codegen rewrite"]
    assert f"compare {good_main}...{bad_main}" in source.lookups
    assert "keep bf16 precision in cumsum lowering" in outcome.markdown()


def test_commit_lookup_failure_still_reports_both_commits(tmp_path: Path) -> None:
    source = FakeCommitSource(fail_with=ConnectionError("api.github.com unreachable"))
    for _, url in serve(tmp_path, {"subsystem": "inductor", "kind": "wrong"}):
        args = bisect_args(tmp_path, url, "--no-bisector")
        plan = local.plan_from_args(args)
        _, outcome = after_bisect(args, plan, local.run_bisection(args, plan), source)
    assert outcome is not None and outcome.commits is not None
    assert "GitHub lookup failed: ConnectionError" in outcome.commits.note
    assert fake_git_version(FIRST_BAD) in outcome.markdown()


def test_triage_command_on_an_index_build_and_on_an_interpreter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    script = str(example_path(tmp_path))  # an issue: the reproducer is taken from it
    bad = f"2.13.0.dev{FIRST_BAD:%Y%m%d}+cpu"
    for _, url in serve(tmp_path, {"subsystem": "aot_eager", "kind": "crash"}):
        assert cli.main(["triage", script, "--build", bad, "--index", url, "--cache-dir",
                         str(tmp_path / "cache"), "--no-default-packages",
                         "--json", str(tmp_path / "t.json")]) == 0
    first = json.loads((tmp_path / "t.json").read_text())["triage"]
    assert first["subsystem"] == "AOTAutograd" and first["precision"] is None
    python = next((tmp_path / "cache" / "envs").glob("tbb-py*/bin/python"))
    assert cli.main(["triage", script, "--python", str(python)]) == 0
    out = capsys.readouterr().out
    assert f"Triage of {bad}:" in out
    assert "=> fails from aot_eager on: AOTAutograd / the dispatcher" in out
    # The reproducer taken from the issue was written to a folder that went with the triage.
    assert list(temp.glob("tbb-issue-*")) == []


def test_triage_takes_a_build_as_bisect_takes_an_end_and_refuses_what_it_cannot_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--build` takes a date or `latest` as `--good` does; an interpreter without torch is an
    error (it said "does not fail on this build"), and so is a run that could not be tested."""
    script = tmp_path / "repro.py"
    script.write_text("import torch\ntorch.testing.assert_close(torch.compile(lambda x: x)(1.0),"
                      " 1.0)\n")
    hang = tmp_path / "hang.py"
    hang.write_text("import time\nimport torch\ntime.sleep(60)\n")
    for _, url in serve(tmp_path, {"subsystem": "aot_eager", "kind": "crash"}):
        common = ["--index", url, "--cache-dir", str(tmp_path / "cache"),
                  "--no-default-packages", "--no-bisector"]
        assert cli.main(["triage", str(script), "--build", "2026-05-21", *common,
                         "--json", str(tmp_path / "t.json")]) == 0
        assert json.loads((tmp_path / "t.json").read_text())["triage"]["subsystem"] == \
            "AOTAutograd"
        assert cli.main(["triage", str(script), "--build", "yesterday", *common]) == 2
        assert "--build yesterday: give a version like" in capsys.readouterr().err
        # one exact build: a build the index lacks is not stood in for by the nearest one
        assert cli.main(["triage", str(script), "--build", "2.13.0.dev20990101+cpu",
                         *common]) == 2
        assert ("--build 2.13.0.dev20990101+cpu: no such build on the index; the nearest builds "
                "on it: 2.13.0.dev20260523+cpu, 2.13.0.dev20260524+cpu") in capsys.readouterr().err
        assert cli.main(["triage", str(hang), "--build", "latest", "--timeout", "2",
                         *common]) == 6  # cannot test, as bisect says it
        out = capsys.readouterr().out
        assert "could not be tested on this build (timed out after 2 s)" in out
        assert "does not fail" not in out
    python = str(next((tmp_path / "cache" / "envs").glob("tbb-py*/bin/python")))
    passes = tmp_path / "passes.py"
    passes.write_text("import torch\ntorch.testing.assert_close(1.0, 1.0)\n")
    assert cli.main(["triage", str(passes), "--python", python, "--no-bisector"]) == 4
    assert "does not fail on this build" in capsys.readouterr().out
    # A triage judges failures as the bisection did: another failure than --match's is not it.
    assert cli.main(["triage", str(script), "--python", python, "--no-bisector",
                     "--match", "CUDA error: an illegal memory access"]) == 6
    assert "the output does not match --match 'CUDA error: an illegal memory access'; " \
        "different failure" in capsys.readouterr().out
    assert cli.main(["triage", str(script), "--python", python, "--metric", "diff (\\S+)"]) == 2
    assert "--metric and --threshold go together" in capsys.readouterr().err
    assert cli.main(["triage", str(script), "--python", python, "--with", "einops"]) == 2
    assert "--with installs into the environment of --build" in capsys.readouterr().err
    assert cli.main(["triage", str(script), "--python", "/usr/bin/false"]) == 2
    assert cli.main(["triage", str(script), "--python", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("bisect-bot: error:") == 2


# A reproducer whose second call brings another size: Dynamo recompiles it with the size
# dynamic (automatic dynamic shapes), as most dynamic-shape regressions are met.
TWO_SIZES = """import torch


def running_sum(values):
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


compiled = torch.compile(running_sum)
for size in (8, 16):
    values = [((i * 37) % 101) / 101.0 for i in range(size)]
    torch.testing.assert_close(compiled(values), running_sum(values))
"""


@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic-shapes-bug", "any-shapes-bug"])
def test_a_failure_that_needs_dynamic_shapes_is_labelled_so(tmp_path: Path,
                                                             dynamic: bool) -> None:
    """The run with static shapes (torch.compile(dynamic=False), automatic dynamic shapes
    off) passes only when the planted bug needs symbolic sizes; the triage then says so and
    suggests `module: dynamic shapes`, beside the ladder's Inductor."""
    script = tmp_path / "repro.py"
    script.write_text(TWO_SIZES)
    bug = {"subsystem": "inductor", "kind": "wrong", "dynamic": dynamic}
    for mirror, url in serve(tmp_path, bug):
        assert cli.main(["triage", str(script), "--build", mirror.first_bad, "--index", url,
                         "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                         "--no-bisector", "--json", str(tmp_path / "t.json")]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    triage = data["triage"]
    static = next(r for r in data["records"]
                  if r["variant_env"]["TBB_TRIAGE"] == "static-shapes")
    assert static["variant_env"]["TBB_STATIC_SHAPES"] == "1"
    assert "TBB_FORCE_BACKEND" not in static["variant_env"]  # the reproducer's own backend
    assert triage["subsystem"] == "Inductor"
    texts = " | ".join(f["text"] for f in triage["findings"])
    if dynamic:
        assert static["verdict"] == "good"
        assert [f["kind"] for f in triage["findings"]] == [
            "not-precision", "subsystem", "dynamic-shapes"]
        assert ("passes with static shapes (torch.compile(dynamic=False), "
                "automatic_dynamic_shapes off): the failure needs dynamic shapes") in texts
        assert triage["labels"] == ["module: inductor", "oncall: pt2", "module: dynamic shapes",
                                    "module: correctness (silent)"]
    else:
        assert static["verdict"] == "bad"
        assert [f["kind"] for f in triage["findings"]] == ["not-precision", "subsystem"]
        assert "dynamic shapes" not in texts
        assert "module: dynamic shapes" not in triage["labels"]


def test_the_shim_forces_static_shapes_and_keeps_the_reproducer_s_backend(
        tmp_path: Path) -> None:
    """dynamic=False overrides the reproducer's dynamic=True, and Dynamo's switches go static
    for the recompiles; a torch without torch._dynamo.config is compiled all the same."""
    site = tmp_path / "site"
    files = package_files("2.13.0.dev20260521+cpu", "0" * 40,
                          {"subsystem": "aot_eager", "kind": "wrong", "dynamic": True})
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    script = ("import torch\n"
              "import torch._dynamo.config as config\n"
              "config.assume_static_by_default = False\n"
              "f = torch.compile(lambda xs: [x + 1 for x in xs], backend='aot_eager', "
              "dynamic=True)\n"
              "print(f([1.0, 2.0]), config.automatic_dynamic_shapes, "
              "config.assume_static_by_default)\n")
    shim = make_shim_dir()
    try:
        def run(env: dict[str, str], code: str = script) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=False, env={"PATH": "/usr/bin:/bin",
                                                    "PYTHONPATH": f"{shim}:{site}", **env})

        static = run({"TBB_STATIC_SHAPES": "1"})
        plain = run({})
        shutil.rmtree(site / "torch" / "_dynamo")
        older = run({"TBB_STATIC_SHAPES": "1"},
                    "import torch\nprint(torch.compile(lambda x: x, dynamic=True)([1.0]))\n")
    finally:
        shutil.rmtree(shim)
    assert static.returncode == 0, static.stderr
    assert static.stdout == "[2.0, 3.0] False True\n"
    assert "torch.compile forced to dynamic=False\n" in static.stderr
    assert plain.stdout == "[2.0, 2.0] True False\n"  # dynamic=True: the planted bug shows
    assert "backend=" not in static.stderr  # the reproducer's aot_eager ran: its bug showed
    assert (older.returncode, older.stdout) == (0, "[1.0]\n"), older.stderr


def test_a_triage_with_repeat_calls_a_variant_whose_runs_disagree_flaky(tmp_path: Path) -> None:
    """With `repeat`, each variant runs that many times, as the probes did: a failure that
    comes and goes is flaky (SKIP), and no conclusion rests on one of its runs."""
    counter = tmp_path / "runs"
    script = tmp_path / "sometimes.py"
    script.write_text(  # the baseline's two runs fail; then every other run, whatever the variant
        "import pathlib, torch\n"
        f"runs = pathlib.Path({str(counter)!r})\n"
        "count = int(runs.read_text()) if runs.exists() else 0\n"
        "runs.write_text(str(count + 1))\n"
        "fails = count < 2 or count % 2 == 0\n"
        "torch.testing.assert_close([1.0, 2.0], [1.0, 2.0 + fails])\n")
    for mirror, url in serve(tmp_path, {"subsystem": "inductor", "kind": "wrong"}):
        code = cli.main(["triage", str(script), "--build", mirror.first_bad, "--index", url,
                         "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                         "--sandbox", "none", "--no-bisector", "--repeat", "2",
                         "--json", str(tmp_path / "t.json")])
        assert code == 0
    data = json.loads((tmp_path / "t.json").read_text())
    records = {r["variant_env"]["TBB_TRIAGE"]: r for r in data["records"]}
    assert records["baseline"]["verdict"] == "bad" and len(records) >= 6
    assert all(r["runs"] == 2 for r in records.values())
    assert all(r["verdict"] == "skip" and r["reason"].startswith("flaky")
               for name, r in records.items() if name != "baseline")
    kinds = [f["kind"] for f in data["triage"]["findings"]]
    assert "precision" not in kinds and "subsystem" not in kinds


# torch 2.13's `compiler_bisector run`, as far as its steps go: one step a backend in the order
# of its BACKENDS, TORCH_COMPILE_BACKEND and TORCH_BISECT_BACKEND set, until one exits non-zero;
# then a step of that backend with TORCH_BISECT_SUBSYSTEM; then its result line.
FAKE_BISECTOR = """import os, subprocess, sys

BACKENDS = ["eager", "aot_eager", "aot_eager_decomp_partition",
            "aot_eager_decomp_partition_crossref", "inductor"]
command = sys.argv[1]
if command == "run":
    for backend in BACKENDS:
        env = dict(os.environ, TORCH_COMPILE_BACKEND=backend, TORCH_BISECT_BACKEND=backend)
        if subprocess.run(sys.argv[2:], env=env).returncode != 0:
            subprocess.run(sys.argv[2:], env=dict(env, TORCH_BISECT_SUBSYSTEM="lowerings",
                                                  TORCH_BISECT_MAX="-1"))
            print(f"\\nBisection complete: BisectionResult(backend={backend!r}, "
                  "subsystem='lowerings', bisect_number=3, debug_info='aten.add')", flush=True)
            break
    else:
        print("\\nBisection complete: no issue found", flush=True)
"""


def test_the_bisector_does_not_rerun_the_backends_the_ladder_saw_pass(tmp_path: Path) -> None:
    """compiler_bisector's first steps run the reproducer under eager, aot_eager, ... until
    one fails: the ladder's runs, again (on an H200 each costs 10-60 s, and the bisector ran
    out of its time). A backend whose ladder run passed is answered without running it; one
    the ladder lacks (crossref) and the failing one's steps still run."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    # Crossref layers on aot_eager_decomp_partition, below inductor, as in torch/_dynamo.
    layered = (*BACKENDS[:3], "aot_eager_decomp_partition_crossref", *BACKENDS[3:])
    files = {**package_files("2.13.0.dev20260521+cpu", "0" * 40,
                             {"subsystem": "inductor", "kind": "wrong"}),
             "torch/_compile.py": COMPILE.format(backends=layered),
             "torch/_inductor/__init__.py": "", "torch/_inductor/compiler_bisector.py":
             FAKE_BISECTOR}
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    script = tmp_path / "repro.py"
    script.write_text("import os, sys, torch\n"
                      "print('reproducer ran, backend', os.environ.get('TORCH_COMPILE_BACKEND'),"
                      " os.environ.get('TORCH_BISECT_SUBSYSTEM'), file=sys.stderr)\n"
                      "torch.testing.assert_close(torch.compile(lambda x: [x, x * 2])(1.0), "
                      "[1.0, 2.0])\n")
    assert cli.main(["triage", str(script), "--python", str(venv / "bin" / "python"),
                     "--json", str(tmp_path / "t.json")]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    bisector = next(r for r in data["records"]
                    if r["variant_env"]["TBB_TRIAGE"] == "compiler-bisector")
    output = bisector["result"]["output"]
    ran = [line.split("backend ", 1)[1] for line in output.splitlines()
           if line.startswith("reproducer ran")]
    assert ran == ["aot_eager_decomp_partition_crossref None", "inductor None",
                   "inductor lowerings"], output
    for backend in BACKENDS[:3]:
        assert (f"compiler_bisector's {backend} step answered from the backend ladder, whose "
                f"{backend} run passed: exit 0, not run again") in output
    assert bisector["variant_env"]["TBB_LADDER_PASSED"] == ",".join(BACKENDS[:3])
    # The finding is the bisector's as before, and only its run has the variable.
    triage = data["triage"]
    assert triage["bisector"] == {"backend": "inductor", "subsystem": "lowerings",
                                  "bisect_number": 3, "debug_info": "aten.add"}
    assert triage["subsystem"] == "Inductor"
    assert [r for r in data["records"] if "TBB_LADDER_PASSED" in r["variant_env"]] == [bisector]


@pytest.mark.parametrize(("env", "answered"), [
    ({"TORCH_COMPILE_BACKEND": "aot_eager", "TORCH_BISECT_BACKEND": "aot_eager"}, True),
    ({"TORCH_COMPILE_BACKEND": "inductor", "TORCH_BISECT_BACKEND": "inductor"}, False),
    ({"TORCH_COMPILE_BACKEND": "eager", "TORCH_BISECT_BACKEND": "eager",
      "TORCH_BISECT_SUBSYSTEM": "lowerings"}, False),  # a subsystem step: no ladder run's twin
    ({"TORCH_COMPILE_BACKEND": "eager"}, False),  # the variable, in the bisector itself
], ids=["passed", "not-passed", "subsystem-step", "not-a-step"])
def test_only_a_backend_step_the_ladder_saw_pass_is_answered_by_the_shim(
        env: dict[str, str], answered: bool) -> None:
    shim = make_shim_dir()
    try:
        done = subprocess.run([sys.executable, "-c", "print('the reproducer ran')"],
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(shim),
                                   "TBB_LADDER_PASSED": "eager,aot_eager", **env},
                              capture_output=True, text=True, check=False)
    finally:
        shutil.rmtree(shim)
    assert done.returncode == 0
    assert ("the reproducer ran" not in done.stdout) is answered
    assert ("answered from the backend ladder" in done.stderr) is answered


def test_a_triage_of_a_build_hides_the_environment_cache_from_the_reproducer(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """As a bisection does: `triage --build` ran the reproducer with the whole cache in
    view (the other environments, uv's cache; an audit). The cache is outside /tmp and the
    home, which every run gets empty views of anyway (`--cache-dir` on a data disk)."""
    cache = Path(__file__).resolve().parents[2] / ".cache" / f"triage-{uuid.uuid4().hex[:8]}"
    cache.mkdir(parents=True)
    request.addfinalizer(lambda: shutil.rmtree(cache, ignore_errors=True))
    (cache / "other-environment.txt").write_text("not the reproducer's")
    script = tmp_path / "repro.py"
    script.write_text(f"import os, torch\nassert not os.path.exists({str(cache)!r} + "
                      "'/other-environment.txt'), 'the cache is in view'\n")
    bad = f"2.13.0.dev{FIRST_BAD:%Y%m%d}+cpu"
    for _, url in serve(tmp_path, {"subsystem": "inductor", "kind": "precision"}):
        assert cli.main(["triage", str(script), "--build", bad, "--index", url, "--cache-dir",
                         str(cache), "--no-default-packages", "--no-bisector",
                         "--json", str(tmp_path / "t.json")]) == 4  # passes: the cache is hidden
    runs = json.loads((tmp_path / "t.json").read_text())["triage"]["runs"]
    assert runs and all("the cache is in view" not in run["reason"] for run in runs), runs


def test_a_change_and_its_revert_in_the_window_are_set_aside_and_said_so() -> None:
    """The revert's body names the reverted commit, as pytorchmergebot writes it."""
    from bot.core.suspects import Clues, render_range_markdown
    from bot.jobs.triage_commits import commit_range

    source = FakeCommitSource()
    good_main = source.add_main("[dynamo] unrelated", ["torch/_dynamo/eval_frame.py"])
    change = source.add_main("[inductor] Reorder the cumsum scan lowering (#151300)",
                             ["torch/_inductor/lowering.py"])
    other = source.add_main("[inductor] Refactor scheduler fusion heuristics (#151241)",
                            ["torch/_inductor/scheduler.py"])
    bad_main = source.add_main(
        'Revert "[inductor] Reorder the cumsum scan lowering (#151300)"',
        ["torch/_inductor/lowering.py"],
        body=f"This reverts commit {change}.\n\nReverted "
             "https://github.com/pytorch/pytorch/pull/151300 on behalf of someone")
    source.add_nightly("g" * 40, "2026-05-20", good_main)
    source.add_nightly("b" * 40, "2026-05-21", bad_main)
    found = commit_range(source, "g" * 40, "b" * 40,
                         Clues(operators=("cumsum",), subsystem="Inductor"))
    assert [s.commit.sha for s in found.suspects] == [other]
    text = render_range_markdown(found)
    assert "2 commits are changes reverted within the window and their reverts: not ranked" \
        in text


def test_a_wide_window_says_when_more_commits_tie_with_the_last_suspect_shown() -> None:
    from bot.core.suspects import Clues, render_range_markdown
    from bot.jobs.triage_commits import commit_range

    source = FakeCommitSource()
    good_main = source.add_main("[dynamo] unrelated", ["torch/_dynamo/eval_frame.py"])
    for n in range(8):
        source.add_main(f"[inductor] Change {n} of the scheduler (#{151200 + n})")
        source.add_main(f"[dynamo] Change {n} of graph breaks (#{151300 + n})")
    bad_main = source.add_main("[BE] Remove unused imports (#151400)")
    source.add_nightly("g" * 40, "2026-05-20", good_main)
    source.add_nightly("b" * 40, "2026-05-21", bad_main)
    text = render_range_markdown(commit_range(source, "g" * 40, "b" * 40,
                                              Clues(subsystem="Inductor")))
    assert "_3 more commits of the window score as much as the last one shown" in text


class _RateLimited:
    """pytorch/pytorch's client once the rate limit is spent: the compare lists the commits,
    but their files cannot be looked up."""

    def __init__(self, source: FakeCommitSource) -> None:
        self.source = source

    def get_commit(self, sha: str, with_files: bool = True) -> Any:
        if with_files:
            raise ConnectionError("API rate limit exceeded")
        return self.source.get_commit(sha)

    def compare(self, base: str, head: str, with_files: bool = True) -> Any:
        from dataclasses import replace

        return [replace(c, files=()) for c in self.source.compare(base, head)]


def test_a_rate_limit_while_files_are_looked_up_keeps_the_window_ranked_by_titles() -> None:
    """The compare listed the commits; a 403 on the third commit's files must not lose the
    window on main, its count and its suspects."""
    from bot.core.suspects import Clues
    from bot.jobs.triage_commits import PytorchCommits, commit_range

    source = FakeCommitSource()
    good_main = source.add_main("[dynamo] unrelated", ["torch/_dynamo/eval_frame.py"])
    source.add_main("[inductor] Fix cumsum scan lowering (#151300)",
                    ["torch/_inductor/lowering.py"])
    bad_main = source.add_main("[BE] Remove unused imports (#151400)", ["torch/utils/a.py"])
    source.add_nightly("g" * 40, "2026-05-20", good_main)
    source.add_nightly("b" * 40, "2026-05-21", bad_main)

    found = commit_range(PytorchCommits(lambda: _RateLimited(source)), "g" * 40, "b" * 40,
                         Clues(operators=("cumsum",)))
    assert (found.good_main, found.bad_main, len(found.commits)) == (good_main, bad_main, 2)
    assert found.suspects[0].commit.title.startswith("[inductor] Fix cumsum")
    assert found.note == ("2 commits: ranked by their titles (looking up their files failed: "
                          "ConnectionError: API rate limit exceeded)")


def test_a_window_of_one_commit_ranked_by_its_title_is_one_commit() -> None:
    """The note said "1 commits: ranked by their titles (looking up their files failed ...)"."""
    from bot.core.suspects import Clues
    from bot.jobs.triage_commits import PytorchCommits, commit_range

    source = FakeCommitSource()
    good_main = source.add_main("[dynamo] unrelated", ["torch/_dynamo/eval_frame.py"])
    bad_main = source.add_main("[inductor] Fix cumsum scan lowering (#151300)",
                               ["torch/_inductor/lowering.py"])
    source.add_nightly("g" * 40, "2026-05-20", good_main)
    source.add_nightly("b" * 40, "2026-05-21", bad_main)

    found = commit_range(PytorchCommits(lambda: _RateLimited(source)), "g" * 40, "b" * 40,
                         Clues(operators=("cumsum",)))
    assert len(found.commits) == 1
    assert found.note == ("1 commit: ranked by its title (looking up its files failed: "
                          "ConnectionError: API rate limit exceeded)")
