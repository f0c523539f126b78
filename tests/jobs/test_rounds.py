"""Rounds across runners: start, plan, parallel `probe` processes, merge, until there is an answer."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.core.results import BisectResult
from bot.demo.index_server import Fault, IndexServer
from bot.demo.mirror import build_mirror
from bot.jobs.cli import main
from bot.jobs.demo import example_path

BISECT_BOT = shutil.which("bisect-bot", path=str(Path(sys.executable).parent))


def start(tmp_path, index_server, script, *extra):
    state = tmp_path / "state.json"
    code = main(["round", "start", str(script), "--index", index_server.variant_url("cpu"),
                 "--no-default-packages", "--state", str(state),
                 "--work-dir", str(tmp_path / "work"), *extra])
    assert code == 0
    return state


def plan(state, width, capsys, environ=None):
    assert main(["round", "plan", str(state), "--width", str(width)]) == 0
    return [entry["build"] for entry in json.loads(capsys.readouterr().out)["include"]]


def probe_round(state, builds, cache_dir, folder):
    """The round's matrix jobs, one process per build, side by side like runners; like the
    workflow's probe jobs they hold no GitHub token or variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
    jobs = {build: subprocess.Popen(
        [BISECT_BOT, "probe", str(state), "--build", build, "--out",
         str(folder / f"verdict-{build}.json"), "--cache-dir", str(cache_dir), "--sandbox", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for build in builds}
    for build, job in jobs.items():
        output, _ = job.communicate()
        assert job.returncode == 0, f"{build}: {output}"
    return [folder / f"verdict-{build}.json" for build in builds]


def bisect_in_rounds(state, width, cache_dir, tmp_path, capsys):
    rounds = 0
    while builds := plan(state, width, capsys):
        rounds += 1
        folder = tmp_path / f"round-{rounds}"
        folder.mkdir()
        verdicts = probe_round(state, builds, cache_dir, folder)
        assert main(["round", "merge", str(state), *map(str, verdicts)]) == 0
        capsys.readouterr()
        assert rounds <= 10, "the rounds do not converge"
    return rounds, json.loads(state.read_text())


def test_rounds_of_parallel_probes_find_the_planted_nightly(
        index_server, mirror, cache_dir, example_script, tmp_path, capsys, monkeypatch):
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    assert len(json.loads(state.read_text())["builds"]) == 30
    rounds, final = bisect_in_rounds(state, 8, cache_dir, tmp_path, capsys)
    assert final["status"] == "found"
    assert final["first_bad"] == mirror.first_bad == "2.13.0.dev20260521+cpu"
    assert final["last_good"] == "2.13.0.dev20260520+cpu"
    assert rounds <= 3
    summary = tmp_path / "summary.md"
    summary.write_text("")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["round", "report", str(state), "--github-summary"]) == 0
    assert "Regression found" in capsys.readouterr().out
    assert "2.13.0.dev20260521+cpu" in summary.read_text()
    assert len(final["probes"]) <= 3 * 8


def test_one_wide_round_then_nothing_left_to_plan(index_server, cache_dir, example_script,
                                                 tmp_path, capsys, monkeypatch):
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert main(["round", "plan", str(state), "--width", "3", "--github-output"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["include"]) == 3
    assert outputs(output) == {"matrix": json.dumps(printed, separators=(",", ":")),
                               "done": "false", "triage": "false"}
    bisect_in_rounds(state, 30, cache_dir, tmp_path, capsys)
    output.write_text("")
    assert main(["round", "plan", str(state), "--width", "3", "--github-output"]) == 0
    assert json.loads(capsys.readouterr().out) == {"include": []}
    # Found: the workflow starts one more GPU runner to triage the first bad build.
    assert outputs(output) == {"matrix": '{"include":[]}', "done": "true", "triage": "true"}


def test_a_round_wider_than_an_actions_matrix_is_refused_before_it_is_planned(
        index_server, example_script, tmp_path, capsys):
    """`runners: 300` planned a matrix of 300 jobs, which Actions refuses at the run's start:
    the workflow failed there, with GitHub's words, after the plan job had said "queued"."""
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    before = state.read_text()
    assert main(["round", "plan", str(state), "--width", "257"]) == 2
    assert ("--width 257: a GitHub Actions matrix holds at most 256 jobs; give at most 256 "
            "runners") in capsys.readouterr().err
    assert state.read_text() == before
    assert len(plan(state, 256, capsys)) > 0


def outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT's `name<<DELIMITER` entries (one-line values)."""
    lines = path.read_text().splitlines()
    return {lines[i].split("<<")[0]: lines[i + 1] for i in range(0, len(lines), 3)}


def test_the_signature_rule_of_the_engine_applies_to_merged_rounds(
        index_server, cache_dir, tmp_path, capsys):
    # Old builds fail differently from new ones: the bad end's failure defines BAD, so the old
    # failure is SKIP ("different failure"), exactly as in `bisect`.
    script = tmp_path / "two_failures.py"
    script.write_text("import torch\nday = int(torch.__version__.split('dev')[1][6:8])\n"
                      "if day >= 21: raise RuntimeError('new failure')\n"
                      "if day <= 5: raise ValueError('old failure')\n")
    state = start(tmp_path, index_server, script, "--good", "2026-05-01")
    _, final = bisect_in_rounds(state, 8, cache_dir, tmp_path, capsys)
    verdicts = {p["version"]: (p["verdict"], p["reason"]) for p in final["probes"]}
    assert final["first_bad"] == "2.13.0.dev20260521+cpu"
    assert final["signature"] and "RuntimeError" in final["signature"]
    old = [reason for verdict, reason in verdicts.values() if verdict == "skip"]
    assert old and all("different failure" in reason for reason in old)


@pytest.fixture
def half_done(index_server, cache_dir, example_script, tmp_path, capsys):
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    builds = plan(state, 2, capsys)
    verdicts = probe_round(state, builds, cache_dir, tmp_path)
    return state, verdicts


def merge(state, verdicts, capsys):
    """A merge that takes what it can: exit 0, its warnings (never a traceback) and status."""
    code = main(["round", "merge", str(state), *map(str, verdicts)])
    captured = capsys.readouterr()
    assert code == 0 and "Traceback" not in captured.err
    return captured.err, json.loads(captured.out)


def probes_of(state):
    return BisectResult.from_dict(json.loads(state.read_text())).probes


def test_a_merge_again_or_with_an_earlier_round_s_files_changes_nothing(half_done, capsys):
    """workflows/README's `round merge state.json verdict-*.json` picks up every round's files."""
    state, verdicts = half_done
    err, _ = merge(state, [verdicts[0], verdicts[0]], capsys)
    assert "already merged, passed over" in err and len(probes_of(state)) == 1
    err, _ = merge(state, verdicts, capsys)
    assert "already merged" in err and len(probes_of(state)) == 2
    before = state.read_text()
    err, _ = merge(state, verdicts, capsys)
    assert err.count("already merged, passed over") == 2
    assert probes_of(state) == BisectResult.from_dict(json.loads(before)).probes


def test_a_merge_leaves_out_what_does_not_belong_and_takes_the_rest(
        half_done, index_server, example_script, tmp_path, capsys):
    state, verdicts = half_done
    stranger = json.loads(verdicts[0].read_text())
    stranger.update(build="2.99.0.dev20300101+cpu", id="other")
    (tmp_path / "stranger.json").write_text(json.dumps(stranger))
    (tmp_path / "junk.json").write_text("{}")
    (tmp_path / "cut.json").write_text(verdicts[1].read_text()[:40])  # an upload cut short
    damaged = {**json.loads(verdicts[1].read_text()), "record": {"verdict": "BAD"}}
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    other = tmp_path / "other"
    other.mkdir()
    foreign = {**json.loads(verdicts[1].read_text()),
               "state": json.loads(start(other, index_server, example_script, "--good",
                                         "2026-05-01").read_text())["options"]["state_id"]}
    (tmp_path / "foreign.json").write_text(json.dumps(foreign))
    err, _ = merge(state, [tmp_path / name for name in (
        "stranger.json", "junk.json", "cut.json", "damaged.json", "foreign.json")]
        + [verdicts[0]], capsys)
    assert "2.99.0.dev20300101+cpu: not a build of this bisection" in err
    assert "junk.json: not a verdict file" in err and "cut.json: cannot read the verdict" in err
    assert "a damaged verdict" in err and "a verdict of another bisection" in err
    assert [p.version for p in probes_of(state)] == [json.loads(verdicts[0].read_text())["build"]]
    err, _ = merge(state, [verdicts[1]], capsys)  # the right file, once it comes
    assert len(probes_of(state)) == 2


def test_losing_the_newest_build_s_runner_does_not_make_an_old_failure_the_bad_one(
        index_server, cache_dir, tmp_path, capsys):
    """Old builds fail otherwise than new ones. With the newest build's verdict lost, round 1's
    old failure must wait for it instead of defining the failure the search follows."""
    script = tmp_path / "two_failures.py"
    script.write_text("import torch\nday = int(torch.__version__.split('dev')[1][6:8])\n"
                      "if day >= 21: raise RuntimeError('new failure')\n"
                      "if day <= 16: raise ValueError('old failure')\n")
    state = start(tmp_path, index_server, script, "--good", "2026-05-01")
    newest, *others = plan(state, 2, capsys)
    folder = tmp_path / "lost-round"
    folder.mkdir()
    verdicts = probe_round(state, others, cache_dir, folder)  # the newest one's runner is lost
    assert "ValueError: old failure" in json.loads(verdicts[0].read_text())["record"]["reason"]
    err, merged = merge(state, verdicts, capsys)
    assert "held until the newest testable build's verdict is in" in err
    assert probes_of(state) == () and merged["status"] == "unfinished"
    assert newest in plan(state, 2, capsys) and others[0] not in plan(state, 2, capsys)
    _, final = bisect_in_rounds(state, 2, cache_dir, tmp_path, capsys)
    assert (final["status"], final["last_good"], final["first_bad"]) == (
        "found", "2.13.0.dev20260520+cpu", "2.13.0.dev20260521+cpu")
    assert "RuntimeError: new failure" in final["signature"]


def test_a_runner_that_cannot_use_its_gpu_loses_only_its_own_probe(half_done, tmp_path, capsys):
    state, verdicts = half_done
    blocked = {**json.loads(verdicts[1].read_text()), "record": None, "signature": None,
               "cannot_test": "needs a CUDA GPU; torch.cuda.is_available() is False"}
    (tmp_path / "blocked.json").write_text(json.dumps(blocked))
    err, merged = merge(state, [verdicts[0], tmp_path / "blocked.json"], capsys)
    assert "its runner could not use it" in err and "planned again" in err
    assert merged["status"] == "unfinished"
    assert blocked["build"] not in [p.version for p in probes_of(state)]  # free to plan again
    merge(state, [tmp_path / "blocked.json"], capsys)  # the same file again changes nothing
    assert blocked["build"] not in [p.version for p in probes_of(state)]
    again = {**blocked, "id": "a-second-runner"}
    (tmp_path / "again.json").write_text(json.dumps(again))
    merge(state, [tmp_path / "again.json"], capsys)  # a second runner could not either
    skip = [p for p in probes_of(state) if p.version == blocked["build"]]
    assert skip and skip[0].verdict.value == "skip" and "cannot test it" in skip[0].reason
    assert BisectResult.from_dict(json.loads(state.read_text())).cannot_test is None


def test_round_start_refuses_flags_that_act_elsewhere(index_server, example_script, tmp_path,
                                                      capsys):
    code = main(["round", "start", str(example_script), "--index",
                 index_server.variant_url("cpu"), "--state", str(tmp_path / "s.json"),
                 "--json", str(tmp_path / "never.json")])
    assert code == 2
    assert "`round start` does not take --json: `round outcome STATE --out FILE`" in \
        capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(("flag", "value"), [("--cache-dir", "/tmp/elsewhere"),
                                             ("--cache-budget-gb", "5")])
def test_round_start_refuses_cache_flags_the_runners_take(index_server, example_script,
                                                         tmp_path, capsys, flag, value):
    """They were taken and ignored: the probes make their environments on their runners."""
    code = main(["round", "start", str(example_script), "--index",
                 index_server.variant_url("cpu"), "--state", str(tmp_path / "s.json"),
                 flag, value])
    assert code == 2 and f"`round start` does not take {flag}: each runner's own: " \
        f"`bisect-bot probe {flag}`" in capsys.readouterr().err


def test_round_start_s_help_shows_only_the_flags_it_takes(capsys):
    with pytest.raises(SystemExit):
        main(["round", "start", "--help"])
    shown = capsys.readouterr().out
    assert "--state" in shown and "--good" in shown and "--repeat" in shown
    assert not any(flag in shown for flag in ("--workers", "--json", "--github", "--db",
                                              "--no-triage", "--sandbox"))
    with pytest.raises(SystemExit):
        main(["triage", "--help"])
    shown = capsys.readouterr().out
    assert "--github" not in shown and "--python INTERPRETER" in shown


def test_probe_rejects_an_unknown_build(half_done, tmp_path, capsys):
    state, _ = half_done
    code = main(["probe", str(state), "--build", "1.0.0", "--out", str(tmp_path / "v.json")])
    assert code == 2 and "1.0.0: not a build" in capsys.readouterr().err


def test_round_triage_gives_the_report_job_what_run_gives(tmp_path, capsys):
    """The merges run without a GPU, so the triage of a bisection over runners is one more job:
    `round triage` on the finished state; half way through there is nothing to triage."""
    first_bad = dt.date(2026, 5, 21)
    bug = {"subsystem": "inductor", "kind": "precision"}
    mirror = build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 15), days=10,
                          first_bad=first_bad, missing=(),
                          bug_for=lambda date: bug if date >= first_bad else None)
    cache = ["--cache-dir", str(tmp_path / "cache"), "--sandbox", "none"]
    with IndexServer(mirror.root) as server:
        state = start(tmp_path, server, example_path(tmp_path), "--good", "2026-05-15",
                      "--timeout", "60")
        early = tmp_path / "early.json"
        assert main(["round", "triage", str(state), "--out", str(early), *cache]) == 0
        assert "triage" not in json.loads(early.read_text())
        bisect_in_rounds(state, 3, tmp_path / "cache", tmp_path, capsys)
        outcome = tmp_path / "outcome.json"
        assert main(["round", "triage", str(state), "--out", str(outcome), *cache]) == 0
    data = json.loads(outcome.read_text())
    assert data["first_bad"] == mirror.first_bad and data["status"] == "found"
    triage = data["triage"]["triage"]
    assert triage["version"] == mirror.first_bad and triage["precision"] is True
    assert "fails only with inductor" in " | ".join(f["text"] for f in triage["findings"])
    assert f"### Triage of `{mirror.first_bad}`" in data["triage_markdown"]
    assert BisectResult.from_dict(data).probes == BisectResult.from_dict(
        json.loads(state.read_text())).probes


