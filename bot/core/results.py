"""The records a bisection leaves: one per probe, and the whole result (the jobs' JSON contract)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bot.core.bisection import GOOD_END_FAILS, Bisection, Outcome, Status
from bot.core.builds import Build
from bot.core.errors import parse_or_malformed
from bot.core.verdicts import RunResult, Stage, Verdict


@dataclass(frozen=True)
class ProbeRecord:
    """One build tested: its verdict, why, how long it took and what the build said of itself."""

    index: int
    version: str
    verdict: Verdict
    reason: str
    seconds: float
    install_seconds: float = 0.0
    result: RunResult | None = None
    info: dict[str, Any] = field(default_factory=dict, compare=False)
    metric: float | None = None
    runs: int = 1
    variant_env: dict[str, str] = field(default_factory=dict)  # triage runs set variables
    # The failure signature its runs were judged to, before the search compared it with the
    # bad end's. The history keeps it with the record (`History.store`): judged again from
    # the output's stored tail, a long message had pushed the traceback out and a remembered
    # BAD came back as another failure. Not part of the reports.
    signature: str | None = field(default=None, compare=False)

    def stopped_at(self, *stages: Stage) -> bool:
        """Whether its last run stopped at one of `stages` (`Stage.INSTALL`: no environment
        was made, which says nothing of the build; `Stage.IMPORT`: torch did not import)."""
        return self.result is not None and self.result.stage in stages

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "version": self.version,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "install_seconds": round(self.install_seconds, 3),
            "result": self.result.to_dict() if self.result else None,
            "info": self.info,
            "metric": self.metric,
            "runs": self.runs,
            "variant_env": self.variant_env,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeRecord:
        result = data.get("result")
        return cls(
            index=int(data["index"]),
            version=str(data["version"]),
            verdict=Verdict(data["verdict"]),
            reason=str(data.get("reason", "")),
            seconds=float(data.get("seconds", 0.0)),
            install_seconds=float(data.get("install_seconds", 0.0)),
            result=RunResult.from_dict(result) if isinstance(result, dict) else None,
            info=dict(data.get("info") or {}),
            metric=data.get("metric"),
            runs=int(data.get("runs", 1)),
            variant_env=dict(data.get("variant_env") or {}),
        )


# `bisect-bot bisect`'s exit status for each answer, so a script can tell them apart (`git
# bisect run` likewise ends non-zero when only skipped commits are left). 1 stays Python's
# own for a crash, 2 is a usage error and 130 an interruption.
EXIT_STATUS = {
    "found": 0,
    "ambiguous": 3,
    "not-reproduced": 4,
    "not-a-regression": 5,
    "cannot-test": 6,
    "unfinished": 7,
}
EXIT_STATUS_HELP = ("exit status: 0 found: the first bad build (with --fix, the first good "
                    "one); 3 ambiguous: it lies among builds that could not be tested; 4 not "
                    "reproduced: the newest build passes (with --fix: still fails); 5 not a "
                    "regression: it fails back to the oldest build, or the good end given "
                    "fails too; 6 cannot test; 7 unfinished (kept resumable: also a resumed "
                    "bisection this machine cannot go on with, as one without the GPU it "
                    "needs, or one whose index stopped answering); 2 bad usage; 130 "
                    "interrupted; 1 a crash (a bug of the bot)")


@dataclass(frozen=True)
class BisectResult:
    """Everything a report needs: the builds, the search state, every probe, the outcome."""

    builds: tuple[Build, ...]
    bisection: Bisection
    probes: tuple[ProbeRecord, ...]
    signature: str | None = None
    script_name: str = "repro.py"
    index_url: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    cannot_test: str | None = None  # a preflight found the runner unable to test at all

    @property
    def outcome(self) -> Outcome | None:
        if self.cannot_test is not None:
            return Outcome(Status.CANNOT_TEST, note=self.cannot_test)
        return self.bisection.outcome

    @property
    def failed_back_to_the_oldest(self) -> bool:
        """A search of nightlies without a good end that found the new behaviour in every
        build back to the oldest one it had: one older may still have the old one."""
        outcome = self.outcome
        return (outcome is not None and outcome.status is Status.NOT_A_REGRESSION
                and bool(self.index_url) and not self.bisection.find_fix
                and self.bisection.good_index is None and self.builds[0].date is not None)

    @property
    def given_end_wrong(self) -> bool:
        """Whether the answer is only that an end given is not what it was said to be: the
        good end fails as the newer builds do, or a bad end given passes, the nightlies after
        it untested. A mistake in the request, not an answer about the issue."""
        outcome = self.outcome
        if outcome is None:
            return False
        if outcome.note == GOOD_END_FAILS:
            return True
        return (outcome.status is Status.NOT_REPRODUCED and not self.bisection.find_fix
                and bool(self.options.get("bad_given"))
                and int(self.options.get("newer_builds") or 0) > 0)

    def with_older(self, older: Sequence[Build]) -> BisectResult:
        """This search over `older` builds put before its own, every verdict kept: each index
        moves up by len(older). Only a search without a good end may grow older builds."""
        if self.bisection.good_index is not None:
            raise ValueError("a search from a good end has no older builds to take")
        shift = len(older)
        bisection = Bisection(self.bisection.size + shift, None, self.bisection.find_fix,
                              tuple((i + shift, v) for i, v in self.bisection.results))
        return replace(self, builds=(*older, *self.builds), bisection=bisection,
                       probes=tuple(replace(p, index=p.index + shift) for p in self.probes))

    @property
    def exit_status(self) -> int:
        """The answer as `bisect-bot bisect`'s exit status (EXIT_STATUS)."""
        outcome = self.outcome
        return EXIT_STATUS[outcome.status.value if outcome else "unfinished"]

    def probe_for(self, index: int | None) -> ProbeRecord | None:
        matches = [p for p in self.probes if p.index == index and not p.variant_env]
        return matches[-1] if matches else None

    def version_at(self, index: int | None) -> str | None:
        return self.builds[index].version if index is not None else None

    def summary(self) -> dict[str, Any]:
        """The stable, documented keys of the JSON report."""
        outcome = self.outcome
        status = outcome.status.value if outcome else "unfinished"
        before = self.version_at(outcome.before) if outcome else None
        # The first build with the new behaviour only where one was found (or narrowed to the
        # candidates): "fails back to the oldest build" gave that oldest one as first_bad.
        after = self.version_at(outcome.after) if outcome and outcome.located else None
        fix = self.bisection.find_fix
        return {
            "status": status,
            "mode": "find-fix" if fix else "regression",
            "last_good": None if fix else before,  # a fix has a last bad and a first good
            "first_bad": None if fix else after,
            "last_bad": before if fix else None,
            "first_good": after if fix else None,
            "candidates": [self.builds[i].version for i in outcome.candidates] if outcome else [],
            "note": outcome.note if outcome else "",
            "signature": self.signature,
            "probes": [
                {"version": p.version, "verdict": p.verdict.value, "reason": p.reason,
                 "seconds": round(p.seconds, 3), "metric": p.metric}
                for p in self.probes if not p.variant_env
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "builds": [b.to_dict() for b in self.builds],
            "bisection": self.bisection.to_json(),
            "probe_records": [p.to_dict() for p in self.probes],
            "script_name": self.script_name,
            "index_url": self.index_url,
            "options": self.options,
            "cannot_test": self.cannot_test,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BisectResult:
        """The inverse of to_dict; a damaged result raises MalformedError (a UserError)."""
        what = "the bisection result (outcome.json or checkpoint)"
        return parse_or_malformed(what, cls._from_dict, data)

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> BisectResult:
        return cls(
            builds=tuple(Build.from_dict(b) for b in data["builds"]),
            bisection=Bisection.from_json(data["bisection"]),
            probes=tuple(ProbeRecord.from_dict(p) for p in data.get("probe_records", [])),
            signature=data.get("signature"),
            script_name=str(data.get("script_name", "repro.py")),
            index_url=str(data.get("index_url", "")),
            options=dict(data.get("options") or {}),
            cannot_test=data.get("cannot_test"),
        )

