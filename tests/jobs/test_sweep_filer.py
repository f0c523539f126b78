"""Filing sweep findings into shared issues: a real SQLite history, the fake tracker, and the
ways a filing meets GitHub (cut short, issues deleted or closed, titles a person gave)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.adapters.history import History, Notice
from bot.core.safe_markdown import code_span, plain
from bot.jobs.sweep_filer import Filer, Refused
from bot.jobs.sweep_text import Row, notices_comment, summary_table, untestable_body
from tests.fakes.tracker import FakeTracker

V = "2.13.0.dev202605{:02d}+cpu".format


def find(history: History, case: str, transition: str, nightly: str, **detail: Any) -> None:
    base = {"first_bad": V(3), "last_good": V(2), "signature": f"RuntimeError: {case} broke",
            "path": f"repro_suites/{case}.py", "script_hash": f"hash-{case}"}
    history.add_finding(history.start_sweep(nightly), case, nightly, transition,
                        {**base, **detail})


def file(history: History, tracker: Any) -> list[str]:
    said: list[str] = []
    Filer(history, tracker, say=said.append).file_all()
    return said


def row(body: str, case: str) -> str:
    return next(line for line in body.splitlines() if line.startswith(f"| `{case}`"))


@pytest.fixture
def history(tmp_path: Path) -> History:
    with History(tmp_path / "history.sqlite3") as opened:
        yield opened


class CutShort(FakeTracker):
    """GitHub failing for a while (a 502, a rate limit): what the filing had left to send."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def update_issue(self, number: int, body: str, title: str | None = None) -> None:
        if self.down:
            raise ConnectionError("502 Bad Gateway")
        super().update_issue(number, body, title)

    def comment(self, number: int, body: str) -> None:
        if self.down:
            raise ConnectionError("502 Bad Gateway")
        super().comment(number, body)


def test_a_fix_in_a_filing_cut_short_still_shows_in_the_issue(history: History) -> None:
    """The retry found the case fixed already, so the body kept saying "still failing: 2 of
    the 2 cases" under the "appears fixed" comments, for good."""
    tracker = CutShort()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    for case in ("s/a", "s/b"):
        find(history, case, "fixed", V(6), previous=V(5))
    tracker.down = True
    with pytest.raises(ConnectionError):
        file(history, tracker)
    assert history.pending_findings() == [] and history.owes_github()
    tracker.down = False
    said = file(history, tracker)  # no new finding: it pays what the last one owed
    assert "still failing: 0 of the 2 cases" in issue.body
    assert "passes again" in row(issue.body, "s/a") and "passes again" in row(issue.body, "s/b")
    [comment] = issue.comments  # one for both, not one a case
    assert "`s/a` appears fixed in nightly" in comment and "`s/b` appears fixed" in comment
    assert f"(it failed on `{V(5)}`)" in comment and any("commented on #" in s for s in said)
    assert not history.owes_github()
    file(history, tracker)
    assert len(issue.comments) == 1


def test_a_case_that_joined_a_deleted_issue_is_filed_anew(history: History) -> None:
    """It was in no issue on GitHub: the group it joined was deleted before its body was
    written. Those who were in it when it went are not filed again (a person deleted it)."""
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    deleted = tracker.filed_by_bot()[0].number
    tracker.delete(deleted)
    find(history, "s/b", "new-failure", V(5))
    find(history, "s/c", "new-failure", V(5))
    said = file(history, tracker)
    [filed] = tracker.filed_by_bot()
    assert filed.number != deleted
    assert filed.title == f"[sweep] 2 cases regressed in nightly {V(3)} (s/b and 1 more)"
    assert "s/a" not in filed.body and filed.comments == []
    assert f"issue #{deleted} is gone: no longer followed" in said
    assert history.window_issues(V(2), V(3)) == [filed.number]
    assert not history.owes_github()


