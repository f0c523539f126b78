"""The commit tier: from the first bad nightly to the culprit commit, by overlay of Python files."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bot.adapters.environments import ProvisionError
from bot.adapters.overlay_env import OverlayProvisioner, overlay_scratch
from bot.adapters.runner import Runner
from bot.adapters.sources import UPSTREAM, GitSources, SourceError
from bot.core.bisection import Bisection, Status
from bot.core.builds import Build, main_sha_of_nightly
from bot.core.commit_report import CommitTier, headline
from bot.core.overlay import (
    Candidate,
    CommitChanges,
    candidate_version,
    plan_candidates,
)
from bot.core.results import BisectResult, ProbeRecord
from bot.core.safe_markdown import visible
from bot.core.suspects import REPO_URL, github_repo
from bot.core.verdicts import Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober, Progress, Provisioner
from bot.jobs.progress import TerminalProgress


def _silent(event: str, **details: object) -> None:
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-commit-tier", action="store_true",
                        help="stop at the first bad nightly; do not bisect the commits between "
                        "the last good and first bad nightlies by overlay of their Python files")
    parser.add_argument("--upstream", default=UPSTREAM, metavar="URL",
                        help=f"the PyTorch repository for the commit tier (default {UPSTREAM})")


@dataclass
class CommitTierJob:
    """Runs the commit tier after a nightly bisection that found its first bad nightly."""

    sources: GitSources
    nightlies: Provisioner  # the nightly tier's environments; the last good one is the base
    runner: Runner
    script: Path
    root: Path
    options: ProbeOptions = ProbeOptions()
    workers: int = 1
    progress: Progress = _silent
    slots: Sequence[Mapping[str, str]] = ()  # `--gpus`: one a worker, as in the nightly tier

    def run(self, nightly: BisectResult) -> CommitTier:
        # Links follow an upstream on github.com (a fork); any other (a local checkout, a
        # mirror) links pytorch/pytorch, which has every main commit a nightly is cut from.
        return replace(self._run(nightly), repo=github_repo(self.sources.url) or REPO_URL)

    def _run(self, nightly: BisectResult) -> CommitTier:
        ends = _nightly_ends(nightly)
        if isinstance(ends, str):
            return CommitTier(skipped=ends)
        try:
            good_main, bad_main, history = self._history(ends[2], ends[3])
        except NotANightly as exc:
            return CommitTier(skipped=str(exc))
        except SourceError as exc:
            return CommitTier(skipped=f"the upstream repository could not be read: {exc}")
        if not history:
            return CommitTier(good_main, bad_main, skipped=_no_commits(good_main, bad_main))
        candidates = plan_candidates(history)
        try:
            result = self._bisect(nightly, ends[0], good_main, candidates)
        except ProvisionError as exc:
            reason = f"the last good nightly's environment is not available: {exc}"
            return CommitTier(good_main, bad_main, candidates, skipped=reason)
        return CommitTier(good_main, bad_main, candidates, result)

    def _history(self, good_git: str, bad_git: str) -> tuple[str, str, list[CommitChanges]]:
        if self.sources.cloned:
            self.progress("message", text=f"commit tier: updating {self.sources.url}")
        else:  # minutes of silence otherwise, the first time
            self.progress("message", text=f"commit tier: cloning {self.sources.url} into "
                          f"{self.sources.path}, once: commits and trees only, minutes for "
                          "pytorch/pytorch; later bisections only fetch")
        self.sources.update()
        good_main, bad_main = (self._main_of(good_git), self._main_of(bad_git))
        shas = self.sources.commits_between(good_main, bad_main)
        history = [CommitChanges(self.sources.commit(sha), self.sources.own_changes(sha),
                                 self.sources.changes(good_main, sha)) for sha in shas]
        return good_main, bad_main, history

    def _main_of(self, nightly_sha: str) -> str:
        subject = self.sources.subject(nightly_sha)
        main = main_sha_of_nightly(subject)
        if main is None:
            raise NotANightly(f"the build's commit {nightly_sha[:12]} is not on the nightly "
                              f"branch ({subject!r}): the commit tier maps nightly builds to "
                              "main commits")
        return self.sources.commit(main).sha

    def _bisect(self, nightly: BisectResult, last_good: int, good_main: str,
                candidates: tuple[Candidate, ...]) -> BisectResult:
        base_build = nightly.builds[last_good]
        builds = (base_build, *(replace(base_build, version=candidate_version(
            base_build.version, c.commit.sha)) for c in candidates))
        start = _seeded(nightly, builds, candidates)
        if start.outcome is not None:
            return start
        # The overlays are made from the base's files: it is kept from eviction meanwhile,
        # and they go when the tier ends.
        with self.nightlies.using(base_build) as base_env, overlay_scratch(self.root) as scratch:
            provisioner = OverlayProvisioner(
                base_env, base_build.version, good_main, self.sources, self.root,
                {b.version: c for b, c in zip(builds[1:], candidates, strict=True)},
                scratch=scratch)
            unusable = provisioner.unusable()
            if unusable:
                raise ProvisionError(unusable)
            prober = Prober(provisioner, self.runner, self.script, self.options, self.progress)
            self.progress("message", text=f"commit tier: {len(candidates)} commits, "
                          f"{sum(c.testable for c in candidates)} testable by overlay")
            return Engine(builds, prober, self.workers, self.progress,
                          slots=self.slots).run(start)


def _no_commits(good_main: str, bad_main: str) -> str:
    if good_main == bad_main:
        # The nightly cut takes viable/strict's head, which can stay put for a day or more.
        return (f"both nightlies were built from the same main commit {good_main[:12]}, so the "
                "change is not in pytorch/pytorch's sources: look at what the wheels depend on "
                "(triton, the nvidia-* libraries) or at how they were built")
    return (f"no main commits from {good_main[:12]} to {bad_main[:12]} along main's first "
            "parents: the first bad nightly's commit is not newer than the last good one's")


class NotANightly(SourceError):
    """A build the commit tier cannot map to main commits (a release, a local build)."""


_GIT_SHA = re.compile(r"[0-9a-f]{40}")


def _nightly_ends(nightly: BisectResult) -> tuple[int, int, str, str] | str:
    """Last good and first bad indices and their git versions, or why there are none; checked
    before anything is cloned (a clone of pytorch/pytorch is minutes of a runner's time)."""
    outcome = nightly.outcome
    if nightly.bisection.find_fix or outcome is None or outcome.status is not Status.FOUND:
        return "the nightly tier did not find a first bad nightly"
    assert outcome.before is not None and outcome.after is not None
    ends = [nightly.builds[i] for i in (outcome.before, outcome.after)]
    if any(build.python for build in ends):
        return ("the builds are existing interpreters (--builds-from-python), not nightlies: "
                "the commit tier maps nightly builds to main commits")
    if not all(build.date for build in ends):
        names = ", ".join(build.version for build in ends if not build.date)
        return f"{names} is not a nightly build: the commit tier maps nightlies to main commits"
    shas = [nightly.probe_for(i) for i in (outcome.before, outcome.after)]
    versions = [str(p.info.get("git_version") or "") if p else "" for p in shas]
    if not all(versions):
        return "the nightlies did not report torch.version.git_version"
    odd = [v for v in versions if not _GIT_SHA.fullmatch(v)]
    if odd:
        return (f"the nightlies reported torch.version.git_version {odd[0]!r}, not a commit id: "
                "the commit tier cannot find their commits")
    return outcome.before, outcome.after, versions[0], versions[1]


def _seeded(nightly: BisectResult, builds: tuple[Build, ...],
            candidates: tuple[Candidate, ...]) -> BisectResult:
    """Verdicts known before any probe: the good base, untestable commits, a known bad end."""
    outcome = nightly.outcome
    assert outcome is not None and outcome.after is not None
    bad_probe = nightly.probe_for(outcome.after)
    state = Bisection(len(builds), good_index=0).record(0, Verdict.GOOD)
    probes = [ProbeRecord(0, builds[0].version, Verdict.GOOD, "the last good nightly", 0.0)]
    for index, candidate in enumerate(candidates, start=1):
        if candidate.testable:
            continue
        if index == len(candidates) and bad_probe is not None:
            # The newest commit is the first bad nightly itself: its verdict is already known.
            state = state.record(index, Verdict.BAD)
            probes.append(replace(bad_probe, index=index, version=builds[index].version,
                                  reason=f"the first bad nightly {bad_probe.version}"))
        else:
            state = state.record(index, Verdict.SKIP)
            probes.append(ProbeRecord(index, builds[index].version, Verdict.SKIP,
                                      f"not testable by overlay: {candidate.reason}", 0.0))
    return BisectResult(builds, state, tuple(probes), nightly.signature, nightly.script_name,
                        nightly.index_url, {**nightly.options, "tier": "commit"})


def after_nightlies(args: argparse.Namespace, nightly: BisectResult, nightlies: Provisioner,
                    options: ProbeOptions, root: Path, script: Path,
                    runner: Runner | None = None,
                    slots: Sequence[Mapping[str, str]] = ()) -> CommitTier | None:
    """The CLI's entry: run the tier unless `--no-commit-tier`, print its headline."""
    if args.no_commit_tier or nightly.bisection.find_fix:
        return None
    outcome = nightly.outcome
    if outcome is None or outcome.status is not Status.FOUND:
        return None
    workers = len(slots) or args.workers
    progress = TerminalProgress(8, workers)
    job = CommitTierJob(GitSources(root, args.upstream), nightlies, runner or Runner(), script,
                        root, options, workers, progress, slots)
    tier = job.run(nightly)
    print("\n" + visible(headline(tier, markdown=False)))
    return tier