def test_a_reproducer_that_never_fails_starts_no_triage_runner(index_server, cache_dir, tmp_path, capsys,
                                               monkeypatch):
    script = tmp_path / "passes.py"
    script.write_text("import torch\nprint(torch.__version__)\n")
    state = start(tmp_path, index_server, script, "--good", "2026-05-01")
    bisect_in_rounds(state, 3, cache_dir, tmp_path, capsys)
    assert json.loads(state.read_text())["status"] == "not-reproduced"
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert main(["round", "plan", str(state), "--width", "3", "--github-output"]) == 0
    assert outputs(output)["done"] == "true" and outputs(output)["triage"] == "false"


# Looking for the fix from May 1st: the failure up to the 12th (slow, so that newer
# failures come first), another one from the 13th to the 20th, passing from the 21st.
FIX_SCRIPT = """import time, torch
day = int(torch.__version__.split('dev')[1][6:8])
if day <= 12:
    time.sleep({sleep})
    raise ValueError('old failure the issue reports')
if day <= 20:
    raise RuntimeError('another failure')
"""


def test_looking_for_the_fix_a_lost_older_verdict_is_waited_for_as_bisect_waits(
        index_server, cache_dir, tmp_path, capsys):
    """The oldest failure is the one a search for the fix follows. One runner lost (the
    round's oldest build): the merge followed the newer failure, and found a confident,
    wrong fix. `bisect --workers 4` stopped the slow older probe as moot for the same wrong
    answer."""
    script = tmp_path / "fix.py"
    script.write_text(FIX_SCRIPT.format(sleep=3))
    report = tmp_path / "bisect.json"
    assert main(["bisect", str(script), "--index", index_server.variant_url("cpu"), "--fix",
                 "--bad", "2026-05-01", "--workers", "4", "--cache-dir", str(cache_dir),
                 "--no-default-packages", "--no-triage", "--no-commit-tier", "--no-bisector",
                 "--db", str(tmp_path / "h.db"), "--json", str(report)]) == 3  # ambiguous
    capsys.readouterr()
    engine = json.loads(report.read_text())
    assert "ValueError: old failure" in engine["signature"]
    assert (engine["last_bad"], engine["first_good"]) == (
        "2.13.0.dev20260512+cpu", "2.13.0.dev20260521+cpu")

    script.write_text(FIX_SCRIPT.format(sleep=0))
    state = start(tmp_path, index_server, script, "--fix", "--bad", "2026-05-01")
    builds = plan(state, 4, capsys)
    oldest, *others = sorted(builds)
    assert int(oldest[14:18][2:]) <= 12  # the failure, which is then lost
    folder = tmp_path / "lost-round"
    folder.mkdir()
    err, merged = merge(state, probe_round(state, others, cache_dir, folder), capsys)
    assert "held until an older build's verdict is in" in err
    # Planned again: builds as old as the lost one (the failures held are not yet counted).
    assert merged["status"] == "unfinished" and min(plan(state, 4, capsys)) <= oldest
    _, final = bisect_in_rounds(state, 4, cache_dir, tmp_path, capsys)
    assert "ValueError: old failure" in final["signature"]
    assert {k: final[k] for k in ("status", "last_bad", "first_good")} == {
        k: engine[k] for k in ("status", "last_bad", "first_good")}