def test_a_late_case_joins_an_open_issue_with_a_comment_and_keeps_a_person_s_title(
    history: History
) -> None:
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    issue.title = "inductor: scan lowering broke cumsum"  # a triager's
    find(history, "s/gpu", "new-failure", V(5), first_bad=V(3).replace("+cpu", "+cu130"),
         last_good=V(2).replace("+cpu", "+cu130"))  # a CUDA case, a night later
    file(history, tracker)
    assert tracker.filed_by_bot() == [issue] and issue.title == "inductor: scan lowering broke cumsum"
    assert "`s/gpu` (failing in nightly" in issue.comments[-1]
    assert "`+cpu`, `+cu130` builds of that date" in issue.body
    assert "s/gpu" in row(issue.body, "s/gpu")

    issue.open = False  # the triager closed it: a later case is filed on its own
    find(history, "s/c", "new-failure", V(6))
    file(history, tracker)
    assert len(tracker.filed_by_bot()) == 2


def test_the_bot_s_own_title_follows_its_cases(history: History) -> None:
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    find(history, "s/b", "new-failure", V(4))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert issue.title == f"[sweep] 2 cases regressed in nightly {V(3)} (s/a and 1 more)"
    [comment] = issue.comments
    text, marker = comment.split("<!-- torch-bisect-bot:notices=")  # said once (a re-run)
    assert text == ("This case broke between the same two nightlies too, and was added to the "
                    f"table above:\n- `s/b` (failing in nightly {V(4)})\n")
    assert marker.endswith(" -->\n")


def test_a_case_joins_whatever_the_order_of_the_findings_of_one_filing(
    history: History
) -> None:
    """The group's only case fixed and a late case of its window, in either order."""
    for first in ("fixed", "new-failure"):
        tracker = FakeTracker()
        with History(Path(history.path.parent / f"{first}.sqlite3")) as fresh:
            find(fresh, "s/a", "new-failure", V(4))
            file(fresh, tracker)
            steps = [("s/a", "fixed"), ("s/late", "new-failure")]
            for case, transition in steps if first == "fixed" else steps[::-1]:
                find(fresh, case, transition, V(6), previous=V(5))
            file(fresh, tracker)
        [issue] = tracker.filed_by_bot()
        assert "passes again" in row(issue.body, "s/a"), first
        assert "still failing" in row(issue.body, "s/late"), first


def test_a_lost_history_follows_a_group_issue_s_cases_again_from_its_markers(
    history: History, tmp_path: Path
) -> None:
    """A body written from a history that lost some of an issue's cases dropped them; left
    unwritten, it said for good that cases fixed since still failed."""
    tracker = FakeTracker()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    with History(tmp_path / "fresh.sqlite3") as fresh:  # the artifact expired
        find(fresh, "s/a", "new-failure", V(5))
        said = file(fresh, tracker)
        assert len(tracker.filed_by_bot()) == 1
        assert "issue #1: 1 case(s) it names were not in this history; followed again from " \
            "its markers" in said
        assert "still failing in" in row(issue.body, "s/a")
        assert "not known: the history that filed it was lost" in row(issue.body, "s/b")
        assert f"case=s/b first_bad={V(3)} -->" in issue.body
        assert fresh.open_issues("s/b") != []  # so its next pass is its fix
        find(fresh, "s/b", "fixed", V(6))
        file(fresh, tracker)
        assert "passes again" in row(issue.body, "s/b")
        assert "`s/b` appears fixed in nightly" in issue.comments[-1]


def test_a_night_s_history_lost_heals_once_its_cases_are_found_again(
    history: History, tmp_path: Path
) -> None:
    """The upload of the night that filed the group was lost: the next night starts from
    the night before, finds both cases again, and the issue is written again (not frozen)."""
    import shutil
    tracker = FakeTracker()
    before = tmp_path / "before.sqlite3"
    find(history, "s/a", "new-failure", V(4))  # recorded, not filed yet
    find(history, "s/b", "new-failure", V(4))
    history._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(history.path, before)
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    with History(before) as restored:  # the findings are pending again there
        file(restored, tracker)
        find(restored, "s/a", "fixed", V(6), previous=V(5))
        file(restored, tracker)
    assert tracker.filed_by_bot() == [issue]
    assert "passes again" in row(issue.body, "s/a") and "still failing: 1 of the 2" in issue.body


