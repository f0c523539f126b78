"""How nights of the scheduled sweep judge what a case does and say it: a case that passed
and can no longer be judged (a failure its `match` does not take, runs that disagree), a
failure that does not reproduce, a case that comes back, one edited to pass, one deleted.
The jobs as `.github/workflows/sweep.yml` runs them (tests/jobs/test_sweep_nights.py), against
the fake GitHub and a local nightly mirror."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from bot.core.suite import parse_case
from bot.core.verdicts import RunResult, Stage, Verdict, judge
from bot.demo.index_server import IndexServer
from bot.demo.mirror import build_mirror
from bot.jobs.sweep_probe import load_suite, probe_options
from tests.fakes.github_server import FakeGitHub
from tests.jobs.test_sweep_nights import TAG, Nights, nine_nights, seed

DAY = "day = int(torch.__version__.split('.dev')[1][:8]) % 100\n"


def write(folder: Path, name: str, body: str, block: str = "# timeout = 30\n") -> Path:
    """A case of `body`, which knows the nightly's day of May as `day`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(f"# /// bisect-case\n{block}# ///\nimport torch\n{DAY}{body}")
    return path


def bot_issues(repo: Any) -> list[Any]:
    return [i for i in repo.issues.values() if i.author.endswith("[bot]")]


def rows(said: str, case: str) -> list[str]:
    return [line for line in said.splitlines() if line.startswith(f"| `{case}` |")]



def _one_case(tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
              monkeypatch: pytest.MonkeyPatch, name: str, script: str
              ) -> tuple[dict[int, str], Any, Path]:
    """Nine nights' mirror and a suite of one case `s/<name>`: each day's version, the
    mirror, the suite's folder."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    suite = tmp_path / "repro_suites"
    write(suite / "s", name, script)
    return {d.day: mirror.version_on(d) for d in days}, mirror, suite

def test_a_case_whose_own_check_fails_past_its_match_is_filed_not_untested_for_ever(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its `match` takes the crashes the case was written for, not its own assert_close: a
    wrong gradient from the 4th was 'untested | different failure' every night, nothing
    filed, every exit 0."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    version = {d.day: mirror.version_on(d) for d in days}
    suite = tmp_path / "repro_suites"
    write(suite / "compile_crashes", "inplace_like",
          "if 4 <= day < 7:\n    raise AssertionError('Tensor-likes are not close!\\n\\n"
          "Mismatched elements: 12 / 128')\nprint('forward and backward match')\n",
          '# timeout = 30\n# match = "(RuntimeError|InternalTorchDynamoError)"\n')
    case = "compile_crashes/inplace_like"
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3) == 0 and bot_issues(github_repo) == []

        nights.said = ""
        assert nights.night("n4", 4) == 0
        [row] = rows(nights.said, case)
        assert "| skip | good (" in row and "| new-untestable |" in row
        assert "AssertionError: Tensor-likes are not close!" in row
        assert "can no longer be judged (1 new tonight)" in nights.said  # above the table
        [issue] = bot_issues(github_repo)
        assert issue.title == f"[sweep] {case} can no longer be judged in nightly {version[4]}"
        assert f"it passed on nightly `{version[3]}`" in issue.body
        assert "widen its `match`" in issue.body and "AssertionError" in issue.body

        nights.said = ""
        assert nights.night("n5", 5) == 0  # the same episode: the same issue, followed
        [row] = rows(nights.said, case)
        assert "| still-untestable |" in row
        assert bot_issues(github_repo) == [issue]
        assert f"still seen as of nightly: `{version[5]}`" in issue.body

        assert nights.night("n7", 7) == 0  # it passes again: said once
        [comment] = issue.comments
        assert f"appears fixed in nightly {version[7]}" in comment.body
        assert nights.night("n8", 8) == 0 and len(issue.comments) == 1
    assert github_server.rejected == []


def test_a_case_whose_runs_start_to_disagree_is_filed_once(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """repeat = 2, and from the 4th every other run fails (a race): 'flaky' was 'untested'
    every night. The runs count themselves in a file (no sandbox), so that it is certain."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    version = {d.day: mirror.version_on(d) for d in days}
    suite, counter = tmp_path / "repro_suites", tmp_path / "runs"
    write(suite / "s", "racy",
          f"from pathlib import Path\ncounter = Path({str(counter)!r})\n"
          "runs = int(counter.read_text()) if counter.exists() else 0\n"
          "counter.write_text(str(runs + 1))\n"
          "if day >= 4 and runs % 2 == 0:\n    raise RuntimeError('wrong result from a race')\n"
          "print('ok')\n", "# timeout = 30\n# repeat = 2\n")
    unconfined = ("--sandbox", "none")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        codes = [nights.night(f"n{d}", d, sweep_args=unconfined) for d in (3, 4, 5, 6)]
    assert codes == [0, 0, 0, 0]
    transitions = [row.split(" | ")[3] for row in rows(nights.said, "s/racy")]
    assert transitions == ["passing", "new-untestable", "still-untestable", "still-untestable"]
    [issue] = bot_issues(github_repo)
    assert issue.title == f"[sweep] s/racy can no longer be judged in nightly {version[4]}"
    assert "its runs disagree (`flaky: 1 good, 1 bad of 2 runs`)" in issue.body
    assert issue.comments == []