def test_a_merge_of_a_verdict_and_a_second_runner_s_blocked_one_for_a_build_takes_the_verdict(
        half_done, tmp_path, capsys):
    state, verdicts = half_done
    real = json.loads(verdicts[1].read_text())
    blocked = {**real, "record": None, "signature": None, "cannot_test": "needs a CUDA GPU"}
    for name, data in (("first.json", {**blocked, "id": "runner-a"}),
                       ("second.json", {**blocked, "id": "runner-b"})):
        (tmp_path / name).write_text(json.dumps(data))
    merge(state, [tmp_path / "first.json"], capsys)
    err, _ = merge(state, [tmp_path / "second.json", verdicts[1]], capsys)  # used to crash
    [probe] = [p for p in probes_of(state) if p.version == real["build"]]
    assert probe.verdict.value == real["record"]["verdict"] and "planned again" not in err


@pytest.mark.parametrize("damaged_id", [["a", "b"], {"a": 1}, 7])
def test_a_verdict_whose_id_is_not_text_is_left_out_not_a_traceback(
        half_done, tmp_path, capsys, damaged_id):
    state, verdicts = half_done
    (tmp_path / "odd.json").write_text(json.dumps(
        {**json.loads(verdicts[0].read_text()), "id": damaged_id}))
    err, _ = merge(state, [tmp_path / "odd.json", verdicts[1]], capsys)
    assert "a damaged verdict (its id is not text); left out" in err
    assert len(probes_of(state)) == 1


