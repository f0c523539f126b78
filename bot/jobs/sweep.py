"""Sweeps: run every case on one nightly, bisect new failures, file and update issues."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.adapters.environments import (
    DEFAULT_PACKAGES,
    EnvironmentCache,
    IndexOutage,
    ProvisionError,
)
from bot.adapters.history import History, nightly_after, trimmed, version_key
from bot.adapters.runner import Runner
from bot.core.bisection import Bisection, Status
from bot.core.builds import Build
from bot.core.issue_facts import gpus_needed, script_installs
from bot.core.results import BisectResult, ProbeRecord
from bot.core.suite import Case, Expect, Requires, Transition, transition
from bot.core.suspects import operators_in
from bot.core.verdicts import FLAKY, Judgement, Policy, Stage, Verdict, judge
from bot.jobs.engine import Engine, Prober, ProbeStopped, Progress, combine_runs, fold_round
from bot.jobs.gpu import cuda_devices
from bot.jobs.sweep_probe import HistoryMemo, probe_options, rerun_flags
from bot.jobs.sweep_text import (
    UNFINISHED,
    UNTESTABLE,
    Row,
    fails_differently,
    untestable_key,
)


def _quiet(event: str, **details: Any) -> None:
    return None


def _done(sweep_id: str) -> None:
    return None


@dataclass
class _Held:
    """A memo that answers from the history but keeps a new result back, to be stored once
    it is confirmed."""

    memo: HistoryMemo
    record: ProbeRecord | None = None

    def get(self, build_version: str) -> ProbeRecord | None:
        return self.memo.get(build_version)

    def put(self, record: ProbeRecord) -> None:
        self.memo.count(record)  # made now, whether or not it is ever stored
        self.record = record


@dataclass
class _Unstored:
    """The memo, answering the nightly from its run not stored yet: a new failure's run is
    stored once its bisection ends, so that a sweep stopped in the middle of it (Ctrl-C, the
    runner's SIGTERM) leaves the case's previous result as it was; stored first, the next
    night found it failing before and said `still-failing`, bisecting and filing nothing."""

    memo: HistoryMemo
    record: ProbeRecord

    def get(self, build_version: str) -> ProbeRecord | None:
        return self.record if build_version == self.record.version else self.memo.get(
            build_version)

    def put(self, record: ProbeRecord) -> None:
        self.memo.put(record)


@dataclass
class Sweeper:
    """Runs cases on `builds[-1]` (the nightly); the older builds are for bisecting."""

    history: History
    cache: EnvironmentCache
    runner: Runner
    builds: Sequence[Build]
    index_url: str
    python: str
    width: int = 1
    shard: str = ""
    progress: Progress = _quiet
    # Each case's memo, which counts its probes: read by the totals below, so that a case the
    # sweep stopped in (the index did not answer) counts the runs it made before.
    _memos: list[HistoryMemo] = field(default_factory=list, init=False)
    without_gpu: list[str] = field(default_factory=list, init=False)  # CUDA cases not run
    # Why each case whose environment could not be made or could not import torch was not
    # tested: every case of a shard, and the nightly itself is what is broken.
    not_installed: list[str] = field(default_factory=list, init=False)
    out_of_time: list[str] = field(default_factory=list, init=False)  # cases the deadline cut
    unfinished: list[str] = field(default_factory=list, init=False)  # bisections it stopped
    # Why the sweep stopped before its end (the index did not answer), and the cases it did
    # not finish: none has a result of this nightly recorded, so the next sweep runs them.
    stopped: str | None = field(default=None, init=False)
    not_done: list[str] = field(default_factory=list, init=False)
    deadline: float | None = field(default=None, init=False)  # run()'s, for bisections too
    _caches: dict[tuple[str, ...], EnvironmentCache] = field(default_factory=dict, init=False)
    # (last good, first bad) of the regressions this sweep found, newest first: one change
    # often breaks many cases, and each then checks those two nightlies before searching.
    _found: list[tuple[str, str]] = field(default_factory=list, init=False)

    @property
    def nightly(self) -> Build:
        return self.builds[-1]

    @property
    def computed(self) -> int:
        """Reproducer runs this sweep really made."""
        return sum(memo.computed for memo in self._memos)

    @property
    def reused(self) -> int:
        """Results taken from the history instead."""
        return sum(memo.reused for memo in self._memos)

    @property
    def uninstalled(self) -> int:
        """Probes of a build that did not install or import: nothing ran."""
        return sum(memo.uninstalled for memo in self._memos)

    def run(self, cases: Sequence[Case], after_case: Callable[[str], None] = _done,
            deadline: float | None = None) -> tuple[str, list[Row]]:
        """Each case in turn, `after_case(sweep_id)` once the sweep starts and after each case
        (a job killed at its time limit keeps what it finished); the cases not begun by
        `deadline` (time.monotonic()) are untested, for lack of time, and a bisection going
        at the deadline stops there, unfinished: bisected again by a later sweep."""
        self.deadline = deadline
        sweep_id = self.history.start_sweep(self.nightly.version, self.shard)
        after_case(sweep_id)
        gpu = self._gpu() if any(c.meta.requires is Requires.CUDA for c in cases) else None
        rows = []
        for position, case in enumerate(cases):
            if deadline is not None and time.monotonic() >= deadline:
                self.out_of_time.append(case.case_id)
                rows.append(_untested(case, "not run: the sweep's deadline passed before "
                                            "its turn"))
                continue
            try:
                rows.append(self._case(case, sweep_id, gpu))
            except IndexOutage as outage:
                rows += self._stop(outage, cases[position:])
                break
            after_case(sweep_id)
        else:
            self.history.finish_sweep(sweep_id)
        after_case(sweep_id)
        return sweep_id, rows

    def _stop(self, outage: IndexOutage, left: Sequence[Case]) -> list[Row]:
        """The sweep stops where the index stops answering: every install after it would
        fail alike, and a failed install is a verdict on the nightly (SKIP, stored, and "the
        nightly itself is broken" when every case says it). The case going then stores no
        result of this nightly (a new run is stored once it is judged, a new failure's once
        its bisection ends), nor do those after it: the next sweep runs them again."""
        self.stopped = str(outage)
        self.not_done = [case.case_id for case in left]
        return [_untested(case, "not finished: the index did not answer while it ran"
                          if case is left[0] else
                          "not run: the sweep stopped before its turn, as the index did not "
                          "answer")
                for case in left]

    def _gpu(self) -> tuple[int, str] | None:
        """How many GPUs the nightly's torch sees here, and how it said so; None when it does
        not install or import (then each case's own probe says so, not "no GPU")."""
        try:
            with self.cache.using(self.nightly) as env:
                if env.info.get("import_error"):
                    return None
                return cuda_devices(self.runner, env)
        except ProvisionError:
            return None

    def _prober(self, case: Case, memo: HistoryMemo) -> Prober:
        """A case that imports packages runs in environments that have them (their own)."""
        installs = script_installs(case.text)
        cache = self._caches.setdefault(installs, replace(self.cache, issue_packages=installs))
        return Prober(cache, self.runner, Path(case.path), probe_options(case),
                      self.progress, memo, outage_stops=True)

    def options_hash(self, case: Case) -> str:
        """The memo key of the case's runs in this sweep: its options, and the sweep's that
        change a verdict (a run without the sandbox may pass where a confined one fails)."""
        return case.meta.options_hash(
            self.python, sandbox=self.runner.sandbox.name,
            default_packages=set(self.cache.extra_packages) == set(DEFAULT_PACKAGES),
            packages_index=self.cache.packages_index)

    def _case(self, case: Case, sweep_id: str, gpu: tuple[int, str] | None) -> Row:
        needed = gpus_needed(case.meta.nproc_per_node, case.text)
        if case.meta.requires is Requires.CUDA and gpu is not None and gpu[0] < needed:
            launched = "a torchrun process" if case.meta.nproc_per_node else "a process it starts"
            what = "CUDA" if needed == 1 else f"{needed} GPUs (one {launched})"
            note = f"needs {what}; not run on this runner ({gpu[1]})"
            if gpu[0] == 0:  # none at all (a case wanting more than there are only says so)
                self.without_gpu.append(case.case_id)
            return _untested(case, note)
        options_hash = self.options_hash(case)
        memo = HistoryMemo(self.history, case, options_hash, sweep_id)
        self._memos.append(memo)
        prober = self._prober(case, memo)
        for old in case.meta.renamed_from:  # its issues are this id's (the filing does too)
            self.history.rename_case(old, case.case_id)
        before = self.history.previous(case.script_hash, options_hash, self.nightly.version)
        changed = False
        if before is None:  # an edited case: compared with what its earlier text did
            before = self.history.previous_of_case(case.case_id, self.nightly.version,
                                                   case.meta.renamed_from)
            changed = before is not None
        # A pass is the fix of a filed regression only on a nightly after the newest one it
        # was seen failing in: a missed night swept later passes because it predates it.
        failures = self.history.open_failures(case.case_id, case.script_hash)
        filed = any(nightly_after(self.nightly.version, failed) for failed in failures)
        confirm = (case.meta.repeat == 1 and before is not None and before[1] is Verdict.GOOD)
        fixing = filed or (before[1] is Verdict.BAD if before is not None else
                           case.meta.expect is Expect.FAIL)
        self.progress("case", case=case.case_id)
        try:
            judgement, record, unstored = self._probe_nightly(case, prober, memo, options_hash,
                                                              confirm, fixing)
        except ProbeStopped:  # nothing of it is stored: the next sweep runs it again
            self.out_of_time.append(case.case_id)
            return _untested(case, "not finished: the sweep's deadline passed while it ran "
                                   "on the nightly")
        if record.stopped_at(Stage.INSTALL, Stage.IMPORT):
            self.not_installed.append(record.reason)
        change = transition(before[1] if before else None, record.verdict, case.meta.expect,
                            filed, record.reason)
        if (change is Transition.STILL_FAILING and not failures
                and self.history.bisection_stopped(case.case_id, case.script_hash,
                                                   options_hash)):
            # Its last bisection was stopped (the deadline, Ctrl-C) with nothing filed: the
            # builds it probed fail, and made this look like an old failure.
            change = Transition.NEW_FAILURE
        again = self._swept_before(case, change, failures)
        if again:  # what that sweep found is filed, or to be: not found a second time
            change = (Transition.STILL_FAILING if change is Transition.NEW_FAILURE
                      else Transition.PASSING)
        detail = self._detail(case, record, before)
        if filed and before and before[1] is not Verdict.BAD:
            detail["previous"] = None  # the history knows no nightly it failed on
        detail["signature"] = judgement.signature
        if change is Transition.FIXED and changed:
            # Its earlier text failed, this one passes: the edit, not the nightly, may be what
            # changed (a case loosened or worked around), so it is not said to be the fix.
            detail["edited"] = True
        if change is Transition.NEW_UNTESTABLE and before is not None:
            detail.update(kind=UNTESTABLE, passed_in=before[0], first_bad=self.nightly.version,
                          match=case.meta.match)
            if self._untestable_known(case.case_id, before[0]):
                change = Transition.STILL_UNTESTABLE
        if change is Transition.NEW_FAILURE:
            bisecting = replace(prober, memo=_Unstored(memo, record)) if unstored else prober
            detail.update(self._bisect(case, bisecting, options_hash, sweep_id, judgement))
        stopped = detail.get("status") == UNFINISHED
        if unstored and not stopped:  # stopped: the next sweep finds it new, and bisects
            memo.store(record)
        if stopped:
            self.unfinished.append(case.case_id)
        if change is Transition.NEW_FAILURE and not stopped:
            detail.update(self._window_facts(case, options_hash, detail))
            detail["operators"] = list(operators_in(case.text))  # clues to its commits
        if not stopped and change in (Transition.NEW_FAILURE, Transition.STILL_FAILING,
                                      Transition.FIXED, Transition.NEW_UNTESTABLE,
                                      Transition.STILL_UNTESTABLE):
            self.history.add_finding(sweep_id, case.case_id, self.nightly.version,
                                     change.value, detail)
        previous = f"{before[1].value} ({before[0]})" if before else "-"
        note = _note(change, record, detail)
        if again:
            note += _again_note(change, self.nightly.version, failures)
        if changed:
            note += " (the case was edited since that run: compared with its earlier version)"
        if change is Transition.STILL_FAILING:
            note += self._against_filed(case, options_hash, judgement.signature)
        # A stopped bisection's case is no new failure yet: tallied apart, as unfinished.
        return Row(case.case_id, record.verdict.value, previous,
                   UNFINISHED if stopped else change.value, note)

    def _probe_nightly(self, case: Case, prober: Prober, memo: HistoryMemo,
                       options_hash: str, confirm: bool,
                       fixing: bool = False) -> tuple[Judgement, ProbeRecord, bool]:
        """The case on the nightly. `confirm` (one run a build, and it passed before): a
        failure is run again before it counts, and the last good nightly with it when it is
        the one before (no search would run it again): a failure that does not reproduce, or
        that the last good nightly shows too, is flaky, not a regression (one bad run filed
        an issue, and its every recurrence another). `fixing` (a pass would be a fix): a
        pass is run again, whatever its repeat, as a failure is before it is filed: a pass
        that does not reproduce is flaky, not a fix (a flaky case's issue was said fixed at
        its first lucky run). The third value says the run is new, for the caller to store."""
        with _until(self.deadline) as cancel:
            return self._probe_nightly_until(case, prober, memo, options_hash, confirm,
                                             fixing, cancel)

    def _probe_nightly_until(self, case: Case, prober: Prober, memo: HistoryMemo,
                             options_hash: str, confirm: bool, fixing: bool,
                             cancel: threading.Event | None
                             ) -> tuple[Judgement, ProbeRecord, bool]:
        """`_probe_nightly`, each run stopped (ProbeStopped) once `cancel` is set."""
        index = len(self.builds) - 1
        held = _Held(memo)
        judgement, record = replace(prober, memo=held).probe(index, self.nightly,
                                                             cancel=cancel)
        if held.record is None:  # known from the history: judged (and confirmed) before
            return judgement, record, False
        reason, runs = None, record.runs + 1  # the run again, of one run a build
        if confirm and record.verdict is Verdict.BAD:
            fresh = replace(prober, memo=None)
            again = fresh.probe(index, self.nightly, cancel=cancel)[0]
            memo.computed += 1
            if again.verdict is not Verdict.BAD:
                reason = (f"{combine_runs([judgement, again]).reason} (its failure did not "
                          "reproduce when run again)")
            elif len(self.builds) > 1 and self.builds[-2].version == self.history.last_good(
                    case.script_hash, options_hash, self.nightly.version):
                earlier = fresh.probe(index - 1, self.builds[-2], cancel=cancel)[0]
                memo.computed += 1
                if earlier.verdict is Verdict.BAD:
                    reason = (f"{FLAKY}the last good nightly {self.builds[-2].version} fails "
                              f"too when run again ({earlier.reason[:160]}): no regression of "
                              "this nightly")
        elif fixing and record.verdict is Verdict.GOOD:
            again, probed = replace(prober, memo=None).probe(index, self.nightly,
                                                             cancel=cancel)
            memo.computed += 1
            runs = record.runs + probed.runs
            if again.verdict is not Verdict.GOOD:
                reason = (f"{combine_runs([judgement, again]).reason} (its pass did not "
                          "reproduce when run again: not a fix)")
        if reason is not None:
            judgement = Judgement(Verdict.SKIP, reason, "flaky")
            record = replace(record, verdict=Verdict.SKIP, reason=reason, signature="flaky",
                             runs=runs)
        return judgement, record, True

    def _swept_before(self, case: Case, change: Transition, failures: Sequence[str]) -> bool:
        """Whether a new failure or a fix is one an earlier sweep of this nightly found (the
        workflow run again, two runs in a day): the case's open issue was seen failing on it
        (or later), its finding is still to be filed, or its issue was seen fixed on it. The
        same results (the memo's) compare with the same previous nightly, but a second
        bisection may end elsewhere (a build that failed to install then installs now) and
        file a second issue of another window."""
        nightly = self.nightly.version
        if change is Transition.NEW_FAILURE:
            return any(not nightly_after(nightly, failed) for failed in failures) or any(
                f.case_id == case.case_id and f.transition == change.value
                and not nightly_after(nightly, f.nightly)
                for f in self.history.pending_findings())
        if change is Transition.FIXED and not failures:
            return any(not nightly_after(nightly, fixed) and not nightly_after(fixed, nightly)
                       for _, _, fixed in self.history.fixed_issues(case.case_id,
                                                                    case.script_hash))
        return False

    def _untestable_known(self, case_id: str, passed_in: str) -> bool:
        """Whether the case was found unjudgeable since it passed on `passed_in` on an earlier
        night: its issue is filed, or its finding is still to be."""
        if self.history.issue_of_key(untestable_key(case_id, passed_in)) is not None:
            return True
        kinds = (Transition.NEW_UNTESTABLE.value, Transition.STILL_UNTESTABLE.value)
        return any(f.case_id == case_id and f.transition in kinds and
                   f.detail.get("passed_in") == passed_in and f.nightly != self.nightly.version
                   for f in self.history.pending_findings())

    def _against_filed(self, case: Case, options_hash: str, signature: str | None) -> str:
        """What a still-failing case's row adds about the issues filed for it."""
        filed = self.history.open_issues(case.case_id, case.script_hash)
        if not filed and case.meta.issue is None:
            if self.history.last_good(case.script_hash, options_hash,
                                      self.nightly.version) is None:
                return " (no issue: it has not passed on a nightly the history holds)"
            # An older nightly swept late: its issue saw the case fixed in a later one.
            for number, _, fixed in self.history.fixed_issues(case.case_id, case.script_hash):
                if nightly_after(fixed, self.nightly.version):
                    return f" (issue #{number} saw it fixed in a later nightly, {fixed})"
            return (" (no open issue recorded: its filing is still pending (no --github-repo, "
                    "or GitHub refused), or the issue was closed)")
        other = [f"#{number}" for number, detail in filed if detail.get("kind") != UNTESTABLE
                 and fails_differently(detail.get("signature"), signature)]
        return f" (fails otherwise than {', '.join(other)} says)" if other else ""

    def _detail(self, case: Case, record: ProbeRecord,
                before: tuple[str, Verdict] | None) -> dict[str, Any]:
        return {"path": case.path, "issue": case.meta.issue, "index_url": self.index_url,
                "previous": before[0] if before else None, "reason": record.reason,
                "output_tail": _tail(record), "script_hash": case.script_hash,
                "flags": rerun_flags(case, self.python, not self.cache.extra_packages),
                **({"renamed_from": list(case.meta.renamed_from)}
                   if case.meta.renamed_from else {})}

    def _bisect(self, case: Case, prober: Prober, options_hash: str,
                sweep_id: str, judgement: Judgement) -> dict[str, Any]:
        """Between the last passing nightly and this one; adjacent nightlies need no search."""
        last_good = self.history.last_good(case.script_hash, options_hash, self.nightly.version)
        versions = [b.version for b in self.builds]
        start = versions.index(last_good) if last_good in versions else None
        if start is not None and start == len(versions) - 2:
            return {"status": Status.FOUND.value, "first_bad": self.nightly.version,
                    "last_good": last_good, "note": "(adjacent nightlies)", "probes": [],
                    "signature": judgement.signature}
        window = tuple(self.builds[start or 0:])
        uid = f"{sweep_id}-{case.case_id}"
        self.progress("message", text=f"{case.case_id}: bisecting {len(window)} builds "
                      f"({window[0].version} .. {window[-1].version})")
        self.progress("search", builds=len(window))

        saved: list[BisectResult] = []  # the newest state saved, as an outage stops the engine

        def checkpoint(result: BisectResult, status: str = "running") -> None:
            saved[:] = [result]
            status = result.outcome.status.value if result.outcome else status
            # Each probe's output as much as the history keeps of a run's: the whole capture
            # (up to 64 KiB each) made a verbose case's bisection 280 KB in every export.
            kept = replace(result, probes=tuple(trimmed(probe) for probe in result.probes))
            self.history.save_bisection(uid, sweep_id, case.case_id, case.script_hash,
                                        options_hash, status, kept.to_dict())

        begin = BisectResult(builds=window, bisection=Bisection(len(window), 0 if start is not
                             None else None), probes=(), script_name=case.path,
                             index_url=self.index_url, options={"case": case.case_id})
        try:
            begin = self._try_found(begin, prober, known_good=start is not None)
            result = Engine(window, prober, self.width, self.progress, checkpoint,
                            deadline=self.deadline).run(begin)
        except IndexOutage:
            # The sweep stops here (`run`): saved as a deadline's stop is, unfinished, not
            # left `running` as if a process still bisected it (kept by every prune, and
            # exported so).
            checkpoint(saved[0] if saved else begin, UNFINISHED)
            raise
        if result.outcome is None and self.deadline is not None and \
                time.monotonic() >= self.deadline:  # stopped there: no answer, nothing filed
            checkpoint(result, UNFINISHED)
            probed = len({probe.version for probe in result.probes})
            return {"status": UNFINISHED, "first_bad": None, "last_good": last_good,
                    "note": f"the sweep's deadline passed after {probed} of "
                    f"{len(window)} builds probed; a later sweep bisects it again",
                    "signature": judgement.signature}
        checkpoint(result)
        detail = _bisect_detail(result, prober.options.policy)
        if detail.get("status") == Status.FOUND.value and detail.get("last_good"):
            self._found.insert(0, (detail["last_good"], detail["first_bad"]))
        return detail

    def _try_found(self, begin: BisectResult, prober: Prober, known_good: bool) -> BisectResult:
        """`begin` with the two nightlies of a regression this sweep already found probed,
        where they are adjacent in this window: when this case passes on the one and fails
        on the other alike, that is its answer in two runs instead of a search (an audit's
        change that broke 200 cases made 200 searches of the same window). The newest build
        comes first, as it defines the failure. Its runs stop at the sweep's deadline, as
        the nightly's do (a case that hangs ran each to its timeout, past the job's limit):
        then what they found is all there is, and the Engine, out of time as well, leaves
        the bisection unfinished for the next sweep."""
        versions = [build.version for build in begin.builds]
        for good, bad in self._found:
            if good in versions and bad in versions:
                low, high = versions.index(good), versions.index(bad)
                if high != low + 1:
                    continue
                wanted = {len(versions) - 1, high} | ({low} if low or not known_good else set())
                pairs = []
                with _until(self.deadline) as cancel, contextlib.suppress(ProbeStopped):
                    for index in sorted(wanted, reverse=True):
                        pairs.append(prober.probe(index, begin.builds[index], cancel=cancel))
                return fold_round(begin, pairs)
        return begin

    def _window_facts(self, case: Case, options_hash: str,
                      detail: dict[str, Any]) -> dict[str, Any]:
        """The commits of the window's two nightlies, and the days no nightly was published."""
        good, bad = detail.get("last_good"), detail.get("first_bad")
        if not (good and bad):
            return {}
        commits = {}
        for key, version in (("last_good", good), ("first_bad", bad)):
            known = self.history.lookup(case.script_hash, version, options_hash)
            commit = known.info.get("git_version") if known is not None else None
            if commit:
                commits[key] = str(commit)
        dates = {b.version: b.date for b in self.builds}
        start, end = dates.get(good), dates.get(bad)
        published = set(dates.values())  # an untestable nightly between them was published
        gap = sum(1 for day in range(start.toordinal() + 1, end.toordinal())
                  if dt.date.fromordinal(day) not in published) if start and end else 0
        return {"commits": commits, "unpublished_days": gap}


def _untested(case: Case, note: str) -> Row:
    """The row of a case with no result of this nightly stored (the next sweep runs it).
    One wording whatever stopped the sweep, the deadline or the index: "not run: ... before
    its turn" for a case it never began, "not finished: ... while it ran" for the one it
    stopped in (a release owner reads both as "no answer yet", not as a failure)."""
    return Row(case.case_id, "skip", "-", Transition.UNTESTED.value, note)


# A second deadline mechanism beside the Engine's, and needed: the Engine has a loop of its
# own that wakes every 0.5 s, compares the clock (`deadline`) and sets the cancel event of
# each probe it started. The nightly's runs, and those `_try_found` makes before the Engine
# starts, have no such loop: they call `Prober.probe` on the sweep's own thread, which
# blocks in the runner until the run ends, so nothing there can look at the clock; only an
# event set from another thread (this Timer) stops a run in progress at the deadline
# (ProbeStopped: the nightly's row "not finished", the bisection unfinished).
# Folding the other way, one event that the Engine waits on, would not spare its loop
# either: each probe has its own event, set also when the probe becomes moot, and only
# the loop can pass the deadline on to those.
@contextlib.contextmanager
def _until(deadline: float | None) -> Iterator[threading.Event | None]:
    """An event set at `deadline` (time.monotonic()), for the runs of a case on the nightly:
    bounded only by each run's timeout, with their reruns a hanging case went on far past
    the sweep's deadline, into the job's own limit (a job killed there uploads nothing)."""
    if deadline is None:
        yield None
        return
    cancel = threading.Event()
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cancel.set)
    timer.daemon = True
    timer.start()
    try:
        yield cancel
    finally:
        timer.cancel()


def _bisect_detail(result: BisectResult, policy: Policy) -> dict[str, Any]:
    summary = result.summary()
    first_bad = summary["first_bad"]  # set only where the boundary was located
    bad_probe = next((p for p in result.probes if p.version == first_bad), None)
    detail = {key: summary[key] for key in ("status", "last_good", "candidates", "note",
                                            "signature", "probes")}
    detail["first_bad"] = first_bad
    if bad_probe is not None:
        detail["output_tail"] = _tail(bad_probe)
        if bad_probe.result is not None:  # the failure as the first bad build words it
            detail["signature"] = bad_probe.signature or judge(
                bad_probe.result, policy).signature or detail["signature"]
    return detail


def _again_note(change: Transition, nightly: str, failures: Sequence[str]) -> str:
    """Why a new failure or a fix is not one: an older nightly swept late fails where its
    issue already saw a later one fail (no sweep of this nightly found it)."""
    if change is not Transition.STILL_FAILING:
        return " (seen fixed by an earlier sweep of this nightly: said once)"
    later = [failed for failed in failures if nightly_after(failed, nightly)]
    if later and not any(not nightly_after(failed, nightly) for failed in failures):
        newest = max(later, key=version_key)
        return f" (its issue saw it failing on a later nightly, {newest}: filed once)"
    return " (found failing by an earlier sweep of this nightly: filed once)"


def _tail(record: ProbeRecord, keep: int = 3000) -> str:
    return record.result.output[-keep:] if record.result else ""


def _note(change: Transition, record: ProbeRecord, detail: dict[str, Any]) -> str:
    if change is Transition.NEW_FAILURE:
        if detail.get("status") == UNFINISHED:
            return f"bisection unfinished: {detail.get('note')}; nothing filed yet"
        if detail.get("first_bad") and detail.get("status") == Status.AMBIGUOUS.value:
            candidates = len(detail.get("candidates") or ())
            return (f"bisection ambiguous: the first bad nightly is one of {candidates} "
                    f"candidates, {detail['first_bad']} at the latest (builds before it could "
                    f"not be tested; last good {detail['last_good']})")
        if detail.get("first_bad"):
            return f"first bad nightly {detail['first_bad']} (last good {detail['last_good']})"
        return f"bisection: {detail.get('status')} {detail.get('note', '')}".strip()
    if change is Transition.NEW_UNTESTABLE:
        return (f"passed on {detail.get('passed_in')}; now {record.reason}: no verdict, "
                "filed for a person to look")
    if change is Transition.STILL_UNTESTABLE:
        return f"{record.reason} (no verdict since it passed on {detail.get('passed_in')})"
    if change is Transition.FIXED and detail.get("edited"):
        return (f"passes with its edited text; its earlier text failed on "
                f"{detail.get('previous')}: not counted as this nightly's fix")
    if change is Transition.UNEXPECTED:
        return (f"fails on its first recorded nightly, so nothing is filed (no passing nightly "
                f"to bisect from): {record.reason}")
    return record.reason
