"""The `bisect-bot` command: parses arguments, builds the real collaborators, runs one job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from bot import __version__
from bot.core.errors import UserError
from bot.jobs import demo, local, triage_job

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
                                 "a reproducer: exit 0 is good, 125 skip, anything else bad.")
    local.add_bisect_arguments(bisect)
    bisect.set_defaults(handler=local.bisect_main)

    triage = commands.add_parser("triage", help="say why a reproducer fails on one build",
                                 description="Triage one build: rerun the reproducer with "
                                 "Inductor's precision emulation, under each torch.compile "
                                 "backend, and with torch._inductor.compiler_bisector.")
    triage_job.add_triage_arguments(triage)
    triage.set_defaults(handler=triage_job.triage_main)

    demo_parser = commands.add_parser("demo", help="bisect a bundled example over a local mirror",
                                      description="Build a local nightly mirror of a synthetic "
                                      "torch with a planted regression, serve it on 127.0.0.1, "
                                      "and bisect the bundled example over it.")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.demo_main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except UserError as exc:
        print(f"bisect-bot: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bisect-bot: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