def test_a_join_after_the_upgrade_retitles_an_issue_the_bot_titled_before_it(
    history: History
) -> None:
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    history._db.execute("DELETE FROM issue_state")  # filed by a version that kept no titles
    find(history, "s/b", "new-failure", V(5))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert issue.title == f"[sweep] 2 cases regressed in nightly {V(3)} (s/a and 1 more)"


def test_a_fix_of_500_cases_is_one_comment_github_takes(history: History) -> None:
    tracker = FakeTracker()  # refuses what is over 65,536 characters, as GitHub does
    cases = [f"s/case_{n:03d}" for n in range(500)]
    for case in cases:
        find(history, case, "new-failure", V(4))
    file(history, tracker)
    for case in cases:
        find(history, case, "fixed", V(6), previous=V(5))
    filer = Filer(history, tracker, say=lambda _: None)
    filer.file_all()
    [issue] = tracker.filed_by_bot()
    [comment] = issue.comments
    assert filer.refused == [] and not history.owes_github()
    assert comment.startswith("The scheduled sweep says 500 cases appear fixed:")
    assert "- … 440 cases pass again: see the table above" in comment
    assert "still failing: 0 of the 500 cases" in issue.body


def test_a_comment_github_refuses_is_given_up_not_owed_for_ever(history: History) -> None:
    class Locked(FakeTracker):
        def comment(self, number: int, body: str) -> None:
            raise Refused("HTTP 422: Validation Failed")

    tracker = Locked()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4))
    file(history, tracker)
    for case in ("s/a", "s/b"):
        find(history, case, "fixed", V(6))
    filer = Filer(history, tracker, say=lambda _: None)
    filer.file_all()
    assert filer.refused == ["the comment on #1: HTTP 422: Validation Failed"]
    assert not history.owes_github()
    assert "passes again" in row(tracker.issues[1].body, "s/a")  # the body was written still


def test_a_refile_cut_short_is_still_pending(history: History) -> None:
    """The joiner of a deleted group, refiled, met a 502: it stays to be filed."""
    class Down(FakeTracker):
        down = False

        def create_issue(self, title: str, body: str, labels: Any) -> int:
            if self.down:
                raise ConnectionError("502 Bad Gateway")
            return super().create_issue(title, body, labels)

    tracker = Down()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    tracker.delete(1)
    find(history, "s/b", "new-failure", V(5))
    tracker.down = True
    with pytest.raises(ConnectionError):
        file(history, tracker)
    assert [f.case_id for f in history.pending_findings()] == ["s/b"]
    tracker.down = False
    file(history, tracker)
    [filed] = tracker.filed_by_bot()
    assert filed.title == f"[sweep] s/b regressed in nightly {V(3)}"


def test_a_notice_made_while_comments_are_posted_is_not_taken_as_said(
    history: History
) -> None:
    history.add_notice(2, "s/b", "fixed", V(6))
    owed = history.unposted_notices()[2]
    history.add_notice(2, "s/c", "joined", V(6))  # after the comment was made
    history.notices_posted(2, owed)
    assert [n.case_id for n in history.unposted_notices()[2]] == ["s/c"]


def test_cases_with_the_same_text_keep_their_own_rows(history: History) -> None:
    tracker = FakeTracker()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4), script_hash="same")
    file(history, tracker)
    for case in ("s/a", "s/b"):  # both still swept
        sweep = history.start_sweep(V(5))
        from bot.core.results import ProbeRecord
        from bot.core.verdicts import Verdict
        history.store(case, "same", "o", ProbeRecord(0, V(5), Verdict.BAD, "exit 1", 1.0),
                      sweep)
        find(history, case, "still-failing", V(5), script_hash="same")
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert "repro_suites/s/a.py" in row(issue.body, "s/a")
    assert "repro_suites/s/b.py" in row(issue.body, "s/b")


