"""The sticky comment in every state, snapshot-tested; plus the size limit and mention safety."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from bot.core.bisection import Bisection, Status
from bot.core.builds import Build, WheelLink
from bot.core.commands import Action, Command, parse_comment
from bot.core.job_plan import Settings, with_issue_python
from bot.core.labels import state_for
from bot.core.report import (
    GITHUB_COMMENT_LIMIT,
    MARKER,
    compare_link,
    continue_command,
    headline,
    owner_run,
    render_markdown,
    render_terminal,
    rerun_command,
)
from bot.core.results import EXIT_STATUS, BisectResult, ProbeRecord
from bot.core.sticky import render_cancelled, render_cannot_start, render_failed, render_queued
from bot.core.verdicts import RunResult, Stage, Verdict

START = dt.date(2026, 5, 10)
SETTINGS = Settings("https://download.pytorch.org/whl/nightly/cu130", "cu130", "3.12", 600, 1,
                    None, None, None, False)


def builds(count: int = 16) -> tuple[Build, ...]:
    out = []
    for day in range(count):
        date = START + dt.timedelta(days=day)
        version = f"2.13.0.dev{date:%Y%m%d}+cu130"
        link = WheelLink(f"torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl",
                         f"https://download.pytorch.org/whl/nightly/cu130/torch-{version}.whl")
        out.append(Build(version, date, "cu130", link))
    return tuple(out)


def bisect(first_bad: int, output: str = "", metric: bool = False) -> BisectResult:
    """A finished bisection over `builds()` where builds from `first_bad` on fail."""
    chosen = builds()
    bisection, probes = Bisection(len(chosen), 0), []
    while bisection.outcome is None:
        (index,) = bisection.next_probes(1)
        bad = index >= first_bad
        verdict = Verdict.BAD if bad else Verdict.GOOD
        text = output or ("AssertionError: Tensor-likes are not close!\n" if bad else "ok\n")
        probes.append(ProbeRecord(
            index=index, version=chosen[index].version, verdict=verdict,
            reason="AssertionError" if bad else "exit 0", seconds=12.5 + index,
            result=RunResult(Stage.RUN, exit_code=1 if bad else 0, output=text),
            info={"git_version": f"{index:040x}"},
            metric=(0.5 if bad else 0.001 * index) if metric else None,
        ))
        bisection = bisection.record(index, verdict)
    return BisectResult(chosen, bisection, tuple(probes), signature="AssertionError: Tensor-likes",
                        index_url=SETTINGS.index_url)


def test_a_good_end_that_fails_too_is_said_with_the_issue_s_words_and_the_window_kept():
    from dataclasses import replace
    result = replace(bisect(0), options={"good_said": "works in torch 2.13.0.dev20260510"})
    assert result.outcome is not None and result.outcome.note == "the good end given fails too"
    body = render_markdown(result, run_id="42")
    assert "## The good end the issue gives, `2.13.0.dev20260510+cu130`, fails" in body
    assert ("The good end, `2.13.0.dev20260510+cu130` (from the issue's words \"works in torch "
            "2.13.0.dev20260510\"), fails as the newer builds do") in body
    assert "--good 2.13.0.dev20260510+cu130 --bad 2.13.0.dev20260525+cu130" in body
    assert "fails as the newer" not in render_markdown(bisect(11), run_id="42")


def test_found(snapshot):
    body = render_markdown(bisect(11), run_id="42")
    assert "first bad nightly `2.13.0.dev20260521+cu130`" in body
    assert compare_link(bisect(11)) == (f"https://github.com/pytorch/pytorch/compare/"
                                        f"{10:040x}...{11:040x}")
    assert owner_run(body) == "42" and body.startswith(MARKER)
    snapshot("found.md", body)


def test_found_with_metric_chart(snapshot):
    body = render_markdown(bisect(11, metric=True), run_id="42")
    assert "```mermaid\nxychart-beta" in body and "05-21" in body
    snapshot("found_metric.md", body)


def test_not_reproduced(snapshot):
    snapshot("not_reproduced.md", render_markdown(bisect(99), run_id="42"))


def test_running_progress_table(snapshot):
    result = bisect(11)
    partial = BisectResult(result.builds, Bisection(len(result.builds), 0), result.probes[:2])
    body = render_markdown(partial, run_id="42")
    assert "Bisection in progress" in body and body.count("| `2.13.0") == 2
    snapshot("running.md", body)


def test_queued_cancelled_cannot_start_failed(snapshot):
    snapshot("queued.md", render_queued("42", "alice", SETTINGS, builds()[:3],
                                           "fenced block 1 of this issue"))
    snapshot("queued_deferred.md", render_queued("42", "alice", SETTINGS, None,
                                                    "fenced block 1 of this issue"))
    snapshot("cancelled.md", render_cancelled("bob"))
    snapshot("cannot_start.md", render_cannot_start("42", "I could not find a Python "
             "reproducer in this issue: put it in a ```python block.", "Say `help`."))
    snapshot("failed.md", render_failed("42", "The run job ended without an outcome."))
    assert owner_run(render_cancelled("bob")) is None


@pytest.mark.parametrize(("option", "reported", "python", "row"), [
    (None, "3.13", "3.13", "| Python | `3.13` (the issue's environment) |"),
    ("3.11", "3.13", "3.11", "| Python | `3.11` |"),  # the command's option wins
    (None, "3.9", "3.12", "| Python | `3.12` |"),  # no nightlies are built for 3.9
    (None, None, "3.12", "| Python | `3.12` |"),
])
def test_the_issue_s_python_is_taken_unless_the_command_names_one(option, reported, python, row):
    given = replace(SETTINGS, python=option or SETTINGS.python)  # as settings() makes them
    chosen = with_issue_python(given, Command(Action.BISECT, python=option), reported)
    assert chosen.python == python
    assert row in render_queued("42", "alice", chosen, builds()[:3], "fenced block 1")


def test_the_queued_comment_names_what_is_installed_beside_torch():
    guessed = render_queued("42", "alice", SETTINGS, None, "block", ("einops", "scipy"))
    assert ("| installed beside torch | `einops`, `scipy` (from the reproducer's imports; "
            "`with=` names others) |") in guessed
    named = replace(SETTINGS, packages=("attrs==25.1.0",))
    assert ("| installed beside torch | `attrs==25.1.0` (`with=`) |"
            in render_queued("42", "alice", named, None, "block", ("attr",)))
    assert "installed beside torch" not in render_queued("42", "alice", SETTINGS, None, "b")


def test_mentions_are_neutralised_and_fences_hold():
    hostile = "@pytorch/team ping\n```\n````\n@alice"
    body = render_markdown(bisect(11, output=hostile))
    assert "@pytorch" not in body and "@alice" not in body and "@\u200dalice" in body
    assert "`````\n" in body  # a fence longer than the longest backtick run inside


def test_huge_output_is_cut_to_the_comment_limit_tails_first():
    body = render_markdown(bisect(11, output="x" * 200_000), tail_limit=200_000)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert "### Rerun locally" in body and "Regression found" in body


def test_the_report_says_where_the_builds_ran_and_names_builds_without_dates() -> None:
    from bot.core.bisection import Bisection
    from bot.core.builds import existing_build
    from bot.core.report import headline, runner_line
    from bot.core.results import BisectResult, ProbeRecord
    from bot.core.verdicts import Verdict

    builds = (existing_build("/a/bin/python", "2.10.0+cu130"),
              existing_build("/b/bin/python", "2.11.0+cu130"))
    state = Bisection(2, 0).record(1, Verdict.BAD).record(0, Verdict.GOOD)
    info = {"torch": "2.11.0+cu130", "python": "3.12.3", "cuda": "13.0", "triton": "3.6.0",
            "gpu": "NVIDIA H200", "cuda_available": True}
    probes = (ProbeRecord(1, "2.11.0+cu130", Verdict.BAD, "x", 1.0, info=info),
              ProbeRecord(0, "2.10.0+cu130", Verdict.GOOD, "exit 0", 1.0, info={}))
    result = BisectResult(builds, state, probes)
    assert runner_line(result) == "Ran on: Python 3.12.3, CUDA 13.0, triton 3.6.0, NVIDIA H200"
    assert headline(result).startswith("Regression found: first bad build `2.11.0+cu130`")


def _failing_everywhere(good_index, index_url=SETTINGS.index_url):
    chosen = builds()
    bisection, probes = Bisection(len(chosen), good_index), []
    while bisection.outcome is None:
        (index,) = bisection.next_probes(1)
        probes.append(ProbeRecord(index=index, version=chosen[index].version,
                                  verdict=Verdict.BAD, reason="AssertionError", seconds=1.0,
                                  result=RunResult(Stage.RUN, exit_code=1, output="x\n")))
        bisection = bisection.record(index, Verdict.BAD)
    return BisectResult(chosen, bisection, tuple(probes), index_url=index_url)


def test_a_search_that_failed_back_to_the_index_s_oldest_nightly_says_how_to_go_further():
    result = _failing_everywhere(None)
    hint = "To look further back, give an older good end"
    assert "Not a regression in range" in render_markdown(result)
    assert hint in render_markdown(result) and hint in render_terminal(result)
    assert "the index lists: `2.13.0.dev20260510+cu130`. To look" in render_markdown(result)
    looked = replace(result, options={"looked_back": True})  # the bot went on past them
    assert "oldest nightly it found, after looking up to a year" in render_markdown(looked)
    assert hint not in render_markdown(_failing_everywhere(0))  # the user's good end failed
    assert hint not in render_markdown(_failing_everywhere(None, index_url=""))  # interpreters


def test_older_builds_put_before_a_failed_search_keep_every_verdict_under_its_version():
    failed = _failing_everywhere(None)
    assert failed.failed_back_to_the_oldest
    older = builds()[:4]  # stand-ins for nightlies older than every one searched
    older = tuple(replace(b, version=b.version.replace("2026", "2025")) for b in older)
    grown = failed.with_older(older)
    assert grown.builds == (*older, *failed.builds)
    assert {p.version: p.verdict for p in grown.probes} == {p.version: p.verdict
                                                           for p in failed.probes}
    assert all(grown.builds[p.index].version == p.version for p in grown.probes)
    # the search goes on into the older builds, from where it stopped
    assert not grown.failed_back_to_the_oldest and grown.outcome is None
    (nxt,) = grown.bisection.next_probes(1)
    assert nxt < len(older)
    with pytest.raises(ValueError, match="good end"):
        _failing_everywhere(0).with_older(older)


def test_a_reproducer_that_never_checks_is_told_when_the_newest_build_passes():
    passed = bisect(len(builds()))
    assert passed.outcome is not None and passed.outcome.status.value == "not-reproduced"
    hint = "This reproducer never checks a result"
    unchecked = replace(passed, options={"checks": False})
    assert hint in render_markdown(unchecked) and hint in render_terminal(unchecked)
    assert hint not in render_markdown(passed)  # not known: nothing said
    assert hint not in render_markdown(replace(passed, options={"checks": True}))
    assert hint not in render_markdown(replace(bisect(5), options={"checks": False}))  # found


def test_a_bisection_that_stopped_early_says_how_to_go_on_from_there():
    finished = bisect(9)
    # the same probes, cut off after the first three verdicts
    cut = Bisection(len(finished.builds), 0)
    for index, verdict in finished.bisection.results[:3]:
        cut = cut.record(index, verdict)
    stopped = replace(finished, bisection=cut, probes=finished.probes[:3],
                      options={"variant": "cu130", "python": "3.12", "repeat": 3,
                               "timeout": 600, "metric": "max diff: (\\S+)",
                               "threshold": 0.01, "with": ["attrs", "numpy<2"],
                               "processes": "2", "env": {"TORCH_LOGS": "+dynamo,graph",
                                                         "TORCHINDUCTOR_FREEZING": "1"}})
    assert stopped.outcome is None
    command = continue_command(stopped)
    asked = parse_comment(command or "")
    verdicts = cut.verdicts
    newest_good = max(i for i, v in verdicts.items() if v is Verdict.GOOD and i < 9)
    oldest_bad = min(i for i, v in verdicts.items() if v is Verdict.BAD)
    assert asked is not None and (asked.good, asked.bad) == (
        stopped.builds[newest_good].version, stopped.builds[oldest_bad].version)
    assert (asked.repeat, asked.python, asked.timeout_s, asked.metric, asked.threshold) == (
        3, "3.12", 600, "max diff: (\\S+)", 0.01)
    assert asked.packages == ("attrs", "numpy<2") and asked.processes == "2"
    assert asked.env == (("TORCH_LOGS", "+dynamo,graph"), ("TORCHINDUCTOR_FREEZING", "1"))
    assert continue_command(finished) is None  # it has its answer
    assert continue_command(replace(stopped, bisection=Bisection(16, 0))) is None
    # Only failures so far: the good end given still bounds the search that goes on.
    failing = Bisection(16, 2).record(15, Verdict.BAD).record(9, Verdict.BAD)
    asked = parse_comment(continue_command(replace(stopped, bisection=failing)) or "")
    assert asked is not None and (asked.good, asked.bad) == (
        stopped.builds[2].version, stopped.builds[9].version)


def test_the_variant_a_command_s_end_names_is_the_command_s_word():
    from bot.core.commands import parse_comment
    from bot.core.config import Config
    from bot.core.job_plan import settings, with_issue_variant
    command = parse_comment("/bisect bad=2.13.0.dev20260521+cu126")
    assert command is not None
    chosen = settings(command, Config())
    assert chosen.variant == "cu126" and "cu126" in chosen.index_url
    # over the issue's build, and under variant=
    assert with_issue_variant(chosen, command, "2.13.0.dev20260520+cu128", Config()) == chosen
    command = parse_comment("/bisect bad=2.13.0.dev20260521+cu126 variant=cpu")
    assert command is not None and settings(command, Config()).variant == "cpu"


def test_a_bisection_that_could_test_nothing_says_why_in_a_line():
    from bot.core.bisection import Status
    chosen = builds(4)
    bisection, probes = Bisection(4, 0), []
    while bisection.outcome is None:
        (index,) = bisection.next_probes(1)
        probes.append(ProbeRecord(index=index, version=chosen[index].version,
                                  verdict=Verdict.SKIP,
                                  reason="the reproducer asked to skip (exit 125)", seconds=1.0,
                                  result=RunResult(Stage.RUN, exit_code=125, output="")))
        bisection = bisection.record(index, Verdict.SKIP)
    result = BisectResult(chosen, bisection, tuple(probes))
    assert result.outcome is not None and result.outcome.status is Status.CANNOT_TEST
    assert ("Why they could not be tested: `the reproducer asked to skip (exit 125)`."
            in render_markdown(result))
    # where a hint already says why, no second line
    assert "Why they could not" not in render_markdown(bisect(11))


def test_builds_that_fail_otherwise_are_not_called_untestable_and_the_match_is_offered():
    """Builds 6-13 fail with an AssertionError, the newest ones with an ImportError: the
    search follows the newest failure, so the older one is SKIP, and the answer ambiguous."""
    chosen = builds()
    bisection, probes = Bisection(len(chosen), 0), []
    while bisection.outcome is None:
        (index,) = bisection.next_probes(1)
        if index >= 14:
            verdict, reason = Verdict.BAD, "ImportError: cannot import name 'x' from 'triton'"
        elif index >= 6:
            verdict, reason = Verdict.SKIP, "different failure: AssertionError: regressed"
        else:
            verdict, reason = Verdict.GOOD, "exit 0"
        probes.append(ProbeRecord(index, chosen[index].version, verdict, reason, 1.0))
        bisection = bisection.record(index, verdict)
    result = BisectResult(chosen, bisection, tuple(probes),
                          signature="ImportError: cannot import name 'x' from 'triton'")
    text, body = render_terminal(result), render_markdown(result)
    assert "builds that fail otherwise hide it" in text and "untestable" not in text
    assert "were tested and fail otherwise (AssertionError: regressed)" in text
    assert "--match AssertionError locally" in text
    assert "`match=AssertionError` in a command" in body
    assert "fail otherwise" not in render_terminal(bisect(5))  # a plain answer says nothing


def test_a_failure_s_control_characters_cannot_rewrite_the_terminal():
    """Cursor moves in a failure's message made a regression found show as "No regression"
    with every row good (found by an audit with a terminal emulator)."""
    attack = "\x1b[1A\x1b[2K\rNo regression\x1b]52;c;ZXZpbA==\x07"
    found = bisect(5)
    probes = tuple(replace(p, reason=attack) if p.verdict is Verdict.BAD else p
                   for p in found.probes)
    shown = render_terminal(replace(found, probes=probes, signature=attack))
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "\\x1b[1A\\x1b[2K\\x0dNo regression" in shown
    assert shown.startswith("Regression found")


def test_a_report_of_another_platform_explains_not_reproduced():
    passed = bisect(99)  # every build passes
    assert passed.outcome is not None and passed.outcome.status is Status.NOT_REPRODUCED
    windows = replace(passed, options={"reported_platform": "Windows"})
    said = "The issue reports Windows (its collect_env `OS:` line), and the builds tested"
    assert said in render_markdown(windows)
    assert said.replace("`", "") in render_terminal(windows)
    assert said not in render_markdown(passed)
    assert said not in render_markdown(replace(bisect(5), options=windows.options))  # found
    queued = render_queued("1", "alice", SETTINGS, None, "fenced block 1", platform="macOS")
    assert "The issue reports macOS (its collect_env `OS:` line); the builds are Linux" in queued


def test_a_comment_of_hundreds_of_builds_keeps_the_answer_s_rows_and_the_rerun():
    """426 builds probed made a comment cut at 65,536 characters in the middle of the table:
    the first bad build's row and the rerun command were lost, with no word."""
    chosen = builds(500)
    bisection, probes = Bisection(len(chosen), 0), []
    for index in range(1, 500):
        verdict = Verdict.GOOD if index < 300 else Verdict.BAD
        probes.append(ProbeRecord(index=index, version=chosen[index].version, verdict=verdict,
                                  reason=("exit 0 " if verdict is Verdict.GOOD else
                                          "AssertionError ") + "x" * 110, seconds=1.0))
        bisection = bisection.record(index, verdict)
    result = BisectResult(chosen, bisection, tuple(probes), signature="AssertionError",
                          index_url=SETTINGS.index_url)
    body = render_markdown(result, extra="<details>" + "triage " * 20_000 + "</details>")
    assert len(body) <= 65_536
    assert f"| `{chosen[300].version}` |" in body and f"| `{chosen[299].version}` |" in body
    assert "more builds |" in body and "### Rerun locally" in body
    assert "left out: the triage and commit sections" in body and "<details>" not in body
    whole = render_markdown(result, limit=None)  # a file: every row
    assert all(f"| `{chosen[index].version}` |" in whole for index in range(1, 500))