def test_a_newest_build_no_runner_can_use_releases_the_failures_held_for_it(
        index_server, cache_dir, tmp_path, capsys):
    """A second runner that cannot use the newest build makes it SKIP; the failures held
    for its verdict were still held in that merge, and the rounds ended 'unfinished'."""
    script = tmp_path / "breaks.py"
    script.write_text("import torch\nday = int(torch.__version__.split('dev')[1][6:8])\n"
                      "if day >= 21: raise RuntimeError('new failure')\n")
    state = start(tmp_path, index_server, script, "--good", "2026-05-18", "--bad", "2026-05-22")
    builds = plan(state, 4, capsys)
    newest, others = max(builds), sorted(set(builds) - {max(builds)})
    folder = tmp_path / "round-1"
    folder.mkdir()
    verdicts = probe_round(state, others, cache_dir, folder)
    err, _ = merge(state, verdicts, capsys)
    assert "held until the newest testable build's verdict is in" in err
    blocked = {**json.loads(verdicts[0].read_text()), "build": newest, "record": None,
               "signature": None, "cannot_test": "needs a CUDA GPU"}
    for runner in ("a", "b"):
        (tmp_path / f"{runner}.json").write_text(json.dumps({**blocked, "id": runner}))
        err, merged = merge(state, [tmp_path / f"{runner}.json"], capsys)
    assert (merged["status"], merged["first_bad"]) == ("found", "2.13.0.dev20260521+cpu")
    assert "held" not in err and plan(state, 4, capsys) == []


