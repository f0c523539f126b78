"""`bisect-bot plan | run | report`: the three jobs of a bisection requested on GitHub."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from bot.adapters.actions import Event, event_path, read_payload, write_outputs
from bot.core.job_plan import workflow_run_url
from bot.core.labels import State
from bot.jobs.github_common import (
    client_from_env,
    load_config,
    load_plan,
    log,
    owned_sticky,
    read_outcome,
    set_state,
)
from bot.jobs.github_plan import PlanContext, plan_job
from bot.jobs.github_report import progress_job, report_job
from bot.jobs.github_run import run_job
from bot.jobs.local import add_derive_argument


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    plan = commands.add_parser("plan", help="GitHub job 1: decide, acknowledge, write plan.json",
                               description="Read a webhook event (issues.labeled or "
                               "issue_comment.created), check who asked, extract the reproducer, "
                               "post the queued comment and write plan.json. Needs GITHUB_TOKEN "
                               "(issues: write). Sets the step outputs should_run=true|false, "
                               "python (the environments' Python) and gpus (what one probe "
                               "needs: more than 1 for a CUDA reproducer run with torchrun).")
    plan.add_argument("--event", type=Path, help="the event payload (default: $GITHUB_EVENT_PATH)")
    plan.add_argument("--event-name", help="issues or issue_comment (default: "
                      "$GITHUB_EVENT_NAME, else guessed from the payload)")
    plan.add_argument("--repo", help="owner/name (default: the payload's, else "
                      "$GITHUB_REPOSITORY)")
    plan.add_argument("--out", type=Path, default=Path("plan.json"), help="default plan.json")
    plan.add_argument("--index", help="index URL template in place of the config's index_url "
                      "({variant} stands for the variant chosen for the issue)")
    _common(plan)
    plan.set_defaults(handler=plan_main)

    run = commands.add_parser("run", help="GitHub job 2: bisect plan.json (no token needed)",
                              description="Bisect the nightlies plan.json names and write "
                              "outcome.json. Uses no GitHub token.")
    run.add_argument("plan", type=Path, help="plan.json from the plan job")
    run.add_argument("--out", type=Path, default=Path("outcome.json"), help="default outcome.json")
    run.add_argument("--index", help="index URL of one variant, overriding the plan's")
    run.add_argument("--cache-dir", type=Path, help="environments and uv cache")
    run.add_argument("--workers", type=int, default=1, help="probes run side by side")
    run.add_argument("--resume", type=Path, metavar="OUTCOME", help="a partial outcome.json of "
                     "a previous attempt (its artifact): continue from it")
    run.add_argument("--sandbox", choices=["none", "namespace", "docker"], default=None,
                     help="how the reproducer is confined (default: namespace on Linux)")
    run.add_argument("--no-triage", action="store_true",
                     help="do not triage the first bad build (precision, backends, passes)")
    run.add_argument("--no-default-packages", action="store_true",
                     help="do not add setuptools and numpy to every environment")
    run.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                     help="do not install the next round's builds while a round runs")
    add_derive_argument(run)
    run.set_defaults(handler=run_job)

    started = commands.add_parser("mark-running", help="GitHub: move the issue's label from "
                                  "queued to running once a runner took the bisection",
                                  description="Set the running label on the issue of plan.json "
                                  "(unless a newer trigger took the comment over). Needs "
                                  "GITHUB_TOKEN (issues: write); runs beside the run job.")
    started.add_argument("plan", type=Path, help="plan.json from the plan job")
    _common(started)
    started.set_defaults(handler=mark_running_main)

    progress = commands.add_parser("progress", help="GitHub: show the builds tested so far "
                                   "in the issue's comment, between rounds of runners",
                                   description="Render a round state's outcome.json (from "
                                   "`round outcome`, after a merge) as the sticky comment's "
                                   "progress table, while this run owns the comment; labels "
                                   "stay. Needs GITHUB_TOKEN (issues: write).")
    progress.add_argument("outcome", type=Path, help="outcome.json of the latest merge")
    progress.add_argument("--plan", type=Path, default=Path("plan.json"),
                          help="default plan.json")
    _common(progress)
    progress.set_defaults(handler=progress_main)

    report = commands.add_parser("report", help="GitHub job 3: comment the outcome, set labels",
                                 description="Render outcome.json into the sticky comment, "
                                 "move the state label, write the job summary. Needs "
                                 "GITHUB_TOKEN (issues: write). A missing outcome.json "
                                 "reports a failed run.")
    report.add_argument("outcome", type=Path, help="outcome.json from the run job")
    report.add_argument("--plan", type=Path, default=Path("plan.json"), help="default plan.json")
    _common(report)
    report.set_defaults(handler=report_main)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="the bot's config file (default "
                        ".github/torch-bisect-bot.yml if present, else built-in defaults)")


def _event(args: argparse.Namespace, environ: Mapping[str, str]) -> Event:
    payload = read_payload(event_path(args.event, environ))
    name = args.event_name or environ.get("GITHUB_EVENT_NAME")
    if not name:
        name = "issue_comment" if "comment" in payload else "issues"
    return Event(name, payload)


def plan_main(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    config = load_config(args.config)
    if args.index:  # as the config's: its {variant} is the chosen variant's, not the default's
        config = replace(config, index_url=args.index)
    context = PlanContext(
        config=config, make_client=lambda repo: client_from_env(repo, environ),
        run_id=environ.get("GITHUB_RUN_ID", "local"), out=args.out,
        repo=args.repo or environ.get("GITHUB_REPOSITORY", ""),
        run_url=workflow_run_url(environ),
    )
    should_run = plan_job(_event(args, environ), context)
    if environ.get("GITHUB_OUTPUT"):
        # The GPU jobs set up this Python beside the bot's own, for uv to make environments.
        plan = load_plan(args.out) if should_run else None
        write_outputs(environ, {"should_run": "true" if should_run else "false",
                                "python": plan.settings.python if plan else "",
                                "gpus": str(plan.gpus if plan else 1)})
    log(f"should_run={'true' if should_run else 'false'}")
    return 0


def report_main(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    plan = load_plan(args.plan)
    config = load_config(args.config)  # a usage error is said before any call to GitHub
    client = client_from_env(plan.repo, environ)
    state = report_job(plan, read_outcome(args.outcome), client, config, environ)
    log(f"issue #{plan.issue}: {state.value if state else 'left as it was'}")
    return 0


def progress_main(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    plan = load_plan(args.plan)
    load_config(args.config)  # a usage error is said before any call to GitHub
    client = client_from_env(plan.repo, environ)
    if progress_job(plan, read_outcome(args.outcome), client):
        log(f"issue #{plan.issue}: progress shown")
    return 0


def mark_running_main(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    plan = load_plan(args.plan)
    config = load_config(args.config)  # a usage error is said before any call to GitHub
    client = client_from_env(plan.repo, environ)
    current, owned = owned_sticky(client, plan)
    if current is None or not owned:
        log("the comment belongs to another run now; labels left as they are")
        return 0
    set_state(client, plan.issue, State.RUNNING, config)
    log(f"issue #{plan.issue}: running")
    return 0