def test_a_found_answer_across_days_without_nightlies_says_so():
    found = bisect(5)
    assert "No nightly was published" not in render_markdown(found)  # adjacent days
    chosen = list(found.builds)
    after = found.outcome.after
    gap = replace(chosen[after], date=chosen[after].date + dt.timedelta(days=3))
    moved = replace(found, builds=tuple(chosen[:after] + [gap] + chosen[after + 1:]))
    said = ("No nightly was published for 3 days between the last good and the first bad one: "
            "the commits of those days are in the window too.")
    assert said in render_markdown(moved) and said in render_terminal(moved)


@pytest.mark.parametrize(("verdicts", "cannot_test", "status", "code"), [
    ({0: Verdict.GOOD, 1: Verdict.BAD, 2: Verdict.BAD}, None, "found", 0),
    ({0: Verdict.GOOD, 1: Verdict.SKIP, 2: Verdict.BAD}, None, "ambiguous", 3),
    ({2: Verdict.GOOD}, None, "not-reproduced", 4),
    ({0: Verdict.BAD, 1: Verdict.BAD, 2: Verdict.BAD}, None, "not-a-regression", 5),
    ({}, "no GPU on this runner", "cannot-test", 6),
    ({0: Verdict.GOOD}, None, "unfinished", 7),
])
def test_each_answer_has_its_own_exit_status(verdicts, cannot_test, status, code):
    chosen = builds(3)
    bisection = Bisection(3, 0)
    for index, verdict in verdicts.items():
        bisection = bisection.record(index, verdict)
    result = BisectResult(chosen, bisection, (), cannot_test=cannot_test)
    assert (result.summary()["status"], result.exit_status) == (status, code)


