"""`bisect-bot bisect`: the whole bisection on this machine, from a script to a report."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bot.adapters.environments import EnvironmentCache
from bot.adapters.runner import Runner
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection
from bot.core.builds import Build, Selection, select_builds, window
from bot.core.errors import UserError
from bot.core.report import render_markdown, render_terminal
from bot.core.results import BisectResult
from bot.core.verdicts import Policy, Verdict
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.progress import TerminalProgress
from bot.jobs.triage_job import TriageOutcome, add_triage_flags, after_bisect

NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/{variant}"
DEFAULT_VARIANT = "cu130"
_VARIANT = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+(\.\d+)*|xpu)$")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torch-bisect-bot"


def add_bisect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="the reproducer: a .py file")
    parser.add_argument("--index", help="index URL of one variant, e.g. "
                        "https://download.pytorch.org/whl/nightly/cu130 (default: from --variant)")
    parser.add_argument("--good", help="last known good build: a version, a date YYYY-MM-DD, "
                        "or omitted to search back from the bad end")
    parser.add_argument("--bad", help="first known bad build: a version, a date or 'latest' "
                        "(default: latest)")
    parser.add_argument("--variant", help=f"cpu, cu130, rocm6.4, xpu... (default: the index's, "
                        f"else {DEFAULT_VARIANT})")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="Python X.Y of the environments (default: this interpreter's)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one run of the reproducer may take (default 600)")
    parser.add_argument("--on-timeout", choices=["bad", "skip"], default="skip",
                        help="verdict of a run that times out (default skip)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per build; mixed = flaky")
    parser.add_argument("--match", help="regex on the output that defines BAD, instead of the "
                        "failure signature of the bad end")
    parser.add_argument("--fix", action="store_true", help="find-the-fix mode: the first build "
                        "that passes after failing ones")
    parser.add_argument("--workers", type=int, default=1, help="probes run side by side")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="environments and uv cache (default ~/.cache/torch-bisect-bot)")
    parser.add_argument("--cache-budget-gb", type=float, default=60.0,
                        help="disk budget of the environment cache (default 60)")
    parser.add_argument("--with", dest="with_packages", action="append", default=[],
                        metavar="PKG", help="extra package for every environment (repeatable)")
    parser.add_argument("--no-default-packages", action="store_true",
                        help="do not add setuptools and numpy to every environment")
    parser.add_argument("--json", type=Path, help="write the JSON report here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown report here")
    add_triage_flags(parser, in_bisect=True)


@dataclass
class Plan:
    """What a local bisection will do, resolved from the arguments."""

    script: Path
    index_url: str
    variant: str | None
    python: str
    builds: tuple[Build, ...]
    good_given: bool
    options: dict[str, object] = field(default_factory=dict)


def resolve_index(index: str | None, variant: str | None) -> tuple[str, str | None]:
    if index:
        last = index.rstrip("/").rsplit("/", 1)[-1]
        return index, variant or (last if _VARIANT.match(last) else None)
    chosen = variant or DEFAULT_VARIANT
    return NIGHTLY_INDEX.format(variant=chosen), chosen


def python_tag(python: str) -> str:
    match = re.fullmatch(r"(\d)\.(\d{1,2})", python)
    if not match:
        raise UserError(f"--python {python}: expected X.Y, e.g. 3.12")
    return f"cp{match[1]}{match[2]}"


def plan_from_args(args: argparse.Namespace) -> Plan:
    script = Path(args.target)
    if not script.is_file():
        raise UserError(f"{script}: no such file")
    index_url, variant = resolve_index(args.index, args.variant)
    if args.repeat < 1 or args.workers < 1 or args.timeout <= 0:
        raise UserError("--repeat and --workers must be at least 1, --timeout positive")
    links = WheelIndex(index_url).project_links("torch")
    builds = select_builds(links, Selection(python_tag(args.python), variant=variant))
    if not builds:
        raise UserError(f"no torch builds for Python {args.python} ({variant or 'any variant'}) "
                        f"on {index_url}")
    chosen = window(builds, args.good, args.bad)
    return Plan(script, index_url, variant, args.python, chosen.builds, chosen.good_given)


def make_cache(args: argparse.Namespace, plan: Plan) -> EnvironmentCache:
    packages = [] if args.no_default_packages else ["setuptools", "numpy"]
    return EnvironmentCache(
        root=args.cache_dir or default_cache_dir(), python=plan.python,
        index_url=plan.index_url, extra_packages=tuple(packages + args.with_packages),
        budget_bytes=int(args.cache_budget_gb * 2**30),
    )


def run_bisection(args: argparse.Namespace, plan: Plan) -> BisectResult:
    progress = TerminalProgress(len(plan.builds), args.workers)
    policy = Policy(on_timeout=Verdict(args.on_timeout), match=args.match)
    options = ProbeOptions(timeout_s=args.timeout, repeat=args.repeat, policy=policy)
    prober = Prober(make_cache(args, plan), Runner(), plan.script, options, progress)
    start = BisectResult(
        builds=plan.builds,
        bisection=Bisection(len(plan.builds), 0 if plan.good_given else None, args.fix),
        probes=(), script_name=plan.script.name, index_url=plan.index_url,
        options={"python": plan.python, "variant": plan.variant, "repeat": args.repeat,
                 "timeout": args.timeout, "match": args.match},
    )
    progress("message", text=f"bisecting {len(plan.builds)} builds of {plan.index_url} "
             f"({plan.builds[0].version} .. {plan.builds[-1].version})")
    return Engine(plan.builds, prober, args.workers, progress).run(start)


def write_reports(args: argparse.Namespace, result: BisectResult,
                  triage: TriageOutcome | None = None) -> None:
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        extra = {"triage": triage.to_dict()} if triage else {}
        args.json.write_text(json.dumps({**result.to_dict(), **extra}, indent=2) + "\n")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(render_markdown(result, extra=triage.markdown() if triage
                                                 else ""))


def bisect_main(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    result = run_bisection(args, plan)
    result, triage = after_bisect(args, plan, result)
    print(render_terminal(result))
    if triage is not None:
        print("\n" + triage.terminal())
    write_reports(args, result, triage)
    for label, path in (("JSON", args.json), ("Markdown", args.markdown)):
        if path:
            print(f"{label} report: {path}")
    return 0
