"""Filing what the sweeps found: issues created, rewritten and commented on, each only once.

The history is the outbox. Acting on a finding records what GitHub is owed (a body to write
again, a comment to post) before anything is sent, and each finding is marked handled as soon
as it is acted on; then the filing writes what is owed, one edit and one comment an issue
however many of its cases changed, and clears each debt once GitHub took it. A filing cut
short leaves its debts for the next one, which pays them even with no finding of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.adapters.history import History, IssueCase, Notice
from bot.core.suite import Transition, issue_number
from bot.core.suspects import Clues
from bot.jobs.sweep_text import (
    LABELS,
    MARKER,
    UNTESTABLE,
    fails_differently,
    issue_body,
    issue_text,
    issue_title,
    notices_comment,
    notices_marker,
    regression_key,
    untestable_body,
    untestable_key,
    untestable_title,
)
from bot.jobs.triage_commits import CommitSource, commit_range

_MARKED_CASE = re.compile(r"<!-- torch-bisect-bot:regression case=(\S+) first_bad=(\S+) -->")
_GROUP_TITLE = re.compile(r"\[sweep\] \d+ cases regressed in nightly \S+ \(")


class Refused(Exception):
    """What an issue tracker will never accept as asked (an issue deleted, a body it finds
    invalid): filing sets that finding aside and goes on with the others. `gone`: the issue
    no longer exists, so the history stops following it."""

    def __init__(self, message: str, gone: int | None = None, expected: bool = False) -> None:
        super().__init__(message)
        self.gone = gone
        self.expected = expected  # what people do to issues (lock them): not a failure


@dataclass(frozen=True)
class TrackedIssue:
    """An issue as the tracker has it now."""

    title: str
    body: str
    open: bool
    # The bot filed it: it has the bot's label and a case's hidden marker, and a bot opened
    # it. The only issues the bot writes, and (but for a fix on a case's linked issue) the
    # only ones it comments on.
    own: bool


class IssueTracker(Protocol):
    """The few things a sweep asks of GitHub; the CLI adapts the GitHub client to it. A
    request refused for good raises Refused; any other error stops the filing, and what is
    left stays pending for the next run."""

    def find_issue(self, key: str) -> int | None: ...

    def find_issues(self, key: str) -> list[int]: ...  # every issue whose body holds `key`

    def issue(self, number: int) -> TrackedIssue | None: ...  # None: no such issue

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> int: ...

    def update_issue(self, number: int, body: str, title: str | None = None) -> None: ...

    def comment(self, number: int, body: str) -> None: ...

    def comments(self, number: int) -> list[str]: ...  # the bodies of the issue's comments


@dataclass
class Filer:
    """Acts on the findings the sweeps recorded. The cases that broke between the same two
    nightlies share an issue while it is open; a case that joins one filed earlier is said
    in a comment, and the bot's title follows the cases unless a person retitled it."""

    history: History
    tracker: IssueTracker
    repo: str | None = None
    say: Callable[[str], None] = print
    refused: list[str] = field(default_factory=list)  # "what: why", set aside this run
    # pytorch/pytorch's commits: a new issue ranks those between its two nightlies
    commits: CommitSource | None = None
    _created: set[int] = field(default_factory=set)  # issues this filing created
    # The issue each case of the suite links (its `issue =`), by case id, where the suite is
    # known: the one issue not the bot's own that a case's fix is said on.
    linked: Mapping[str, int] | None = None
    # "what: why" of each issue left untouched as not the bot's own (a history from
    # elsewhere names any issue by its number)
    foreign: list[str] = field(default_factory=list)

    def file_all(self) -> int:
        handled = 0
        for _ in range(3):  # the cases of a group issue found gone are filed anew, once
            for finding in self.history.pending_findings():
                act = {Transition.NEW_FAILURE.value: self._new_failure,
                       Transition.STILL_FAILING.value: self._still_failing,
                       Transition.FIXED.value: self._fixed,
                       Transition.NEW_UNTESTABLE.value: self._untestable,
                       Transition.STILL_UNTESTABLE.value: self._untestable}[finding.transition]
                try:
                    act(finding.case_id, finding.nightly, finding.detail)
                except Refused as why:
                    self._set_aside(f"{finding.case_id} ({finding.transition} in "
                                    f"{finding.nightly})", why)
                self.history.mark_handled(finding.uid)
                handled += 1
            self._pay()
            if not self.history.pending_findings():
                break
        return handled

    # -- what GitHub is owed ----------------------------------------------------------------
    def _pay(self) -> None:
        """Writes the bodies, then posts the comments, owed."""
        for number, retitle in self.history.stale_issues():
            self._write(number, retitle)
        for number, notices in self.history.unposted_notices().items():
            why_not = self._not_ours(number, notices)
            if why_not:
                self.history.notices_posted(number, notices)  # given up: never to be owed
                self._foreign(f"the comment on #{number}", why_not)
                continue
            try:
                # A collect job run again starts from the history it started from: what
                # its first run posted is on the issue, not in that history.
                owed = notices_marker(notices) not in "\n".join(self.tracker.comments(number))
                if owed:
                    self.tracker.comment(number, notices_comment(notices))
            except Refused as why:  # given up, or it would be owed (and refused) for ever
                self.history.notices_posted(number, notices)
                self._set_aside(f"the comment on #{number}", why)
                continue
            self.history.notices_posted(number, notices)
            for notice in notices:
                what = {"fixed": f"appears fixed in nightly {notice.nightly}",
                        "again": f"back in nightly {notice.nightly}",
                        "edited": f"edited, passes in nightly {notice.nightly}",
                        "removed": "no longer in the suite"}.get(notice.kind,
                                                                          "joined it")
                done = "commented" if owed else "already said"
                self.say(f"{notice.case_id}: {done} on #{number}: {what}")

    def _write(self, number: int, retitle: bool) -> None:
        cases = self.history.issue_cases(number)
        if not cases:
            self.history.written(number)
            return
        now = self.tracker.issue(number)
        why_not = self._not_ours(number)
        if why_not:
            self.history.written(number)
            self.history.forget_issue(number)  # none of its cases is filed there again
            self._foreign(f"issue #{number}", why_not)
            return
        unknown = self._unknown_cases(now, cases)
        if unknown:
            # The history that filed them was lost (an artifact expired, a night's upload
            # lost): followed again from the issue's own markers, their state unknown until
            # their next result (a pass is then their fix), so the body loses none of them.
            lead = cases[0].detail
            for case_id, first_bad in sorted(unknown):
                self.history.remember_issue(
                    regression_key(case_id, first_bad), case_id, number, first_bad,
                    {"first_bad": first_bad, "last_good": lead.get("last_good"),
                     "adopted": True})
            self.say(f"issue #{number}: {len(unknown)} case(s) it names were not in this "
                     "history; followed again from its markers")
            cases = self.history.issue_cases(number)
        title, body = issue_text(cases)
        if retitle and (now is None or not self._bot_titled(number, now.title, title, cases)):
            retitle = False  # a title a person gave it stays; the bot's own follows its cases
        try:
            self.tracker.update_issue(number, body, title if retitle else None)
        except Refused as why:
            self._set_aside(f"issue #{number}", why)
            if why.gone is None:  # refused for good: its joiners are in no issue on GitHub
                self.history.written(number)
                self._orphaned(number)
            return
        self.history.written(number, title if retitle else None)
        self.say(f"issue #{number}: written ({len(cases)} case(s))")

    def _not_ours(self, number: int, notices: Sequence[Notice] = ()) -> str | None:
        """Why issue `number` is not the filing's to write (or, with `notices`, to comment
        on), or None when it is: the history names issues by number alone, and a history
        that came from elsewhere (an artifact another workflow uploaded) named any issue."""
        now = self.tracker.issue(number)
        if now is None or now.own:  # a gone issue is found gone by the request itself
            return None
        linked = self.linked or {}
        if notices and all(n.kind == "fixed" and linked.get(n.case_id) == number
                           for n in notices):
            return None  # a fix said on the issue a case of the suite links
        if notices and self.linked is None and all(n.kind == "fixed" for n in notices):
            return ("not an issue the bot filed, and no suite was given to tell whether a "
                    "case links it (sweep-merge --suite DIR)")
        return ("not an issue the bot filed (it lacks the bot's label, a case's marker or a "
                "bot author), nor one a case of the suite links: left untouched")

    def _foreign(self, what: str, why: str) -> None:
        self.foreign.append(f"{what}: {why}")
        self.say(f"{what}: refused: {why}")

    @staticmethod
    def _unknown_cases(now: TrackedIssue | None, cases: Sequence[IssueCase]
                       ) -> set[tuple[str, str]]:
        """(case id, first bad) of the cases the issue names that the history does not have
        for it: none while it names no more cases than the history has (a renamed case is
        named by its old id until the body is written again)."""
        named = set(_MARKED_CASE.findall(now.body if now else ""))
        if len(named) <= len(cases):
            return set()
        known = {c.case_id for c in cases}
        return {(case_id, first_bad) for case_id, first_bad in named if case_id not in known}

    def _bot_titled(self, number: int, current: str, title: str,
                    cases: Sequence[IssueCase]) -> bool:
        """Whether the issue's title is one the bot gave it (or would have: an issue filed
        before the bot kept its titles)."""
        lead = cases[0]
        mine = {self.history.bot_title(number), title,
                issue_title(lead.case_id, lead.detail["first_bad"])}
        return current in mine or _GROUP_TITLE.match(current) is not None

    def _set_aside(self, what: str, why: Refused) -> None:
        # Kept pending, it would be the first to fail in every later run, and nothing after
        # it would ever be filed (an audit's deleted issue did that).
        if why.expected:  # a person's doing (a locked issue): nothing for the bot's owner
            self.say(f"{what}: not taken ({why}); left as it is")
            return
        self.refused.append(f"{what}: {why}")
        self.say(f"{what}: GitHub refused it for good ({why}); set aside")
        if why.gone is not None:  # or every later night would meet it again
            self._gone(why.gone)

    def _gone(self, number: int) -> None:
        """Stops following a deleted issue; the cases that joined it unseen are filed anew."""
        self._orphaned(number)
        self.history.forget_issue(number)
        self.say(f"issue #{number} is gone: no longer followed")

    def _marked_open(self, case_id: str) -> list[int]:
        """The open issues whose marker names the case: a history started over (its artifact
        expired, or failed to download) no longer holds them, and a fix is still theirs."""
        prefix = MARKER.split("{first_bad}")[0].format(case=case_id)
        found = [number for number in self.tracker.find_issues(prefix)
                 if (issue := self.tracker.issue(number)) is not None and issue.open]
        for number in found:
            self.say(f"{case_id}: issue #{number} names it (a history started over)")
        return found

    def _orphaned(self, number: int) -> None:
        """The cases that joined issue `number` with no comment yet are in no issue on GitHub:
        their new failures are pending again, to be filed anew."""
        for case in self.history.unannounced_joins(number):
            self.history.requeue(case.case_id, case.seen_in or case.detail["first_bad"],
                                 case.detail)
            self.say(f"{case.case_id}: to be filed anew (issue #{number} did not take it)")

    # -- the findings ---------------------------------------------------------------------
    def _new_failure(self, case_id: str, nightly: str, detail: dict[str, Any]) -> None:
        first_bad = detail.get("first_bad")
        if not first_bad:
            self.say(f"{case_id}: new failure, but no first bad nightly to file")
            return
        key = regression_key(case_id, first_bad)
        number = self.tracker.find_issue(key)
        if number is not None:
            if not any("commit_range" in case.detail
                       for case in self.history.issue_cases(number)):
                # found by its marker (a lost history, a create answered 5xx): the body to
                # write keeps its window on main and its suspects
                detail = self._with_suspects(detail)
            self._remember(key, case_id, number, detail, nightly)
            # A closed one is the very regression (this case, this first bad nightly) a person
            # closed (won't fix, not a bug), not a new episode as a case back after its fix
            # is: it is left closed and unedited and no new issue files it again, as for a case
            # that still fails; a lost history must not undo a release owner's triage. It is
            # followed still, so a later pass is said on it and a case of its window names it.
            if self._closed(number, case_id, nightly):
                return
            self.history.mark_stale(number)
            self.say(f"{case_id}: updated issue #{number} (first bad {first_bad})")
            return
        number, closed = self._open_window_issue(detail)
        if number is not None:
            self._remember(key, case_id, number, detail, nightly)
            self.history.mark_stale(number, retitle=True)
            if number not in self._created:
                self.history.add_notice(number, case_id, "joined", nightly)
            self.say(f"{case_id}: joins issue #{number}, of the cases that broke between the "
                     f"same two nightlies (first bad {first_bad})")
            return
        reused, earlier = self._back(key, case_id, nightly, detail)
        if reused:
            return
        title = issue_title(case_id, first_bad)
        detail = {**self._with_suspects(detail), **({"closed_issue": closed} if closed else {}),
                  **({"earlier_issue": earlier} if earlier else {})}
        number = self.tracker.create_issue(title, issue_body(case_id, detail, nightly),
                                           list(LABELS))
        self._created.add(number)
        self._remember(key, case_id, number, detail, nightly)
        self.history.written(number, title)
        self.say(f"{case_id}: filed issue #{number} (first bad {first_bad})")

    def _back(self, key: str, case_id: str, nightly: str, detail: dict[str, Any]
              ) -> tuple[bool, int | None]:
        """A case whose issue (of the same kind) was seen fixed and that fails again: that
        issue follows it again, with a comment, rather than a new issue every time it comes
        back (a flaky case filed one a week). An issue of several cases, or one a person
        closed, is only named (the second value) by the new one: a closed issue is left
        closed and untouched, as it is for a case that still fails."""
        case_hash = detail.get("script_hash")
        for number, filed, _ in self.history.fixed_issues(case_id, case_hash):
            now = self.tracker.issue(number)
            if filed.get("kind") != detail.get("kind") or now is None:
                continue  # another kind of issue, or one deleted
            if not now.open:
                self.say(f"{case_id}: back in {nightly}, and issue #{number}, which saw it "
                         "fixed, is closed: left as it is; a new issue names it")
                return False, number
            if any(case.case_id != case_id for case in self.history.issue_cases(number)):
                return False, number
            previous = self.history.reopen_issue(number, case_id, key, detail["first_bad"],
                                                 self._with_suspects(detail), case_hash,
                                                 nightly)
            if previous is None:
                continue
            self.history.add_notice(number, case_id, "again", nightly, previous)
            self.history.mark_stale(number, retitle=True)
            self.say(f"{case_id}: back in issue #{number} (it had passed again in {previous}), "
                     "not a new issue")
            return True, None
        return False, None

    def _untestable(self, case_id: str, nightly: str, detail: dict[str, Any]) -> None:
        """A case that passed and can no longer be judged (a failure its `match` does not take,
        flaky runs): one issue while it lasts, updated each night it is seen."""
        case_hash = self._follow(case_id, nightly, detail)
        key = untestable_key(case_id, str(detail.get("passed_in")))
        number = self.history.issue_of_key(key)
        if number is None and (number := self.tracker.find_issue(key)) is not None:
            self._remember(key, case_id, number, detail, nightly)  # a history started over
        if number is not None:
            self.history.saw_again(number, case_id, nightly, detail.get("signature"))
            if not self._closed(number, case_id, nightly):
                self.history.mark_stale(number)
                self.say(f"{case_id}: updated issue #{number} (still cannot be judged in "
                         f"{nightly})")
            return
        detail = {**detail, "script_hash": case_hash} if case_hash else detail
        reused, earlier = self._back(key, case_id, nightly, detail)
        if reused:
            return
        detail = {**detail, "earlier_issue": earlier} if earlier else detail
        title = untestable_title(case_id, detail["first_bad"])
        number = self.tracker.create_issue(title, untestable_body(case_id, detail),
                                           list(LABELS))
        self._created.add(number)
        self._remember(key, case_id, number, detail, nightly)
        self.history.written(number, title)
        self.say(f"{case_id}: filed issue #{number} (passed on {detail.get('passed_in')}, "
                 f"can no longer be judged since {detail['first_bad']})")

    def _with_suspects(self, detail: dict[str, Any]) -> dict[str, Any]:
        """The commits between the window's nightlies on main, ranked by the operators the
        case calls (a sweep has no triage): kept with the issue's first case."""
        nightlies = detail.get("commits") or {}
        good, bad = nightlies.get("last_good"), nightlies.get("first_bad")
        if self.commits is None or not (good and bad):
            return detail
        found = commit_range(self.commits, good, bad,
                             Clues(operators=tuple(detail.get("operators") or ())))
        return {**detail, "commit_range": found.to_dict()}

    def _remember(self, key: str, case_id: str, number: int, detail: dict[str, Any],
                  nightly: str) -> None:
        self.history.remember_issue(key, case_id, number, detail["first_bad"], detail,
                                    detail.get("script_hash"), seen_in=nightly)

    def _open_window_issue(self, detail: dict[str, Any]) -> tuple[int | None, int | None]:
        """The open issue of the same window to join, or None and a closed one (a new issue
        names it: the same two nightlies bound a regression someone triaged already)."""
        closed = None
        for number in self.history.window_issues(detail.get("last_good"), detail["first_bad"]):
            if number in self._created:
                return number, None
            now = self.tracker.issue(number)
            if now is not None and now.open:
                return number, None
            if now is not None and closed is None:
                closed = number
        return None, closed

    def _follow(self, case_id: str, nightly: str, detail: dict[str, Any]) -> str | None:
        for old in detail.get("renamed_from") or ():  # renamed and edited: it says so
            self.history.rename_case(str(old), case_id)
        case_hash = detail.get("script_hash")
        if case_hash:
            for number in self.history.follow_case(case_id, case_hash, nightly,
                                                   detail.get("path")):
                self.history.mark_stale(number, retitle=True)  # they name it
        return case_hash

    def _still_failing(self, case_id: str, nightly: str, detail: dict[str, Any]) -> None:
        for number, filed in self.history.open_issues(case_id,
                                                      self._follow(case_id, nightly, detail)):
            if filed.get("kind") == UNTESTABLE:
                continue  # it fails as defined now: its regression's issue says so
            self.history.saw_again(number, case_id, nightly, detail.get("signature"))
            if self._closed(number, case_id, nightly):
                continue
            self.history.mark_stale(number)
            otherwise = fails_differently(filed.get("signature"), detail.get("signature"))
            self.say(f"{case_id}: updated issue #{number} (still failing in {nightly}"
                     f"{', but otherwise' if otherwise else ''})")

    def _closed(self, number: int, case_id: str, nightly: str) -> bool:
        """Whether issue `number` is closed on GitHub though its case still fails: a person
        closed it (won't fix, not a bug, tracked elsewhere), so the nightly update of its
        body is not written (it was, every night), and no other issue is filed for it."""
        now = self.tracker.issue(number)
        if now is None or now.open:
            return False
        self.say(f"{case_id}: issue #{number} was closed on GitHub while the case still fails (in "
                 f"{nightly}): left closed and untouched")
        return True

    def _fixed(self, case_id: str, nightly: str, detail: dict[str, Any]) -> None:
        case_hash = self._follow(case_id, nightly, detail)
        filed = [number for number, _ in self.history.open_issues(case_id, case_hash)] or \
            self._marked_open(case_id)
        linked = issue_number(detail.get("issue"), self.repo)
        numbers = filed + ([linked] if linked is not None and linked not in filed else [])
        kind = "edited" if detail.get("edited") else "fixed"  # its edited text passes
        for number in numbers:
            if not any(self.history.has_notice(number, case_id, k) for k in ("fixed", "edited")):
                self.history.add_notice(number, case_id, kind, nightly, detail.get("previous"))
        self.history.mark_fixed(case_id, nightly, case_hash)
        for number in filed:  # an issue of several cases shows which of them pass again
            if len(self.history.issue_cases(number)) > 1:
                self.history.mark_stale(number)