def test_lost_runners_beside_one_without_a_gpu_are_planned_again_not_cannot_test(
        half_done, tmp_path, capsys):
    """Round 1: one runner could not use its GPU and the others' verdicts never came; the
    merge said the whole bisection cannot be tested."""
    state, verdicts = half_done
    fresh = BisectResult.from_dict(json.loads(state.read_text()))
    assert fresh.probes == () and len(fresh.options["planned"]) == 2
    blocked = {**json.loads(verdicts[0].read_text()), "record": None, "signature": None,
               "cannot_test": "needs a CUDA GPU; torch.cuda.is_available() is False"}
    (tmp_path / "blocked.json").write_text(json.dumps(blocked))
    err, merged = merge(state, [tmp_path / "blocked.json"], capsys)
    assert merged["status"] == "unfinished" and "planned again" in err
    assert BisectResult.from_dict(json.loads(state.read_text())).cannot_test is None


def _usage_error(argv, capsys):
    """The command's one-line error (exit 2), never a traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err


def test_a_bisect_report_is_not_a_round_state(index_server, cache_dir, example_script, tmp_path,
                                             capsys):
    """A `bisect --json` report parses as a result: probed, it ran an empty script (every
    build GOOD); planned, it said `{"include":[]}`, nothing left."""
    report = tmp_path / "report.json"
    main(["bisect", str(example_script), "--index", index_server.variant_url("cpu"),
          "--good", "2026-05-20", "--bad", "2026-05-22", "--cache-dir", str(cache_dir),
          "--no-default-packages", "--no-triage", "--no-commit-tier", "--no-bisector",
          "--db", str(tmp_path / "h.db"), "--json", str(report)])
    capsys.readouterr()
    build = json.loads(report.read_text())["builds"][-1]["version"]
    verdict = tmp_path / "v.json"
    for argv in (["probe", str(report), "--build", build, "--out", str(verdict)],
                 ["round", "plan", str(report)], ["round", "merge", str(report), str(verdict)]):
        err = _usage_error(argv, capsys)
        assert f"{report}: not a round state, as `round start` and `round from-plan` write " \
            "(it holds no reproducer script)" in err
    assert not verdict.exists()


@pytest.mark.parametrize(("change", "said"), [
    (lambda s: s["options"].pop("script"), "it holds no reproducer script"),
    (lambda s: s["options"].update(script="  \n"), "it holds no reproducer script"),
    (lambda s: s.pop("options"), "it holds no reproducer script"),
    (lambda s: s["options"].pop("state_id"), "its options lack state_id"),
    (lambda s: s["options"].pop("on_timeout"), "its options lack on_timeout"),
    (lambda s: s["options"].update(held=5), "its option held is 5"),
    (lambda s: s["options"].update(held=[5]), "its option held is [5]"),
    (lambda s: s["options"].update(repeat="2"), "its option repeat is '2'"),
    (lambda s: s["options"].update(repeat=True), "its option repeat is True"),
    (lambda s: s["options"].update(on_timeout="maybe"), "its option on_timeout is 'maybe'"),
    (lambda s: s["options"].update(with_packages=[1]), "its option with_packages is [1]"),
    (lambda s: s.update(builds=s["builds"][:5]), "its bisection is of 30 builds, and it lists 5"),
])
def test_a_tampered_state_is_a_usage_error_not_a_traceback(
        index_server, example_script, tmp_path, capsys, change, said):
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    data = json.loads(state.read_text())
    build = data["builds"][-1]["version"]
    change(data)
    state.write_text(json.dumps(data))
    verdict = tmp_path / "v.json"
    for argv in (["probe", str(state), "--build", build, "--out", str(verdict)],
                 ["round", "plan", str(state), "--width", "2"], ["round", "report", str(state)],
                 ["round", "outcome", str(state), "--out", str(tmp_path / "o.json")]):
        assert f"not a round state, as `round start` and `round from-plan` write ({said})" in \
            _usage_error(argv, capsys)
    assert not verdict.exists()


def test_a_verdict_whose_record_is_of_another_build_is_left_out(half_done, tmp_path, capsys):
    state, verdicts = half_done
    first, second = (json.loads(v.read_text()) for v in verdicts)
    (tmp_path / "odd.json").write_text(json.dumps({**first, "build": second["build"]}))
    err, _ = merge(state, [tmp_path / "odd.json"], capsys)
    assert f"{second['build']}: a damaged verdict (its record is of {first['build']})" in err
    assert probes_of(state) == ()


def test_paths_that_cannot_be_written_and_actions_flags_outside_actions_are_usage_errors(
        index_server, example_script, tmp_path, capsys, monkeypatch):
    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    build = json.loads(state.read_text())["builds"][-1]["version"]
    (tmp_path / "a-file").write_text("")
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    cache = tmp_path / "fresh-cache"
    for argv, said in (
            (["round", "report", str(state), "--markdown", str(tmp_path / "a-file" / "x.md")],
             f"--markdown {tmp_path / 'a-file' / 'x.md'}: {tmp_path / 'a-file'} is a file"),
            (["round", "report", str(state), "--markdown", str(tmp_path)],
             f"--markdown {tmp_path}: that is a folder; give a file name"),
            (["round", "report", str(state), "--github-summary"],
             "--github-summary: GITHUB_STEP_SUMMARY is not set"),
            (["round", "plan", str(state), "--github-output"],
             "--github-output: GITHUB_OUTPUT is not set"),
            (["probe", str(state), "--build", build, "--out", "/proc/x.json",
              "--cache-dir", str(cache)], "--out /proc/x.json: cannot write it"),
            (["round", "outcome", str(state), "--out", str(tmp_path)],
             f"--out {tmp_path}: that is a folder")):
        assert said in _usage_error(argv, capsys)
    assert not cache.exists()  # refused before anything was installed


def test_failures_held_by_a_merge_are_in_the_report_and_the_warning_says_what_happened(
        index_server, cache_dir, tmp_path, capsys):
    """The newest build came, as SKIP: the warning said its verdict "did not come". And the
    failure held was in no report: `round report` showed nothing of it."""
    script = tmp_path / "newest_skips.py"
    script.write_text("import sys, torch\nday = int(torch.__version__.split('dev')[1][6:8])\n"
                      "if day == 31: sys.exit(125)\n"
                      "if day >= 21: raise RuntimeError('new failure')\n"
                      "if day <= 16: raise ValueError('old failure')\n")
    state = start(tmp_path, index_server, script, "--good", "2026-05-01")
    versions = [b["version"] for b in json.loads(state.read_text())["builds"]]
    newest, other = plan(state, 2, capsys)
    assert newest == versions[-1]
    verdicts = probe_round(state, [newest, other], cache_dir, tmp_path)
    err, _ = merge(state, verdicts, capsys)
    assert "did not come" not in err
    assert (f"1 failure(s) held until the newest testable build's verdict is in ({versions[-2]}: "
            "not probed yet: the builds newer than it could not be tested)") in err
    markdown = tmp_path / "report.md"
    assert main(["round", "report", str(state), "--markdown", str(markdown)]) == 0
    out = capsys.readouterr().out
    assert f"held: {other} bad (ValueError: old failure" in out
    assert f"- held: {other} bad (ValueError: old failure" in markdown.read_text()
    # The report job's outcome.json lists it too, as its probes are listed (it had none).
    outcome = tmp_path / "outcome.json"
    assert main(["round", "outcome", str(state), "--out", str(outcome)]) == 0
    data = json.loads(outcome.read_text())
    assert data["status"] == "unfinished"
    assert [probe["verdict"] for probe in data["probes"]] == ["skip"]  # the newest one
    [held] = data["held"]
    assert set(held) == set(data["probes"][0]) == {"version", "verdict", "reason", "seconds",
                                                   "metric"}
    assert (held["version"], held["verdict"]) == (other, "bad")
    assert "ValueError: old failure" in held["reason"] and held["seconds"] > 0
    # Its runner lost: that is what the warning says.
    assert plan(state, 1, capsys) == [versions[-2]]
    err, _ = merge(state, verdicts, capsys)  # passed over: the round before
    assert f"({versions[-2]}: its verdict did not come: a lost runner)" in err


def test_a_merge_takes_the_folders_download_artifact_lays_out(half_done, tmp_path, capsys):
    """actions/download-artifact without merge-multiple (and `gh run download`) puts each
    artifact in a folder of its name: given those folders, the merge took no verdict, lost
    them all with exit 0."""
    state, verdicts = half_done
    downloaded = tmp_path / "verdicts"
    for verdict in verdicts:
        build = json.loads(verdict.read_text())["build"]
        folder = downloaded / f"verdict-1-{build}"
        folder.mkdir(parents=True)
        shutil.copy(verdict, folder / verdict.name)
    (downloaded / "empty").mkdir()
    err, _ = merge(state, sorted(downloaded.iterdir()), capsys)
    assert len(probes_of(state)) == 2
    assert "empty: a folder with no verdict file (*.json) in it" in err
    err, _ = merge(state, [downloaded], capsys)  # the download's own folder: the same files
    assert err.count("already merged, passed over") == 2 and len(probes_of(state)) == 2


def test_a_merge_that_finds_nothing_testable_does_not_say_planned_again(
        half_done, tmp_path, capsys):
    """No runner of round 1 could use its GPU: the merge ends the bisection as cannot-test,
    and each warning above it still said the build was 'planned again'."""
    state, verdicts = half_done
    blocked = []
    for verdict in verdicts:
        data = {**json.loads(verdict.read_text()), "record": None, "signature": None,
                "cannot_test": "needs a CUDA GPU; torch.cuda.is_available() is False"}
        blocked.append(tmp_path / f"blocked-{data['build']}.json")
        blocked[-1].write_text(json.dumps(data))
    err, merged = merge(state, blocked, capsys)
    assert merged["status"] == "cannot-test"
    assert "planned again" not in err and err.count("its runner could not use it") == 2


def test_a_merge_names_the_planned_builds_whose_verdict_did_not_come(half_done, capsys):
    """A probe job that failed or was cancelled uploads nothing: the merge said only
    '1 verdict(s) merged', and the triager could not tell a runner had been lost."""
    state, verdicts = half_done
    lost = json.loads(verdicts[1].read_text())["build"]
    err, merged = merge(state, [verdicts[0]], capsys)
    assert merged["status"] == "unfinished"
    assert f"{lost}: planned, but no verdict of it came" in err
    err, _ = merge(state, [verdicts[1]], capsys)  # it comes late: nothing is missing now
    assert "no verdict of it came" not in err



@pytest.mark.parametrize("workflow", [".github/workflows/bisect.yml",
                                      "workflows/torch-bisect-bot-rounds.yml"])
def test_a_round_whose_every_probe_job_was_lost_is_named_by_the_merge_job(
        workflow, index_server, example_script, tmp_path, capsys):
    """The merge jobs ran `round merge` only when some verdict file had come, so a round whose
    every runner was lost (each build planned again, one of three rounds spent) left no line
    in the log saying so. The merge step's own script, run as Actions runs it."""
    import yaml

    state = start(tmp_path, index_server, example_script, "--good", "2026-05-01")
    planned = plan(state, 2, capsys)
    job = tmp_path / "job"
    (job / "state").mkdir(parents=True)
    shutil.copy(state, job / "state" / "state.json")
    jobs = yaml.safe_load((Path(__file__).parents[2] / workflow).read_text())["jobs"]
    step = next(step for step in jobs["merge-1"]["steps"] if step.get("id") == "plan")
    env = {**os.environ, "PATH": f"{Path(BISECT_BOT).parent}:{os.environ['PATH']}",
           "WIDTH": "2", "GITHUB_OUTPUT": str(job / "output"),
           "GITHUB_STEP_SUMMARY": str(job / "summary")}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           step["run"]], cwd=job, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no verdict file came from this round: every probe job failed" in done.stderr
    for build in planned:
        assert f"{build}: planned, but no verdict of it came" in done.stderr
    again = json.loads(outputs(job / "output")["matrix"])["include"]
    assert sorted(entry["build"] for entry in again) == sorted(planned)