def test_the_exit_statuses_are_distinct_and_clear_of_the_shell_s_own():
    codes = list(EXIT_STATUS.values())
    assert set(EXIT_STATUS) == {s.value for s in Status} | {"unfinished"}
    assert len(set(codes)) == len(codes)
    assert not set(codes) & {1, 2, 125, 126, 127, 130}  # crash, usage, skip, shell, Ctrl-C


def test_a_newest_build_that_could_not_be_tested_is_not_called_maybe_fixed():
    """The bad end given could not be tested, an older build passed: that said "(maybe
    already fixed)", of a build older than the one said to fail."""
    chosen = builds(4)
    bisection = Bisection(4).record(3, Verdict.SKIP).record(2, Verdict.SKIP)
    said = headline(BisectResult(chosen, bisection.record(1, Verdict.GOOD), ()))
    assert said == (f"Not reproduced: the newest testable build `{chosen[1].version}` passes; "
                    f"the 2 newer ones, up to `{chosen[3].version}`, could not be tested")
    fixed = Bisection(4, find_fix=True).record(3, Verdict.SKIP).record(2, Verdict.BAD)
    assert headline(BisectResult(chosen, fixed, ())) == (
        f"Still failing on the newest testable build `{chosen[2].version}`; the newer one, "
        f"up to `{chosen[3].version}`, could not be tested")
    newest = headline(BisectResult(chosen, Bisection(4).record(3, Verdict.GOOD), ()))
    assert newest.endswith("passes (maybe already fixed)")