def test_a_renamed_case_s_row_and_rerun_take_its_new_path(history: History) -> None:
    tracker = FakeTracker()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4))
    file(history, tracker)
    find(history, "s/renamed", "still-failing", V(5), script_hash="hash-s/a",
         path="repro_suites/s/renamed.py")
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert "repro_suites/s/renamed.py" in row(issue.body, "s/renamed")
    assert "bisect-bot bisect repro_suites/s/renamed.py" in issue.body
    assert "repro_suites/s/a.py" not in issue.body
    assert issue.title == f"[sweep] 2 cases regressed in nightly {V(3)} (s/renamed and 1 more)"


def test_an_ambiguous_window_names_its_candidates_in_a_group_issue(history: History) -> None:
    tracker = FakeTracker()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4), status="ambiguous",
             candidates=[V(3), V(4)])
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert f"- candidates: `{V(3)}`, `{V(4)}`" in issue.body


def test_an_ambiguous_window_s_issue_does_not_say_its_key_is_the_first_bad_nightly(
        history: History) -> None:
    tracker = FakeTracker()
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(5), status="ambiguous", first_bad=V(5),
             candidates=[V(4), V(5)], last_good=V(3))
        file(history, tracker)
    group = tracker.issues[1].body
    assert f"- first bad nightly: `{V(5)}` or an untested one before it" in group
    tracker.issues.clear()
    find(history, "s/c", "new-failure", V(5), status="ambiguous", first_bad=V(5),
         candidates=[V(4), V(5)], last_good=V(2))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    assert (f"started failing after nightly `{V(2)}`, in one of the candidates below, by "
            f"**{V(5)}** at the latest.") in issue.body
    assert f"- first bad nightly: `{V(5)}` or an untested one before it" in issue.body
    assert f"started failing in nightly **{V(5)}**" not in issue.body


def test_a_new_issue_ranks_the_commits_between_its_nightlies(history: History) -> None:
    from tests.fakes.commits import FakeCommitSource, fake_sha
    source = FakeCommitSource()
    base = source.add_main("Start of the day")
    culprit = source.add_main("[inductor] Scan cumsum in the lowering",
                              files=("torch/_inductor/lowering.py",))
    head = source.add_main("Bump a submodule")
    good, bad = fake_sha("nightly 02"), fake_sha("nightly 03")
    source.add_nightly(good, "2026-05-02", base)
    source.add_nightly(bad, "2026-05-03", head)
    for case in ("s/a", "s/b"):
        find(history, case, "new-failure", V(4), operators=["cumsum"],
             commits={"last_good": good, "first_bad": bad})
    tracker = FakeTracker()
    Filer(history, tracker, say=lambda _: None, commits=source).file_all()
    [issue] = tracker.filed_by_bot()
    assert f"- on main: https://github.com/pytorch/pytorch/compare/{base}...{head} (2 commits)" \
        in issue.body
    suspect = next(line for line in issue.body.splitlines() if line.startswith("| [`"))
    assert suspect.startswith(f"| [`{culprit[:10]}`]") and "title mentions `cumsum`" in suspect
    assert "Bump a submodule" not in issue.body
    assert source.lookups.count(f"compare {base}...{head}") == 1  # once a window, not a case


def test_a_locked_issue_is_left_as_it_is_without_failing_the_filing(history: History) -> None:
    """Locking is a maintainer's routine (lock bots lock closed issues): the collect job
    went red for it."""
    class Locked(FakeTracker):
        def comment(self, number: int, body: str) -> None:
            raise Refused("HTTP 403: Unable to create comment because issue is locked.",
                          expected=True)

    tracker = Locked()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    find(history, "s/a", "fixed", V(6))
    said: list[str] = []
    filer = Filer(history, tracker, say=said.append)
    filer.file_all()
    assert filer.refused == [] and not history.owes_github()
    assert "the comment on #1: not taken (HTTP 403: Unable to create comment because issue is " \
        "locked.); left as it is" in said