def test_the_stored_in_place_case_takes_its_own_assert_close_failing_as_its_bug() -> None:
    """Its `match` named only crashes: its wrong gradient was a 'different failure' (SKIP)."""
    path = Path(__file__).parents[2] / "repro_suites/compile_crashes/inplace_masked_fill_bwd.py"
    case = parse_case(path.read_text(), str(path), "compile_crashes/inplace_masked_fill_bwd")
    assert "torch.testing.assert_close(x_compiled.grad, x_eager.grad)" in case.text
    output = ('Traceback (most recent call last):\n  File "case.py", line 24, in <module>\n'
              "    torch.testing.assert_close(x_compiled.grad, x_eager.grad)\n"
              "AssertionError: Tensor-likes are not close!\n\nMismatched elements: 12 / 128\n")
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=output), probe_options(case).policy)
    assert judged.verdict is Verdict.BAD, judged.reason


def test_a_failure_that_does_not_reproduce_is_flaky_not_a_regression(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run a build (repeat = 1), and from the 4th the first run on a nightly fails (it
    counts its runs in a file: no sandbox). The one bad run was filed as a regression of the
    4th, found between adjacent nightlies without running anything again."""
    version, mirror, suite = _one_case(
        tmp_path, github_server, github_repo, monkeypatch, "once",
        f"from pathlib import Path\ncounter = Path({str(tmp_path)!r}) / f'runs-{{day}}'\n"
        "first = not counter.exists()\ncounter.write_text('ran')\n"
        "if day >= 4 and first:\n    raise RuntimeError('lost a race')\nprint('ok')\n")
    unconfined = ("--sandbox", "none")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3, sweep_args=unconfined) == 0
        nights.said = ""
        assert nights.night("n4", 4, sweep_args=unconfined) == 0
    [row] = rows(nights.said, "s/once")
    assert "| skip |" in row and "| new-untestable |" in row
    assert "flaky: 1 good, 1 bad of 2 runs (its failure did not reproduce" in row
    [issue] = bot_issues(github_repo)
    assert issue.title == f"[sweep] s/once can no longer be judged in nightly {version[4]}"
    assert "regressed" not in nights.said


def test_a_case_that_breaks_again_after_its_fix_is_followed_in_its_issue(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It fails on the 3rd, 5th and 7th only (each confirmed: the failing nightly and the
    last good one are run again). Each recurrence filed a fresh issue that did not name the
    earlier ones: three issues of one case."""
    version, mirror, suite = _one_case(
        tmp_path, github_server, github_repo, monkeypatch, "flips",
        "if day in (3, 5, 7):\n    raise RuntimeError('flip')\nprint('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert [nights.night(f"n{d}", d) for d in range(2, 9)] == [0] * 7
    [issue] = bot_issues(github_repo)
    assert issue.title == f"[sweep] s/flips regressed in nightly {version[7]}"
    assert f"first_bad={version[7]} -->" in issue.body
    assert (f"failing from `{version[3]}` to `{version[4]}`, `{version[5]}` to `{version[6]}`"
            in issue.body)
    said = [c.body for c in issue.comments]
    assert len(said) == 5
    for n, day in enumerate((4, 6, 8)):
        assert f"appears fixed in nightly {version[day]}" in said[2 * n]
    for n, day in enumerate((5, 7)):
        assert f"`s/flips` is back in nightly {version[day]}" in said[2 * n + 1]
        assert f"it had passed again in `{version[day - 1]}`" in said[2 * n + 1]


def test_a_case_back_after_its_issue_was_closed_gets_a_new_issue_naming_it(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It fails on the 3rd and from the 5th; a maintainer closed its issue after the sweep
    said it appeared fixed on the 4th. The 5th rewrote the closed issue's body and commented
    there that it was back, asking to reopen it: a closed issue is left closed and untouched
    everywhere else (a case still failing, a window another case broke in), and a new issue
    names it, as it names an earlier issue of several cases."""
    version, mirror, suite = _one_case(
        tmp_path, github_server, github_repo, monkeypatch, "again",
        "if day == 3 or day >= 5:\n    raise RuntimeError('again')\nprint('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert [nights.night(f"n{d}", d) for d in range(2, 5)] == [0] * 3
        [closed] = bot_issues(github_repo)
        assert f"appears fixed in nightly {version[4]}" in closed.comments[-1].body
        closed.state = "closed"  # the maintainer agrees, and closes it
        body, comments = closed.body, len(closed.comments)
        nights.said = ""
        assert nights.night("n5", 5) == 0
        assert (closed.state, closed.body, len(closed.comments)) == ("closed", body, comments)
        [new] = [issue for issue in bot_issues(github_repo) if issue is not closed]
        assert new.title == f"[sweep] s/again regressed in nightly {version[5]}"
        assert f"- an earlier issue of this case, #{closed.number}, was seen fixed" in new.body
        assert f"issue #{closed.number}, which saw it fixed, is closed: left as it is" \
            in nights.said

        nights.said = ""
        assert nights.night("n6", 6) == 0  # still failing: the new issue follows it
        assert f"s/again: updated issue #{new.number} (still failing in {version[6]})" \
            in nights.said
        assert (closed.body, len(closed.comments)) == (body, comments)
    assert github_server.rejected == []


def test_a_failing_case_edited_to_pass_is_not_said_fixed_by_the_nightly(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Someone works around the failure in the case's text; torch is not fixed. The pass of
    the edited text was said as 'appears fixed in nightly 5'."""
    version, mirror, suite = _one_case(
        tmp_path, github_server, github_repo, monkeypatch, "a",
        "if day >= 4:\n    raise RuntimeError('broke')\nprint('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3) == 0 and nights.night("n4", 4) == 0
        [issue] = bot_issues(github_repo)
        write(suite / "s", "a", "if day >= 4:\n    pass  # worked around\nprint('ok')\n")
        nights.said = ""
        assert nights.night("n5", 5) == 0
    [row] = rows(nights.said, "s/a")
    assert "| fixed |" in row and "passes with its edited text" in row
    assert "not counted as this nightly's fix" in row
    [comment] = issue.comments
    assert "appears fixed" not in comment.body
    assert "was edited since it failed, and passes with its edited text" in comment.body
    assert f"in nightly {version[5]} (its earlier text failed on `{version[4]}`)" in comment.body


def test_the_issue_of_a_deleted_case_is_told_once(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its issue said 'still failing' for ever, as no sweep runs it any more."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    suite = tmp_path / "repro_suites"
    gone = write(suite / "s", "a", "if day >= 4:\n    raise RuntimeError('broke')\nprint('ok')\n")
    write(suite / "s", "keep", "print('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3) == 0 and nights.night("n4", 4) == 0
        [issue] = bot_issues(github_repo)
        assert issue.comments == []
        gone.unlink()
        assert nights.night("n5", 5) == 0 and nights.night("n6", 6) == 0
    [comment] = issue.comments  # once
    assert "no longer runs `s/a`: it is no longer in the suite" in comment.body
    assert "s/keep" not in comment.body


def test_an_invalid_case_is_still_the_suite_s(tmp_path: Path) -> None:
    """Left out of the night's sweep until it is mended, but not removed."""
    from bot.jobs.sweep_probe import suite_files
    write(tmp_path / "s", "a", "print('ok')\n")
    (tmp_path / "s" / "broken.py").write_text("import torch\n")  # no metadata block
    (tmp_path / "s" / "_helper.py").write_text("")
    cases, errors = load_suite(tmp_path)
    assert [case.case_id for case in cases] == ["s/a"] and len(errors) == 1
    files = suite_files(tmp_path)
    assert sorted(files) == ["s/a", "s/broken"] and files["s/a"] == cases[0].script_hash


def test_an_ambiguous_bisection_says_so_in_the_summary(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No nightly of the 5th, the 6th's wheel does not install: the 6th may be the first bad
    one. The row read 'first bad nightly 07 (last good 04)', as if it were found."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    days = [dt.date(2026, 5, d) for d in range(1, 10)]
    nightly = seed(github_repo, days)
    mirror = build_mirror(tmp_path / "mirror", start=days[0], days=9,
                          missing=(dt.date(2026, 5, 5),), python_tags=(TAG,),
                          bug_for=lambda _: None, git_version_for=nightly.__getitem__)
    for wheel in (mirror.root / "cpu").rglob("*dev20260506*.whl"):
        wheel.write_bytes(b"not a zip")
    version = {d.day: mirror.version_on(d) for d in days if d.day != 5}
    suite = tmp_path / "repro_suites"
    write(suite / "s", "a", "if day >= 6:\n    raise RuntimeError('broke')\nprint('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n4", 4) == 0
        nights.said = ""
        assert nights.night("n7", 7) == 0
    [row] = rows(nights.said, "s/a")
    assert (f"bisection ambiguous: the first bad nightly is one of 2 candidates, {version[7]} "
            f"at the latest (builds before it could not be tested; last good {version[4]})"
            in row)


def test_a_nightly_swept_again_files_nothing_twice(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workflow run again, or run twice in a day, sweeps the nightly it swept: a failure
    it filed was 'new-failure' again, bisected again, and (the 5th's wheel, broken at the
    first sweep, installing now) filed in a second issue of another window."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    version = {d.day: mirror.version_on(d) for d in days}
    [wheel] = (mirror.root / "cpu").rglob("*dev20260505*.whl")
    intact = wheel.read_bytes()
    wheel.write_bytes(b"not a zip")
    suite = tmp_path / "repro_suites"
    write(suite / "s", "a", "if 5 <= day < 7:\n    raise RuntimeError('broke')\nprint('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3) == 0 and nights.night("n6", 6) == 0
        [issue] = bot_issues(github_repo)
        assert f"first_bad={version[6]} -->" in issue.body  # the 5th could not be tested
        wheel.write_bytes(intact)
        nights.said = ""
        assert nights.night("n6-again", 6) == 0
        assert bot_issues(github_repo) == [issue] and issue.comments == []
        [row] = rows(nights.said, "s/a")
        assert "| still-failing |" in row and "an earlier sweep of this nightly" in row

        assert nights.night("n7", 7) == 0
        [fixed] = issue.comments
        assert f"appears fixed in nightly {version[7]}" in fixed.body
        nights.said = ""
        assert nights.night("n7-again", 7) == 0
        [row] = rows(nights.said, "s/a")
        assert "| passing |" in row and "an earlier sweep of this nightly" in row
        assert issue.comments == [fixed]
    assert github_server.rejected == []


def test_a_pass_is_run_again_before_it_counts_as_a_fix(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure is confirmed before it is filed; a pass was not before it was said to fix
    the issue: a flaky case filed as such was 'appears fixed' at its first lucky run, and so
    was a regression whose failure let one run through. The runs count themselves in files
    (no sandbox), so that it is certain."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    version = {d.day: mirror.version_on(d) for d in days}
    suite, counter = tmp_path / "repro_suites", tmp_path / "runs"
    write(suite / "s", "racy",  # from the 4th, its 2nd and 5th runs fail
          f"from pathlib import Path\ncounter = Path({str(counter)!r})\n"
          "runs = int(counter.read_text()) if counter.exists() else 0\n"
          "counter.write_text(str(runs + 1))\n"
          "if day >= 4 and runs in (1, 4):\n    raise RuntimeError('wrong result from a race')\n"
          "print('ok')\n")
    write(suite / "s", "broken",  # from the 4th it fails, but for the first run of the 6th
          f"from pathlib import Path\nseen = Path({str(tmp_path)!r}) / f'ran-{{day}}'\n"
          "first = not seen.exists()\nseen.write_text('ran')\n"
          "if day >= 4 and not (day == 6 and first):\n    raise RuntimeError('broke')\n"
          "print('ok')\n")
    unconfined = ("--sandbox", "none")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        codes = [nights.night(f"n{d}", d, sweep_args=unconfined) for d in (3, 4, 5, 6, 7)]
    assert codes == [0] * 5
    titles = sorted(issue.title for issue in bot_issues(github_repo))
    assert titles == [f"[sweep] s/broken regressed in nightly {version[4]}",
                      f"[sweep] s/racy can no longer be judged in nightly {version[4]}"]
    broken, racy = sorted(bot_issues(github_repo), key=lambda issue: issue.title)
    assert broken.comments == []
    [fixed] = racy.comments  # the 5th's pass did not hold; the 6th's did
    assert f"appears fixed in nightly {version[6]}" in fixed.body
    transitions = [row.split(" | ")[3] for row in rows(nights.said, "s/racy")]
    assert transitions == ["passing", "new-untestable", "still-untestable", "fixed", "passing"]
    transitions = [row.split(" | ")[3] for row in rows(nights.said, "s/broken")]
    assert transitions == ["passing", "new-failure", "still-failing", "untested",
                           "still-failing"]
    [sixth] = [row for row in rows(nights.said, "s/broken") if "| untested |" in row]
    assert "its pass did not reproduce when run again" in sixth


def test_a_case_renamed_and_edited_at_once_keeps_its_issue_when_it_says_so(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither its id nor its text is the one filed: its issue was told it was removed from
    the suite, and the renamed case, failing with no earlier result, filed nothing. Its
    `renamed_from` says what it was."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    version = {d.day: mirror.version_on(d) for d in days}
    suite = tmp_path / "repro_suites"
    old = write(suite / "s", "a", "if 4 <= day < 7:\n    raise RuntimeError('broke')\n"
                "print('ok')\n")
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n3", 3) == 0 and nights.night("n4", 4) == 0
        [issue] = bot_issues(github_repo)
        old.unlink()
        write(suite / "s", "b", "if 4 <= day < 7:\n    raise RuntimeError('broke')\n"
              "print('still ok')\n", '# timeout = 30\n# renamed_from = "s/a"\n')
        nights.said = ""
        assert nights.night("n5", 5) == 0
        [row] = rows(nights.said, "s/b")
        assert "| still-failing |" in row and "compared with its earlier version" in row
        assert bot_issues(github_repo) == [issue] and issue.comments == []
        assert issue.title == f"[sweep] s/b regressed in nightly {version[4]}"
        assert "The scheduled sweep found that `s/b` (" in issue.body
        assert f"still failing as of nightly: `{version[5]}`" in issue.body
        assert nights.night("n7", 7) == 0
    [fixed] = issue.comments
    assert f"`s/b` appears fixed in nightly {version[7]}" in fixed.body
    assert github_server.rejected == []


def test_a_case_may_not_say_it_was_renamed_from_a_case_of_the_suite(tmp_path: Path) -> None:
    write(tmp_path / "s", "a", "print('ok')\n")
    write(tmp_path / "s", "b", "print('ok')\n", '# renamed_from = ["s/old", "s/a"]\n')
    write(tmp_path / "s", "c", "print('ok')\n", '# renamed_from = "not a case id"\n')
    cases, errors = load_suite(tmp_path)
    assert [case.case_id for case in cases] == ["s/a", "s/b"]
    assert cases[1].meta.renamed_from == ("s/old", "s/a")
    assert len(errors) == 2
    assert "c.py:2: renamed_from must be a case id" in errors[0]
    assert "b.py:1: renamed_from names s/a, a case of the suite" in errors[1]