def test_round_start_refuses_a_script_its_python_cannot_compile(index_server, tmp_path, capsys):
    """`bisect` and `round from-plan` say 'cannot test' before installing anything; `round
    start` wrote the state, and three rounds of GPU runners each installed a build to find
    every probe SKIP."""
    script = tmp_path / "broken.py"
    script.write_text("import torch\nif True\n    print(torch.__version__)\n")
    state = tmp_path / "state.json"
    err = _usage_error(["round", "start", str(script), "--index", index_server.variant_url("cpu"),
                        "--no-default-packages", "--state", str(state)], capsys)
    assert "cannot test: the reproducer is not valid Python" in err and "line 2" in err
    assert not state.exists()


def test_a_round_whose_probes_all_meet_an_index_outage_stops_as_run_does(
        mirror, example_script, tmp_path, capsys):
    """The index went down between rounds: each probe job uploaded an INSTALL SKIP, the
    merge folded them in, the builds were never tried again and the answer could end
    ambiguous for an index down a minute. The probes say there is no verdict, and the merge
    stops the rounds with the outcome `run` writes: the builds tested, and why it stopped."""
    cache = tmp_path / "cache"  # its own: a build installed before would need no index
    server = IndexServer(mirror.root).start()
    url = server.variant_url("cpu")
    try:
        state = start(tmp_path, server, example_script, "--good", "2026-05-01")
        first = tmp_path / "first"
        first.mkdir()
        merge(state, probe_round(state, plan(state, 2, capsys), cache, first), capsys)
    finally:
        server.stop()
    tested = [p.version for p in probes_of(state)]
    assert tested
    second = tmp_path / "second"
    second.mkdir()
    builds = plan(state, 2, capsys)
    verdicts = probe_round(state, builds, cache, second)
    for verdict in map(json.loads, (path.read_text() for path in verdicts)):
        assert "record" not in verdict, verdict  # no SKIP uploaded
        assert verdict["outage"].startswith(f"the index {url} did not answer")
    err, merged = merge(state, verdicts, capsys)
    assert [p.version for p in probes_of(state)] == tested
    assert merged["status"].startswith(f"unfinished (stopped: the index {url} did not answer")
    assert all(f"{build}: no verdict: the index {url} did not answer" in err
               for build in builds)
    assert "the rounds stop here" in err and "planned again" not in err
    assert main(["round", "plan", str(state), "--width", "2"]) == 0
    planned = capsys.readouterr()
    assert json.loads(planned.out) == {"include": []}
    assert "nothing planned: the bisection stopped" in planned.err
    outcome = tmp_path / "outcome.json"
    assert main(["round", "outcome", str(state), "--out", str(outcome)]) == 0
    data = json.loads(outcome.read_text())
    assert data["stopped"].startswith(f"the index {url} did not answer")
    assert data["status"] == "unfinished" and [p["version"] for p in data["probes"]] == tested
    assert [p for p in data["probes"] if p["verdict"] == "skip"] == []
    markdown = tmp_path / "report.md"
    assert main(["round", "report", str(state), "--markdown", str(markdown)]) == 0
    assert f"stopped: the index {url} did not answer" in capsys.readouterr().out
    assert "Bisection stopped before its answer" in markdown.read_text()