def test_an_issue_created_but_answered_5xx_keeps_its_suspects_when_found_again(
    history: History
) -> None:
    from tests.fakes.commits import FakeCommitSource, fake_sha

    class Answered502(FakeTracker):
        fail = True

        def create_issue(self, title: str, body: str, labels: Any) -> int:
            number = super().create_issue(title, body, labels)
            if self.fail:  # GitHub made it, then answered 502
                self.fail = False
                raise ConnectionError("502 Bad Gateway")
            return number

    source = FakeCommitSource()
    base = source.add_main("Start")
    source.add_main("[inductor] cumsum scan", files=("torch/_inductor/lowering.py",))
    good, bad = fake_sha("n02"), fake_sha("n03")
    source.add_nightly(good, "2026-05-02", base)
    source.add_nightly(bad, "2026-05-03", source.main[-1].sha)
    find(history, "s/a", "new-failure", V(4), operators=["cumsum"],
         commits={"last_good": good, "first_bad": bad})
    tracker = Answered502()
    with pytest.raises(ConnectionError):
        Filer(history, tracker, say=lambda _: None, commits=source).file_all()
    Filer(history, tracker, say=lambda _: None, commits=source).file_all()
    [issue] = tracker.filed_by_bot()
    assert issue.edits == 1 and "title mentions `cumsum`" in issue.body
    assert issue.body.count("/compare/") == 1  # main's, not the nightly branch's too


def test_a_new_issue_names_the_closed_one_of_the_same_nightlies(history: History) -> None:
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    [closed] = tracker.filed_by_bot()
    closed.open = False
    find(history, "s/b", "new-failure", V(5))
    file(history, tracker)
    [new] = [issue for issue in tracker.filed_by_bot() if issue is not closed]
    assert f"- an earlier issue of these two nightlies, #{closed.number}, is closed" in new.body


def test_a_closed_issue_found_by_its_marker_is_left_closed_and_unedited(
    history: History, tmp_path: Path
) -> None:
    """A maintainer closed the case's issue (won't fix); then the history was lost and the
    case was a new failure again, with the same first bad nightly. Found by its marker, the
    closed issue's body was rewritten: it is the regression the maintainer closed, so it is
    left closed and unedited, and no other issue files it again."""
    tracker = FakeTracker()
    find(history, "s/a", "new-failure", V(4))
    file(history, tracker)
    [closed] = tracker.filed_by_bot()
    closed.open = False
    body, edits = closed.body, closed.edits
    with History(tmp_path / "fresh.sqlite3") as fresh:  # the artifact expired
        find(fresh, "s/a", "new-failure", V(5))
        said = file(fresh, tracker)
        assert tracker.filed_by_bot() == [closed]
        assert (closed.open, closed.body, closed.edits, closed.comments) == \
            (False, body, edits, [])
        assert f"s/a: issue #{closed.number} was closed on GitHub while the case still fails " \
            f"(in {V(5)}): left closed and untouched" in said
        find(fresh, "s/a", "fixed", V(6), previous=V(5))  # still followed: its fix is said
        file(fresh, tracker)
        assert closed.body == body and f"appears fixed in nightly {V(6)}" in closed.comments[-1]


