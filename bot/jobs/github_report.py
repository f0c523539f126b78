"""The report job: outcome.json into the sticky comment, the state label and the job summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from bot.adapters.actions import append_summary
from bot.adapters.github import GitHubClient
from bot.core.bisection import Status
from bot.core.config import Config
from bot.core.errors import MalformedError
from bot.core.job_plan import JobPlan
from bot.core.labels import State, state_for
from bot.core.report import continue_command, owner_run, render_markdown
from bot.core.results import BisectResult
from bot.core.safe_markdown import fenced, plain
from bot.core.sticky import about_the_ends, logs_line, render_cannot_start, render_failed
from bot.core.suspects import clues_from, operators_in, render_range_markdown
from bot.core.triage import Triage, render_triage_markdown
from bot.jobs.github_common import log, owned_sticky, set_state
from bot.jobs.triage_commits import GITHUB_REPO, CommitSource, PytorchCommits, commit_range

_UNFINISHED = ("_The bisection stopped before its answer (the run crashed, timed out or was "
               "cancelled, or the rounds of runners ran out); these are the builds it had "
               "tested._")


@dataclass(frozen=True)
class Rendered:
    """The comment body and the state label it goes with."""

    body: str
    state: State | None  # None: no state label


def render_outcome(plan: JobPlan, outcome: Mapping[str, Any] | None, config: Config,
                   commits: CommitSource | None = None) -> Rendered:
    """outcome.json (None when the run job left none) -> what the issue should show; with
    `commits`, a regression found names the commits between its two nightlies, the likeliest
    first (the run job has no token to look them up)."""
    if outcome is None:
        return Rendered(render_failed(plan.run_id, "The run job ended without an outcome; "
                                      "see the workflow run's log.", run_url=plan.run_url),
                        State.FAILED)
    if "error" in outcome:
        error = str(outcome["error"] or "the run job gave no reason; see its log")
        if outcome.get("state") == State.CANNOT_TEST.value:
            hint = f"Comment `@{config.handle} help` for the options."
            return Rendered(render_cannot_start(plan.run_id, error, hint,
                                                config.labels.trigger,
                                                config.labels.cannot_test,
                                                by_command=plan.command_comment != 0),
                            State.CANNOT_TEST)
        return Rendered(render_failed(plan.run_id, error, run_url=plan.run_url), State.FAILED)
    try:
        result = BisectResult.from_dict(dict(outcome))
    except MalformedError as damaged:  # the issue must not stay queued
        return Rendered(render_failed(plan.run_id, str(damaged), run_url=plan.run_url),
                        State.FAILED)
    extra = "\n\n".join(part for part in (
        about_the_ends(plan.notes) if plan.notes else "", _triage_section(outcome)) if part)
    ranked = commits is not None and result.outcome is not None and (
        result.outcome.status is Status.FOUND)
    if ranked:
        assert commits is not None
        extra = "\n\n".join(part for part in (extra, _commit_section(plan, result, outcome,
                                                                       commits)) if part)
    if result.outcome is None:
        command = continue_command(result)
        again = (" with the reproducer under it in a ```python block, as before"
                 if result.options.get("comment") else "")
        stopped = outcome.get("stopped")
        why = (f"_The bisection stopped before its answer: {plain(str(stopped)[:500])}. These "
               "are the builds it had tested._" if stopped else _UNFINISHED)
        extra = why + (f" To go on from where it stopped, comment{again}\n\n"
                       f"{fenced(command)}" if command else "")
    extra = "\n\n".join(part for part in (extra, logs_line(plan.run_url)) if part)
    body = render_markdown(result, extra=extra, run_id=plan.run_id, compare_line=not ranked,
                           stopped=True)  # the run job ended: no more probes come
    return Rendered(body, state_for(result.outcome.status if result.outcome else None,
                                    result.bisection.find_fix, result.given_end_wrong))


def _triage_section(outcome: Mapping[str, Any]) -> str:
    """The triage, rendered here from its data: outcome.json comes from the job where the
    reproducer ran, so no Markdown of its own goes into the comment."""
    triage = _triage(outcome)
    if isinstance(triage, ValueError):
        return f"_The triage could not be read ({plain(str(triage)[:200])})._"
    return render_triage_markdown(triage) if triage else ""


def _triage(outcome: Mapping[str, Any]) -> Triage | ValueError | None:
    """The run job's triage of the first bad build; None when it ran none."""
    data = outcome.get("triage")
    if not data:
        return None
    try:
        return Triage.from_dict(data.get("triage") if isinstance(data, dict) else None)
    except ValueError as damaged:
        return damaged


