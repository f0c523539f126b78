"""The plan job: decide whether an event starts a bisection, acknowledge it, write plan.json."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from github import GithubException

from bot.adapters.actions import Event
from bot.adapters.github import GitHubClient, error_message
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Selection, WheelLink, Window, end_to_reach, page_offers
from bot.core.commands import Action, Command, with_form
from bot.core.config import Config
from bot.core.errors import NoBuilds, UserError
from bot.core.issue_text import Reproducer, extract_from_comment, extract_reproducer
from bot.core.job_plan import (
    JobPlan,
    Settings,
    settings,
    unusable_variant,
    with_issue_python,
    with_issue_variant,
)
from bot.core.labels import State, in_flight
from bot.core.report import owner_run
from bot.core.safe_markdown import neutralise
from bot.core.sticky import (
    render_cancelled,
    render_cannot_start,
    render_queued,
    started_by,
    stopped,
)
from bot.core.triggers import Decision, Kind, decide, help_reply, permitted, refusal
from bot.jobs.github_common import find_sticky, log, set_state, upsert_sticky, write_json
from bot.jobs.local import python_tag
from bot.jobs.window import bad_from_report, widen, window_from, with_default_python

ClientFactory = Callable[[str], GitHubClient]


@dataclass(frozen=True)
class PlanContext:
    """What the plan job is given besides the event."""

    config: Config
    make_client: ClientFactory
    run_id: str
    out: Path
    repo: str = ""  # --repo or GITHUB_REPOSITORY, when the payload names none
    run_url: str = ""  # the run's page, linked from the comment (`workflow_run_url`)


def plan_job(event: Event, context: PlanContext) -> bool:
    """Act on the event; True when plan.json was written and the run job should start."""
    decision = decide(event.name, event.payload, context.config)
    if decision.kind is Kind.IGNORE or not decision.issue:
        log(f"nothing to do: {decision.message}")
        return False
    repo = decision.repo or context.repo
    client = context.make_client(repo)
    if decision.check_permission and not _allowed(client, decision, context.config):
        client.create_comment(decision.issue, refusal(decision.actor, context.config,
                                                      labeled=decision.labeled))
        log(f"{decision.actor} may not start the bot; replied")
        return False
    if decision.kind in (Kind.HELP, Kind.USAGE):
        # The usage names what the comment said: a mention in it must not ping from the bot.
        reply = help_reply(context.config) if decision.kind is Kind.HELP \
            else neutralise(decision.message)
        client.create_comment(decision.issue, reply)
        return False
    if decision.kind is Kind.CANCEL:
        _cancel(client, decision, context)
        return False
    if decision.edited and not _edit_restarts(client, decision, context.config):
        return False
    return _plan_bisection(client, decision, repo, context)


def _edit_restarts(client: GitHubClient, decision: Decision, config: Config) -> bool:
    """Whether an edit of an issue waiting on the bot starts its bisection again: after the
    trigger label, yes (its adder's role was checked); after a command, no (the edit would
    drop its options, and its author is told to comment it again). A comment older than the
    bot's word for it restarts for an editor with the role only."""
    sticky = find_sticky(client.list_comments(decision.issue))
    started = started_by(sticky.body) if sticky is not None else None
    if started == "label":
        return True
    if started == "command":
        log("a command started the last bisection; an edit does not start it again")
        return False
    if _allowed(client, decision, config):
        return True
    log(f"{decision.actor} may not start the bot, and nothing says a label started the last "
        "bisection; the edit starts nothing")
    return False


def _allowed(client: GitHubClient, decision: Decision, config: Config) -> bool:
    role = client.get_permission(decision.actor)
    log(f"{decision.actor} has the role {role}; {config.min_permission} or higher may trigger")
    return permitted(role, config.min_permission)


def _stop_run(client: GitHubClient, body: str, context: PlanContext) -> str | None:
    """Cancel the workflow run that owns the sticky comment `body` (another run than this
    one), so that a bisection called off or replaced gives its GPU runners back at once; a
    job-level concurrency group cannot, for the round jobs of a bisection spread over
    runners. What to tell the issue, when there is something to tell."""
    run = owner_run(body)
    if not run or not run.isdigit() or run == context.run_id:
        return None
    outcome = client.cancel_run(run)
    log(f"cancelling workflow run {run}: {outcome}")
    if outcome == "cancelled":
        return f"Its workflow run ({run}) was cancelled, which gives its runners back."
    if outcome == "forbidden":
        return (f"Its workflow run ({run}) goes on until it ends, because this workflow's "
                "token may not cancel runs (the plan job needs `actions: write`); what it "
                "finds is not posted.")
    return None  # it has ended, or is gone