def test_a_case_that_cannot_be_judged_again_names_its_closed_issue(history: History) -> None:
    """Its "can no longer be judged" issue saw it pass and was closed; when it could not be
    judged again, the new issue did not name the closed one, as a regression's does."""
    tracker = FakeTracker()
    untestable = {"kind": "untestable", "reason": "flaky: 1 of 2 runs failed"}
    find(history, "s/a", "new-untestable", V(4), passed_in=V(2), **untestable)
    find(history, "s/a", "fixed", V(5))
    file(history, tracker)
    [closed] = tracker.filed_by_bot()
    assert f"appears fixed in nightly {V(5)}" in closed.comments[-1]
    closed.open = False  # the maintainer agrees, and closes it
    body = closed.body
    find(history, "s/a", "new-untestable", V(7), first_bad=V(7), passed_in=V(6), **untestable)
    file(history, tracker)
    [new] = [issue for issue in tracker.filed_by_bot() if issue is not closed]
    assert new.title == f"[sweep] s/a can no longer be judged in nightly {V(7)}"
    assert f"- an earlier issue of this case, #{closed.number}, was seen fixed" in new.body
    assert (closed.open, closed.body) == (False, body)
    find(history, "s/a", "still-untestable", V(8), first_bad=V(7), passed_in=V(6), **untestable)
    file(history, tracker)  # written again from the history, it still names it
    assert f"still seen as of nightly: `{V(8)}`" in new.body
    assert f"- an earlier issue of this case, #{closed.number}, was seen fixed" in new.body


def test_a_case_id_with_a_backtick_stays_one_code_span_wherever_it_is_named(
    history: History
) -> None:
    """A case is named by its file's path, which may hold a backtick: put between two
    backticks, the rest of the name was Markdown, and its `@team` pinged a team."""
    weird = "s/x` | @pytorch/triage [here](https://example.com) `y"
    named = code_span(weird)
    tracker = FakeTracker()
    find(history, weird, "new-failure", V(4))
    file(history, tracker)
    [issue] = tracker.filed_by_bot()
    find(history, weird, "fixed", V(6), previous=V(5))
    file(history, tracker)
    [fixed] = issue.comments
    said = [issue.body, fixed, untestable_body(weird, {"first_bad": V(4), "passed_in": V(3)}),
            notices_comment([Notice(weird, kind, V(6), V(5))
                             for kind in ("removed", "again", "edited", "fixed", "joined")])]
    for text in said:
        assert named in text and f"`{weird}`" not in text
    assert f"found that {named} ({plain(f'repro_suites/{weird}.py')}) started" in issue.body
    for bullet in ("removed (the sweeps", "is back in nightly", "passes with its edited text",
                   "appears fixed in nightly", "(failing in nightly"):
        assert f"- {named} {bullet}" in said[-1]
    table = summary_table(V(6), [Row(weird, "good", f"bad ({V(5)})", "new-untestable", "x")])
    assert f"| {named.replace('|', chr(92) + '|')} | good |" in table
    assert f"- {named}: x" in table


def test_an_ambiguous_bisection_s_note_reads_as_its_reason(history: History) -> None:
    """The status and the core's note ran together: "- bisection: ambiguous 1 untestable
    build(s) hide the exact boundary"."""
    tracker = FakeTracker()
    note = "1 untestable build(s) hide the exact boundary"
    find(history, "s/a", "new-failure", V(5), status="ambiguous", first_bad=V(5),
         candidates=[V(4), V(5)], last_good=V(3), note=note)
    find(history, "s/b", "new-failure", V(6), status="found", first_bad=V(6), last_good=V(5),
         note="(adjacent nightlies)")
    file(history, tracker)
    lone, adjacent = (issue.body for issue in tracker.filed_by_bot())
    assert f"- bisection: ambiguous: {note}\n" in lone
    assert "- bisection: found (adjacent nightlies)\n" in adjacent
    for case in ("s/c", "s/d"):
        find(history, case, "new-failure", V(5), status="ambiguous", first_bad=V(5),
             candidates=[V(4), V(5)], last_good=V(3), note=note)
    file(history, tracker)
    [group] = [i.body for i in tracker.filed_by_bot() if "s/c" in i.body]
    assert f"- bisection: ambiguous: {note}\n" in group
