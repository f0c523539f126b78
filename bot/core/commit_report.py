"""The commit tier's result as Markdown and JSON: the culprit commit or the narrowest range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.core.bisection import Status
from bot.core.overlay import Candidate, Commit
from bot.core.results import BisectResult
from bot.core.safe_markdown import neutralise, plain
from bot.core.suspects import REPO_URL, commit_url, compare_url
from bot.core.verdicts import Verdict


@dataclass(frozen=True)
class CommitTier:
    """The commit tier: in `result`, index 0 is the good nightly's commit, i is candidate i-1."""

    good_main: str = ""
    bad_main: str = ""
    candidates: tuple[Candidate, ...] = ()
    result: BisectResult | None = None
    skipped: str = ""  # why the tier did not run, when it did not
    # Where commits are linked: the upstream on github.com (a fork), else pytorch/pytorch.
    repo: str = REPO_URL

    def candidate_at(self, index: int | None) -> Candidate | None:
        return self.candidates[index - 1] if index is not None and index >= 1 else None

    def untested_newest(self) -> tuple[Candidate, ...]:
        """When overlays did not reproduce the failure: the newest commits that could not be
        tested (their verdicts are SKIP), after the newest one that passed."""
        outcome = self.result.outcome if self.result else None
        if outcome is None or outcome.status is not Status.NOT_REPRODUCED:
            return ()
        return self.candidates[(outcome.before or 0):]

    def range_of(self) -> tuple[Candidate, ...]:
        """The commits that may be the culprit: one when found, several when narrowed."""
        outcome = self.result.outcome if self.result else None
        if outcome is None or outcome.status not in (Status.FOUND, Status.AMBIGUOUS):
            return ()
        if outcome.status is Status.FOUND:
            found = self.candidate_at(outcome.after)
            return (found,) if found else ()
        assert outcome.before is not None and outcome.after is not None
        return self.candidates[outcome.before : outcome.after]


def _pr_url(commit: Commit, repo: str) -> str | None:
    """The `(#12345)` that ends a subject numbers a pull request of the repository whose merge
    wrote it: pytorch/pytorch's on its main. In a fork or mirror it may be the fork's own or
    pytorch's (a commit taken from upstream), so there the number is shown without a link."""
    return commit.pr_url if repo.lower() == REPO_URL else None


def _commit_line(commit: Commit, repo: str, markdown: bool = True) -> str:
    """The sha, title, PR and author of a commit, linked into `repo`; `markdown` False: plain
    text for a terminal, where `[sha](url)` would show as written."""
    number = commit.pr_number
    if not markdown:
        link = f" ({commit_url(commit.sha, repo)})"
        pr = f" (#{number})" if number is not None else ""
        author = f" by {commit.author}" if commit.author else ""
        return f"{commit.sha[:12]}{link} {commit.title}{pr}{author}"
    title = neutralise(commit.title).replace("|", "\\|")
    pr_url = _pr_url(commit, repo)
    pr = (f" ([#{number}]({pr_url}))" if pr_url else
          f" ({plain(f'#{number}')})" if number is not None else "")  # unlinked: no autolink
    author = f" by {neutralise(commit.author)}" if commit.author else ""
    return f"[`{commit.sha[:12]}`]({commit_url(commit.sha, repo)}) {title}{pr}{author}"


def headline(tier: CommitTier, markdown: bool = True) -> str:
    """The tier's answer in one line; `markdown` False: plain text, for the terminal."""
    if tier.skipped:
        return f"Commit tier not run: {tier.skipped}"
    outcome = tier.result.outcome if tier.result else None
    suspects = tier.range_of()
    if outcome is None:
        return "Commit tier unfinished"
    if outcome.status is Status.FOUND and suspects and not suspects[0].testable:
        # Never run: it is the first bad nightly's newest commit, bad by the nightly's verdict.
        return (f"Culprit by elimination (not run by overlay: {neutralise(suspects[0].reason)}): "
                f"{_commit_line(suspects[0].commit, tier.repo, markdown)}. Every commit before "
                "it passes, so the cause is this commit, or something outside the Python files "
                "(build settings, pinned dependencies)")
    if outcome.status is Status.FOUND and suspects:
        return f"Culprit commit: {_commit_line(suspects[0].commit, tier.repo, markdown)}"
    if outcome.status is Status.AMBIGUOUS and len(suspects) == len(tier.candidates):
        return (f"Not narrowed: none of the {len(suspects)} commits could be told apart by "
                "overlay (see why below)")
    if outcome.status is Status.AMBIGUOUS:
        return (f"Narrowed to {len(suspects)} commits; commits without a verdict hide the "
                "exact one (see why below)")
    untested = tier.untested_newest()
    if outcome.status is Status.NOT_REPRODUCED and untested:
        # The newest commits could not be run (a different failure, a timeout, an overlay that
        # could not be made): the one before them passing says nothing about them.
        return (f"Not narrowed: the newest {len(untested)} commit(s) could not be tested by "
                "overlay and the one before them passes, so the cause is among them or outside "
                "the Python files (see why below)")
    if outcome.status is Status.NOT_REPRODUCED:
        return ("Not reproduced by overlay: the first bad nightly's Python on the last good "
                "nightly passes, so the cause is outside the Python files (compiled code, "
                "build settings or pinned dependencies)")
    return f"Commit tier could not decide ({outcome.status.value}): {outcome.note}"