def test_a_bad_end_given_that_passes_is_not_called_not_reproduced_and_stays_in_the_rerun():
    """`bad=` at a nightly that passes said "Not reproduced: the newest testable build passes
    (maybe already fixed)", labelled so, though the nightlies after it were never tested; and
    the rerun command left the bad end out, so it bisected up to the newest nightly."""
    chosen = builds(4)
    passes = BisectResult(chosen, Bisection(4).record(3, Verdict.GOOD), (),
                          options={"bad_given": "2026-05-13", "newer_builds": 12})
    assert headline(passes) == (f"The bad end you gave, `{chosen[3].version}`, passes; 12 newer "
                                "nightlies were not tested")
    assert rerun_command(passes).endswith(f" --bad {chosen[3].version}")
    assert passes.given_end_wrong
    assert state_for(Status.NOT_REPRODUCED, given_end_wrong=passes.given_end_wrong) is None
    untested = replace(passes, bisection=Bisection(4).record(3, Verdict.SKIP)
                       .record(2, Verdict.GOOD))
    assert headline(untested) == (f"The bad end you gave, `{chosen[3].version}`, could not be "
                                  f"tested, and the newest testable build `{chosen[2].version}` "
                                  "passes; 12 newer nightlies were not tested")
    # The nightly the issue reports failing on passes: not reproduced, but not "maybe fixed".
    reported = replace(passes, options={"newer_builds": 1})
    assert headline(reported) == (f"Not reproduced: the newest testable build "
                                  f"`{chosen[3].version}` passes; 1 newer nightly was not tested")
    assert not reported.given_end_wrong
    # A bad end given at the newest nightly: nothing newer went untested.
    newest = replace(passes, options={"bad_given": "latest", "newer_builds": 0})
    assert headline(newest).endswith("passes (maybe already fixed)")
    assert not newest.given_end_wrong and " --bad " not in rerun_command(newest)