def _cancel(client: GitHubClient, decision: Decision, context: PlanContext) -> None:
    """Cancel a queued or running bisection, and its workflow run; a finished one's answer
    stays as it is."""
    sticky = find_sticky(client.list_comments(decision.issue))
    if sticky is None or not in_flight(client.get_issue(decision.issue).labels,
                                       context.config.labels):
        client.create_comment(decision.issue, "No bisection of this issue is queued or "
                              "running, so there is nothing to cancel; "
                              + ("its last answer stays as it is." if sticky is not None
                                 else "none was started here."))
        return
    # The comment first: once it names no run, no report of the cancelled run overwrites it.
    client.edit_comment(sticky.id, render_cancelled(decision.actor))
    set_state(client, decision.issue, None, context.config)
    note = _stop_run(client, sticky.body, context)
    if note:
        client.edit_comment(sticky.id, render_cancelled(decision.actor, note))


def _plan_bisection(client: GitHubClient, decision: Decision, repo: str,
                    context: PlanContext) -> bool:
    config = context.config
    command = decision.command or Command(Action.BISECT)
    notes = Notes()
    try:
        issue = client.get_issue(decision.issue)
        # A command's comment may hold the reproducer itself (a triager's reduced script).
        in_comment = extract_from_comment(decision.comment, issue.body, issue.title)
        reproducer = in_comment or extract_reproducer(issue.body, issue.title)
        if command.processes is not None:  # `nproc=`: the triager's word over the issue's
            reproducer = replace(reproducer, processes=command.processes,
                                 processes_guessed=False)
        if command.env:  # `env=`: beside the issue's variables, and over them
            reproducer = replace(reproducer, env=tuple(
                {**dict(reproducer.env), **dict(command.env)}.items()))
        if command.args is not None:  # `args=`: the triager's word over the issue's
            reproducer = replace(reproducer, args=command.args, args_refused=None)
        command = with_form(command, dict(reproducer.form))
        chosen = with_issue_good(settings(command, config), reproducer)
        if chosen.bad is None and reproducer.reported_version:
            chosen = replace(chosen, issue_bad=reproducer.reported_version)
        chosen = with_issue_python(chosen, command, reproducer.reported_python)
        chosen = with_issue_variant(chosen, command, reproducer.reported_version, config)
        chosen, found = _window_and_variant(chosen, config, notes)
        # None: the index is not readable here, and the run job resolves the window.
        builds = found.builds if found is not None else None
        good_given = found.good_given if found is not None else chosen.good is not None
        if chosen.good_said and builds is not None and not good_given:  # it was not usable
            chosen = replace(chosen, good=None, good_said=None)
        unusable_variant(reproducer.needs_cuda, chosen.variant)  # said before a runner is taken
    except UserError as problem:
        if decision.comment_id:
            # A command is answered in a reply: the issue's comment (maybe an earlier
            # answer) and its labels stay, and an edit of the issue starts nothing.
            # The problem may quote the issue or the command: a mention in it must not ping
            # from the bot (the sticky comment neutralises it in render_cannot_start).
            client.create_comment(decision.issue, "I cannot start this bisection: "
                                  f"{neutralise(stopped(str(problem)))}"
                                  "\n\nOnce that is mended (in the issue, or in the command, "
                                  "whose comment may hold the script), comment the command "
                                  f"again. {_hint(config)}")
            log(f"cannot bisect: {problem}")
            return False
        body = render_cannot_start(context.run_id, str(problem), _hint(config),
                                   config.labels.trigger, config.labels.cannot_test)
        upsert_sticky(client, decision.issue, body)
        set_state(client, decision.issue, State.CANNOT_TEST, config)
        log(f"cannot bisect: {problem}")
        return False
    if in_flight(issue.labels, config.labels):  # this bisection replaces that one
        sticky = find_sticky(client.list_comments(decision.issue))
        if sticky is not None:
            _stop_run(client, sticky.body, context)
    where = (f"{reproducer.source} of the comment that asked" if in_comment
             else f"{reproducer.source} of this issue")
    body = render_queued(context.run_id, decision.actor, chosen, builds, where,
                         reproducer.installs, reproducer.env, reproducer.processes,
                         reproducer.processes_guessed, reproducer.reported_platform,
                         tuple(notes), reproducer.args, reproducer.args_refused,
                         run_url=context.run_url)
    comment_id = upsert_sticky(client, decision.issue, body)
    try:
        set_state(client, decision.issue, State.QUEUED, config)
    except GithubException as refused:
        # The labels only mirror the comment: a token that may not set them (or GitHub
        # failing at it) must not leave the comment saying "queued" with nothing queued.
        log(f"the state labels could not be set (HTTP {refused.status}: "
            f"{(error_message(refused) or str(refused))[:200]}); the bisection runs all the "
            "same")
    plan = JobPlan(repo, decision.issue, comment_id, context.run_id, decision.actor,
                   reproducer, chosen, builds, good_given,
                   reproducer_comment=decision.comment_id if in_comment else 0,
                   command_comment=decision.comment_id, notes=tuple(notes),
                   newer_builds=found.newer if found is not None else 0,
                   run_url=context.run_url)
    write_json(context.out, plan.to_dict())
    log(f"planned: {context.out}")
    return True