def test_a_probe_whose_wheel_host_is_out_leaves_its_build_to_the_next_round(
        mirror, example_script, tmp_path, capsys):
    """One probe of a round met a wheel host answering 503: its build was SKIP for good. It
    stays untested, the other probe's verdict is taken, the next round plans it again, and
    once the host answers the rounds find the planted nightly with no build skipped."""
    cache = tmp_path / "cache"
    with IndexServer(mirror.root) as server:
        state = start(tmp_path, server, example_script, "--good", "2026-05-01")
        out, other = plan(state, 2, capsys)
        server.faults.append(Fault(out.split("+")[0], status=503, times=10**6))
        folder = tmp_path / "with-an-outage"
        folder.mkdir()
        verdicts = probe_round(state, [out, other], cache, folder)
        assert "the wheel host" in json.loads(verdicts[0].read_text())["outage"]
        err, merged = merge(state, verdicts, capsys)
        assert f"{out}: no verdict: the wheel host 127.0.0.1:" in err
        assert "planned again" in err and "stop" not in merged["status"]
        assert [p.version for p in probes_of(state)] in ([other], [])  # [] while held for it
        assert out in plan(state, 2, capsys)
        server.faults.clear()
        _, final = bisect_in_rounds(state, 2, cache, tmp_path, capsys)
    assert (final["status"], final["first_bad"]) == ("found", mirror.first_bad)
    assert out in [p["version"] for p in final["probes"]]
    assert [p for p in final["probes"] if p["verdict"] == "skip"] == []