def test_a_good_end_given_that_fails_leads_the_headline_and_is_no_answer():
    """It said "Not a regression in range", labelled `bisect: not-a-regression`: the answer
    of a mistaken good end, not of the issue."""
    result = bisect(0)
    assert headline(result) == (f"The good end you gave, `{result.builds[0].version}`, fails, "
                                "as the newer builds tested do")
    assert result.given_end_wrong
    assert state_for(Status.NOT_A_REGRESSION, given_end_wrong=result.given_end_wrong) is None
    assert not bisect(11).given_end_wrong


def test_the_report_names_a_first_bad_build_only_where_one_was_found():
    """"Fails back to the oldest build" put that oldest build in first_bad, which a script
    reading the report took for the answer (and the Markdown showed "the first bad build")."""
    chosen = builds(3)
    failing = Bisection(3).record(2, Verdict.BAD).record(1, Verdict.BAD).record(0, Verdict.BAD)
    result = BisectResult(chosen, failing, tuple(
        ProbeRecord(i, chosen[i].version, Verdict.BAD, "AssertionError", 1.0,
                    result=RunResult(Stage.RUN, exit_code=1, output="boom\n")) for i in range(3)))
    summary = result.summary()
    assert (summary["status"], summary["first_bad"]) == ("not-a-regression", None)
    assert "Output of the oldest failing build" in render_markdown(result)
    found = Bisection(3, 0).record(2, Verdict.BAD).record(0, Verdict.GOOD).record(1, Verdict.BAD)
    assert BisectResult(chosen, found, ()).summary()["first_bad"] == chosen[1].version