def _why_untested(tier: CommitTier) -> list[str]:
    # Testable commits whose run was SKIP (an overlay that does not import, a flaky or a
    # different failure) hide the culprit as much as the untestable ones.
    untested = [c for c in tier.range_of() if not c.testable or _skipped_run(tier, c)]
    causes = {c.cause for c in untested if c.cause}
    lines = [f"- `{c.commit.sha[:12]}`: {neutralise(_why(tier, c))}" for c in untested[:10]]
    if len(untested) > 10:
        lines.append(f"- ... and {len(untested) - 10} more")
    for cause in sorted(causes):
        commit = next((c.commit for c in tier.candidates if c.commit.sha == cause), None)
        if commit:
            lines.append("- the change that ends the testable stretch: "
                         f"{_commit_line(commit, tier.repo)}")
    return lines


def _reason_of(tier: CommitTier, candidate: Candidate) -> str:
    probe = tier.result.probe_for(tier.candidates.index(candidate) + 1) if tier.result else None
    return probe.reason if probe else candidate.reason


def _skipped_run(tier: CommitTier, candidate: Candidate) -> str:
    """Why a testable commit's overlay run came out SKIP; empty when it did not."""
    probe = tier.result.probe_for(tier.candidates.index(candidate) + 1) if tier.result else None
    skipped = candidate.testable and probe is not None and probe.verdict is Verdict.SKIP
    return probe.reason if skipped and probe else ""


def _why(tier: CommitTier, candidate: Candidate) -> str:
    """Why a commit could not be told apart: not testable by overlay, or its run was SKIP."""
    skipped = _skipped_run(tier, candidate)
    return f"{candidate.reason}, but {skipped}" if skipped else candidate.reason


def _verdict_of(tier: CommitTier, index: int) -> str:
    probe = tier.result.probe_for(index) if tier.result else None
    return probe.verdict.value if probe else ""


def commit_table(tier: CommitTier) -> str:
    rows = ["| # | commit | title | testable | verdict | why |", "|---|---|---|---|---|---|"]
    for number, candidate in enumerate(tier.candidates, start=1):
        title = neutralise(candidate.commit.subject).replace("|", "\\|")[:70]
        rows.append(
            f"| {number} | `{candidate.commit.sha[:12]}` | {title} "
            f"| {'yes' if candidate.testable else 'no'} | {_verdict_of(tier, number)} "
            f"| {neutralise(_why(tier, candidate)).replace('|', '/')[:160]} |"
        )
    return "\n".join(rows)


def render_commit_section(tier: CommitTier) -> str:
    """The section placed above the nightly tier's table in the report."""
    parts = [f"### {headline(tier)}"]
    if tier.good_main and tier.bad_main and tier.good_main != tier.bad_main:
        span = f"{tier.good_main[:12]}...{tier.bad_main[:12]}"
        link = compare_url(tier.good_main, tier.bad_main, tier.repo)
        parts.append(f"Between the nightlies' commits: [{span}]({link}), "
                     f"{len(tier.candidates)} commits on main.")
    suspects = tier.range_of()
    if len(suspects) > 1:
        parts.append("Candidates, oldest first:\n\n" + "\n".join(
            f"- {_commit_line(c.commit, tier.repo)}" for c in suspects))
        why = _why_untested(tier)
        if why:
            parts.append("Why they could not be told apart:\n\n" + "\n".join(why))
    untested = tier.untested_newest()
    if untested:
        parts.append("Not tested, newest last:\n\n" + "\n".join(
            f"- {_commit_line(c.commit, tier.repo)}: {neutralise(_reason_of(tier, c))}"
            for c in untested))
    if tier.candidates:
        parts.append("<details><summary>Commits in range (overlay of Python files on the last "
                      "good nightly)</summary>\n\n" + commit_table(tier) + "\n\n</details>")
    return "\n\n".join(parts)


def commit_summary(tier: CommitTier) -> dict[str, Any]:
    """The commit tier's stable JSON keys."""
    outcome = tier.result.outcome if tier.result else None
    suspects = tier.range_of()
    return {
        "status": "skipped" if tier.skipped else outcome.status.value if outcome else "unfinished",
        "skipped": tier.skipped,
        "good_commit": tier.good_main,
        "bad_commit": tier.bad_main,
        "culprit": _commit_dict(suspects[0].commit, tier.repo) if len(suspects) == 1 else None,
        # False: the culprit was never run (found by elimination, see the headline).
        "culprit_tested": suspects[0].testable if len(suspects) == 1 else None,
        "range": [_commit_dict(c.commit, tier.repo) for c in suspects],
        "untested_newest": [_commit_dict(c.commit, tier.repo) for c in tier.untested_newest()],
        # `skip_reason`: why a testable commit's run was SKIP (empty when it was not).
        "commits": [{"sha": c.commit.sha, "testable": c.testable, "reason": c.reason,
                     "verdict": _verdict_of(tier, number), "skip_reason": _skipped_run(tier, c)}
                    for number, c in enumerate(tier.candidates, start=1)],
    }


def _commit_dict(commit: Commit, repo: str) -> dict[str, Any]:
    return {"sha": commit.sha, "title": commit.subject, "author": commit.author,
            "pr": commit.pr_number, "url": _pr_url(commit, repo)}
