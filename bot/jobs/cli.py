"""The `bisect-bot` command: parses arguments, builds the real collaborators, runs one job."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot import __version__
from bot.core.errors import UserError
from bot.core.issue_text import extract_reproducer
from bot.core.results import EXIT_STATUS_HELP
from bot.jobs import demo, github_jobs, local, resume, rounds, sweep_cli, targets, triage_job

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bisect-bot",
        description="Bisect PyTorch nightlies to the first build that breaks a reproducer.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    bisect = commands.add_parser("bisect", help="bisect nightlies for a reproducer",
                                 description="Bisect nightly (or release) builds of torch for "
                                 "a reproducer: exit 0 is good, 125 skip, anything else bad.",
                                 epilog=EXIT_STATUS_HELP + ".")
    local.add_bisect_arguments(bisect)
    bisect.set_defaults(handler=local.bisect_main)

    extract = commands.add_parser("extract", help="print the reproducer found in an issue",
                                  description="Find the runnable reproducer in an issue body "
                                  "(a Markdown file, owner/repo#N or an issue URL) and print it "
                                  "as JSON: script, needs_cuda, reported_version, imports.")
    extract.add_argument("issue", help="an issue body (.md), owner/repo#N, or an issue URL")
    extract.set_defaults(handler=extract_main)

    triage = commands.add_parser("triage", help="say why a reproducer fails on one build",
                                 description="Triage one build: rerun the reproducer with "
                                 "Inductor's precision emulation, under each torch.compile "
                                 "backend, and with torch._inductor.compiler_bisector.",
                                 epilog=triage_job.TRIAGE_EXIT_HELP)
    triage_job.add_triage_arguments(triage)
    triage.set_defaults(handler=triage_job.triage_main)

    demo_parser = commands.add_parser("demo", help="bisect a bundled example over a local mirror",
                                      description="Build a local nightly mirror of a synthetic "
                                      "torch with a planted regression, serve it on 127.0.0.1, "
                                      "and bisect the bundled example over it.")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.demo_main)
    resume.add_resume_command(commands)
    github_jobs.add_commands(commands)
    rounds.add_commands(commands)
    _add_sweep_commands(commands)
    return parser


def extract_main(args: argparse.Namespace) -> int:
    reference = targets.issue_reference(args.issue)
    if reference is not None:
        found = targets.issue_reproducer(*reference, targets.comment_reference(args.issue))
    else:
        try:
            found = extract_reproducer(Path(args.issue).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{args.issue}: cannot read it ({exc})") from exc
    print(json.dumps(found.to_dict(), indent=2))
    return 0


def _add_sweep_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    suite = commands.add_parser("suite", help="work with a folder of stored reproducers")
    suite_commands = suite.add_subparsers(dest="suite_command", required=True, metavar="ACTION")
    check = suite_commands.add_parser("check", help="validate every case's metadata block")
    sweep_cli.add_check_arguments(check)
    check.set_defaults(handler=sweep_cli.check_main)
    sweep = commands.add_parser("sweep", help="run a suite on one nightly, bisect new failures",
                                description="Run every case on one nightly, record the runs, "
                                "bisect cases that newly fail, file or update one issue per "
                                "regression (the cases that broke between the same two "
                                "nightlies share one), and note cases that appear fixed.")
    sweep_cli.add_sweep_arguments(sweep)
    sweep.set_defaults(handler=sweep_cli.sweep_main)
    plan = commands.add_parser("sweep-plan", help="print the JSON matrix of sweep shards")
    sweep_cli.add_plan_arguments(plan)
    plan.set_defaults(handler=sweep_cli.plan_main)
    merge = commands.add_parser("sweep-merge", help="fold shard exports into the history, "
                                "then file their findings")
    sweep_cli.add_merge_arguments(merge)
    merge.set_defaults(handler=sweep_cli.merge_main)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what `resume` replays
    handler: Handler = args.handler
    previous = _stop_on_signals()
    try:
        return handler(args)
    except UserError as exc:
        print(f"bisect-bot: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_status", 2))  # 7: stopped unfinished, resumable
    except KeyboardInterrupt:
        # Its id (and --db, when not the default): a plain `bisect-bot resume` takes the newest
        # unfinished bisection of the default history, which need not be this one.
        again = getattr(args, "resume_command", None)
        with contextlib.suppress(OSError):  # the terminal that hung up (SIGHUP) is gone
            print("bisect-bot: interrupted" + (f"; `{again}` continues it from its last "
                                                "checkpoint" if again else ""), file=sys.stderr)
        return 130
    finally:
        for number, handler_before in previous.items():
            signal.signal(number, handler_before)


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM (a job cancelled, `kill`) and SIGHUP (a closed terminal or ssh session) stop the
    bot as Ctrl-C does: the running reproducers are killed and the checkpoint says where to go
    on. Python's default for them is to exit at once, with no cleanup at all."""
    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(number).name)

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.signal(number, interrupt) for number in (signal.SIGTERM, signal.SIGHUP)}


if __name__ == "__main__":
    sys.exit(main())