def test_a_problem_written_to_follow_a_colon_reads_as_a_sentence_in_the_sticky_comment():
    """"the reproducer uses CUDA, ... variant)" opened the comment's paragraph in lower case,
    with no stop (pytorch/pytorch#149472's CUDA reproducer, on a cpu-variant installation)."""
    body = render_cannot_start("42", "the reproducer uses CUDA: give variant=cu130 (or "
                               "another CUDA variant)", "Say `help`.")
    assert "\n\nThe reproducer uses CUDA: give variant=cu130 (or another CUDA variant).\n\n" \
        in body
    kept = render_cannot_start("42", "I could not find it: put it in a `python` block.", "")
    assert "\n\nI could not find it: put it in a `python` block.\n\n" in kept


def test_a_problem_ends_as_a_sentence_once_in_the_reply_and_in_the_sticky_comment():
    """The command's reply stripped a full stop and added one, so a problem that ended in a
    question mark read "...?." there, while the sticky comment kept it: one rule, `stopped`."""
    from bot.core.sticky import stopped

    asked = "`good=2.13.0.dev2026051` names no nightly: is it 2.13.0.dev20260510?"
    assert stopped(asked) == asked
    assert stopped(" the index lists none ") == "the index lists none."
    assert f"\n\n{asked[0].upper()}{asked[1:]}\n\n" in render_cannot_start("42", asked, "")