def _commit_section(plan: JobPlan, result: BisectResult, outcome: Mapping[str, Any],
                    source: CommitSource) -> str:
    assert result.outcome is not None
    triage = _triage(outcome)
    clues = clues_from(operators_in(plan.reproducer.script),
                       triage.subsystem if isinstance(triage, Triage) else None,
                       triage.precision if isinstance(triage, Triage) else None,
                       triage.bisector.subsystem if isinstance(triage, Triage)
                       and triage.bisector else None)
    good, bad = (result.probe_for(index) for index in (result.outcome.before,
                                                         result.outcome.after))
    return render_range_markdown(replace(commit_range(
        source, good.info.get("git_version") if good else None,
        bad.info.get("git_version") if bad else None, clues),
        find_fix=result.bisection.find_fix))


def report_job(plan: JobPlan, outcome: Mapping[str, Any] | None, client: GitHubClient,
               config: Config, environ: Mapping[str, str]) -> State | None:
    """Edit the sticky comment unless a newer trigger or a cancel took it over."""
    commits = PytorchCommits(lambda: client.for_repo(GITHUB_REPO))
    rendered = render_outcome(plan, outcome, config, commits)
    current, owned = owned_sticky(client, plan)
    if current is not None and not owned:
        owner = owner_run(current.body)
        log(f"the comment now belongs to {owner or 'nobody (cancelled)'}; leaving it")
        _summary(environ, "_This bisection was superseded or cancelled; the issue was left "
                 "as it is._\n\n" + rendered.body)
        return None
    if current is None:
        client.create_comment(plan.issue, rendered.body)  # someone deleted it: post anew
    else:
        client.edit_comment(current.id, rendered.body)
    set_state(client, plan.issue, rendered.state, config)
    _summary(environ, rendered.body)
    return rendered.state


_BETWEEN_ROUNDS = ("_In progress: the bisection runs in rounds of GPU runners, and this table "
                   "grows after each round; the answer takes its place when the last round "
                   "is merged._")


def progress_job(plan: JobPlan, outcome: Mapping[str, Any] | None,
                 client: GitHubClient) -> bool:
    """Between rounds of runners, the builds tested so far into the sticky comment (the
    issue's one comment goes queued -> progress table -> verdict), its labels left as they
    are. Only a state still in progress, and only while this run owns the comment: the
    report job, which comes after, writes the answer. Returns whether the comment changed."""
    if outcome is None or "error" in outcome:
        log("no round state to show yet; the comment is left as it is")
        return False
    try:
        result = BisectResult.from_dict(dict(outcome))
    except MalformedError as damaged:
        log(f"the round state could not be read ({damaged}); the comment is left as it is")
        return False
    if result.outcome is not None or not result.probes:
        log("nothing between rounds to show (answered, or nothing tested yet)")
        return False
    current, owned = owned_sticky(client, plan)
    if current is None or not owned:
        log("the comment was deleted, or belongs to another run now; left as it is")
        return False
    extra = "\n\n".join(part for part in (
        _BETWEEN_ROUNDS, about_the_ends(plan.notes) if plan.notes else "",
        logs_line(plan.run_url)) if part)
    client.edit_comment(current.id, render_markdown(result, extra=extra, run_id=plan.run_id))
    return True


def _summary(environ: Mapping[str, str], markdown: str) -> None:
    if environ.get("GITHUB_STEP_SUMMARY"):
        append_summary(environ, markdown)