def with_issue_good(chosen: Settings, reproducer: Reproducer) -> Settings:
    """The good end the issue's words give ("works in torch 2.12.0"), when the command gave
    none; a found fix has no good end to take from them."""
    if chosen.good is not None or chosen.find_fix or reproducer.reported_good is None:
        return chosen
    log(f'good end from the issue: {reproducer.reported_good} ("{reproducer.good_said}")')
    return replace(chosen, good=reproducer.reported_good, good_said=reproducer.good_said)


class Notes(list[str]):
    """What is said while the window is resolved: logged, and kept for the queued comment
    (an end of the issue's that was not used, and why). A try given up takes its notes back."""

    def __call__(self, text: str) -> None:
        log(text)
        self.append(text)


def _window_and_python(chosen: Settings, default_python: str, notes: Notes
                       ) -> tuple[Settings, Window | None]:
    """resolve_window, where a Python taken from the issue that the index has no builds for
    gives way to the configured one (the sticky comment says so)."""
    if chosen.issue_python is not None:
        log(f"Python {chosen.python}, as the issue's environment reports")
    mark = len(notes)

    def attempt(python: str) -> Window | None:
        del notes[mark:]
        return resolve_window(replace(chosen, python=python), notes)

    python, found = with_default_python(
        chosen.python, default_python, chosen.issue_python is not None, attempt, log)
    return replace(chosen, python=python), found


def _window_and_variant(chosen: Settings, config: Config, notes: Notes
                        ) -> tuple[Settings, Window | None]:
    """_window_and_python, where a variant taken from the issue that the index has no builds
    of (or no page for) gives way to the configured one (the sticky comment says so)."""
    mark = len(notes)
    if chosen.issue_variant is None:
        found = _window_and_python(chosen, config.python, notes)
        if (found[1] is None and chosen.variant != config.variant
                and _answers(config.index_for(config.variant))):
            # The index answers for the configured variant and not for this one: a variant
            # it does not have, told now rather than on a GPU runner.
            raise NoBuilds(f"the index has no nightlies of the variant `{chosen.variant}` "
                           f"({chosen.index_url}), and it has those of `{config.variant}`: "
                           f"give a variant it has, such as `variant={config.variant}`.")
        return found
    log(f"variant {chosen.variant}, as the issue's build reports")
    try:
        found = _window_and_python(chosen, config.python, notes)
    except NoBuilds as problem:
        log(f"no builds of the issue's variant {chosen.variant} ({problem}); "
            f"bisecting {config.variant}")
    else:
        if found[1] is not None:
            return found
        log(f"the index of the issue's variant {chosen.variant} is not readable here; "
            f"bisecting {config.variant}")
    del notes[mark:]  # what was said of the issue's variant's builds
    return _window_and_python(replace(chosen, variant=config.variant,
                                      index_url=config.index_for(config.variant)),
                              config.python, notes)


def _torch_links(index: WheelIndex) -> list[WheelLink] | None:
    """The index's torch wheels, or None where it cannot be read from here."""
    try:
        return index.project_links("torch")
    except UserError as problem:
        log(f"index not readable from the plan job ({problem})")
        return None


def _answers(index_url: str) -> bool:
    """Whether the index at `index_url` lists torch, as seen from here."""
    return _torch_links(WheelIndex(index_url)) is not None


def resolve_window(chosen: Settings, say: Callable[[str], None] = log) -> Window | None:
    """The nightlies to bisect, or None when the index cannot be read from here.

    Resolving here reports bad bounds before a GPU runner is taken; but the plan runner may
    not reach an index that the GPU runners reach (an internal mirror), so an unreadable
    index defers the window to the run job instead of failing.
    """
    index = WheelIndex(chosen.index_url)
    links = _torch_links(index)
    if links is None:
        log("the run job resolves the window")
        return None
    return builds_in_window(index, links, chosen, say)


def builds_in_window(index: WheelIndex, links: list[WheelLink], chosen: Settings,
                     say: Callable[[str], None] = log) -> Window:
    """The window of `chosen`, with the nightlies the index no longer lists back to its good
    end when that is older than every listed one."""
    selection = Selection(python_tag(chosen.python), variant=chosen.variant)
    name, older = end_to_reach(chosen.good, chosen.bad, chosen.find_fix)
    builds = widen(index, links, selection, older, say=say, name=name,
                   from_words=chosen.good_said is not None and name == "good",
                   ends={"good": chosen.good, "bad": chosen.bad})
    if not builds:
        whose = ", the issue's Python" if chosen.issue_python == chosen.python else ""
        raise NoBuilds(f"the index {chosen.index_url} lists no torch nightlies for Python "
                       f"{chosen.python} ({chosen.variant}){whose} ({page_offers(links)}); "
                       f"give another with python=")
    bad = chosen.bad
    if bad is None:  # the newer end of a regression; a search for its fix starts there
        bad = bad_from_report(chosen.issue_bad, builds, say=say)
        if bad is not None:
            log(f"bad end: {bad}, the nightly the issue reports")
    return window_from(builds, chosen.good, bad, chosen.good_said, say=say,
                       find_fix=chosen.find_fix)


def _hint(config: Config) -> str:
    return f"Comment `@{config.handle} help` for the options."