def test_output_tails_lose_their_colour_codes():
    """GitHub shows an escape code's text (`[31m`) in a code block: the tails drop them."""
    coloured = "\x1b[1;35mAssertionError\x1b[0m: \x1b[35mTensor-likes are not close!\x1b[0m\n"
    body = render_markdown(bisect(11, output=coloured))
    assert "\x1b" not in body and "[35m" not in body
    assert "AssertionError: Tensor-likes are not close!" in body


def test_a_reproducer_that_writes_outside_the_sandbox_s_writable_folders_is_told_so():
    """Each build failed on a write the sandbox refuses: the report said only that the good
    end fails too, as if the bug were older than the window."""
    read_only = "OSError: [Errno 30] Read-only file system: '/workspace/out.pt'"
    result = _failing_everywhere(0)
    result = replace(result, probes=tuple(replace(p, reason=read_only) for p in result.probes))
    body = render_markdown(result)
    assert ("Every build fails the same way: the reproducer writes to `/workspace/out.pt`, and "
            "probes may write only in their working folder") in body
    assert "Every build fails the same way" in render_terminal(result)
    assert "Every build fails the same way" not in render_markdown(_failing_everywhere(0))
    one_other = (replace(result.probes[0], reason="AssertionError"), *result.probes[1:])
    assert "Every build fails the same way" not in render_markdown(
        replace(result, probes=one_other))
    # A build that passed: a torch that writes where an older one did not is torch's change.
    passed = (replace(result.probes[0], verdict=Verdict.GOOD, reason="exit 0"),
              *result.probes[1:])
    assert "Every build fails the same way" not in render_markdown(replace(result, probes=passed))
