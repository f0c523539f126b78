"""`bisect-bot bisect`: the whole bisection on this machine, from a script to a report."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.adapters.environments import (
    DEFAULT_PACKAGES,
    EnvironmentCache,
    IndexOutage,
    find_python,
    syntax_problem,
    why_no_python,
)
from bot.adapters.runner import Runner
from bot.adapters.sandbox import make_sandbox
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection
from bot.core.builds import (
    VARIANT,
    Build,
    Selection,
    end_to_reach,
    named_variant,
    page_offers,
    parse_end,
)
from bot.core.commands import Action, Command, supported_python, with_form
from bot.core.commit_report import CommitTier, commit_summary, render_commit_section
from bot.core.config import PYPI_INDEX
from bot.core.errors import NoBuilds, UserError
from bot.core.issue_code import checks_itself
from bot.core.issue_facts import COMPANIONS, given_env
from bot.core.issue_text import Reproducer
from bot.core.job_plan import issue_variant
from bot.core.report import render_markdown, render_terminal
from bot.core.results import BisectResult
from bot.core.safe_markdown import visible
from bot.core.triage import render_triage_markdown
from bot.core.verdicts import Policy, Verdict
from bot.jobs import commit_tier, resume, targets
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.gpu import gpu_blocker, gpu_slots
from bot.jobs.prefetch import Prefetcher
from bot.jobs.progress import TerminalProgress
from bot.jobs.targets import comment_reference, existing_builds, issue_reference, load_target
from bot.jobs.triage_job import TriageOutcome, add_triage_flags, after_bisect
from bot.jobs.window import (
    bad_from_report,
    search_further_back,
    widen,
    window_from,
    with_default_python,
)

NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/{variant}"
DEFAULT_VARIANT = "cu130"


THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torch-bisect-bot"


def add_bisect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="the reproducer: a .py file, an issue body (.md), or "
                        "an issue (owner/repo#N or its URL, or a comment's URL, "
                        "...#issuecomment-ID; GITHUB_TOKEN if set)")
    parser.add_argument("--index", help="index URL of one variant, e.g. "
                        "https://download.pytorch.org/whl/nightly/cu130, or of every variant "
                        "with {variant} in it (a mirror) (default: from --variant)")
    parser.add_argument("--good", help="last known good build: a version, a date YYYY-MM-DD, "
                        "a release (2.12.0: its last nightly), or omitted to take it from the "
                        "issue (its form, or words like 'works in torch 2.12.0') or else search "
                        "back from the bad end, past the nightlies the index lists if they all "
                        "fail; older than the index lists is fine")
    parser.add_argument("--bad", help="first known bad build: a version, a date or 'latest' "
                        "(default: the nightly the issue reports failing on, when the index "
                        "lists it; else latest)")
    parser.add_argument("--variant", help=f"cpu, cu130, rocm6.4, xpu... (default: the index's, "
                        f"else the CUDA variant of the build the issue reports when it is no "
                        f"newer, else {DEFAULT_VARIANT})")
    parser.add_argument("--python", help="Python X.Y of the environments (default: the "
                        "issue's, from its collect_env output, when uv finds that Python here "
                        f"and the index has builds for it; else this interpreter's, {THIS_PYTHON})")
    parser.add_argument("--channel", choices=["nightly", "release"], default="nightly",
                        help="bisect nightlies (default) or published releases (default index: "
                        "PyPI)")
    parser.add_argument("--builds-from-python", nargs="+", metavar="PATH",
                        help="use existing interpreters (or venv/conda prefixes, or @FILE "
                        "listing them) as the builds, oldest first; nothing is installed")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one run of the reproducer may take (default 600)")
    parser.add_argument("--on-timeout", choices=["bad", "skip"], default="skip",
                        help="verdict of a run that times out (default skip)")
    parser.add_argument("--missing-api", choices=["skip", "bad"], default="skip",
                        help="verdict of a build that lacks a torch API the reproducer uses "
                        "(default skip: a build older than the script; bad: the API went "
                        "away, as a sweep judges a stored case that passed before)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per build; mixed = flaky")
    parser.add_argument("--match", help="regex a failing run's output must match to be BAD, "
                        "instead of the bad end's failure signature (other failures are SKIP); "
                        "a run that exits 0 is GOOD whatever it prints: make the script fail "
                        "(assert), or use --metric")
    parser.add_argument("--metric", help="regex whose first group is a number printed by the "
                        "reproducer (e.g. 'max abs diff: (\\S+)'); BAD above --threshold")
    parser.add_argument("--threshold", type=float, help="the metric's largest good value")
    parser.add_argument("--needs-cuda", choices=["auto", "yes", "no"], default="auto",
                        help="whether the reproducer needs a CUDA GPU (default: detected)")
    parser.add_argument("--fix", action="store_true", help="find-the-fix mode: the first build "
                        "that passes after failing ones; --bad is then a build that fails (the "
                        "older end, default: the nightly the issue reports) and --good one that "
                        "passes (default: latest)")
    targets.add_processes_argument(parser)
    targets.add_env_argument(parser)
    targets.add_args_argument(parser)
    parser.add_argument("--workers", type=int, default=1, help="probes run side by side")
    parser.add_argument("--gpus", type=gpu_list, metavar="0,1,...",
                        help="one worker per GPU; each run sees only its own GPU "
                        "(CUDA_VISIBLE_DEVICES); overrides --workers")
    parser.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                        help="do not install the next round's builds while a round runs")
    add_derive_argument(parser)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="environments and uv cache (default ~/.cache/torch-bisect-bot)")
    parser.add_argument("--cache-budget-gb", type=float, default=60.0,
                        help="disk budget of the environments (default 60); the downloaded "
                        "wheels kept to remake them take at most a quarter of it besides")
    parser.add_argument("--with", dest="with_packages", action="append", default=[],
                        metavar="PKG", help="a package for every environment (repeatable), "
                        "installed instead of what the reproducer imports (which is a guess "
                        "from module names)")
    parser.add_argument("--no-default-packages", action="store_true",
                        help="do not add setuptools and numpy to every environment")
    parser.add_argument("--packages-index", default=PYPI_INDEX, metavar="URL",
                        help="where the packages the reproducer imports (and --with) come from "
                        "when torch's index lacks them; wheels only, in environments of their "
                        f"own (default {PYPI_INDEX}; '' for torch's index alone)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where a reproducer taken from an issue is written (default: a "
                        "temporary folder)")
    parser.add_argument("--sandbox", choices=["none", "namespace", "docker"], default=None,
                        help="how reproducers are confined (default: namespace on Linux; "
                        "none is unsafe, for debugging a trusted script only)")
    parser.add_argument("--json", type=Path, help="write the JSON report here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown report here")
    resume.add_db_argument(parser)
    commit_tier.add_arguments(parser)
    add_triage_flags(parser, in_bisect=True)


def gpu_list(text: str) -> tuple[str, ...]:
    """`0,1` or `GPU-uuid,...`: what CUDA_VISIBLE_DEVICES accepts, one entry per worker."""
    gpus = tuple(part.strip() for part in text.split(","))
    known = all(g.isdigit() or re.fullmatch(r"(?:GPU|MIG)-[\w-]+", g) for g in gpus)
    if not known or len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"{text!r}: expected distinct GPU ids like 0,1 (or "
                                         "GPU-/MIG- UUIDs, as nvidia-smi -L lists them)")
    return gpus


@dataclass
class Plan:
    """What a local bisection will do, resolved from the arguments."""

    script: Path
    index_url: str
    variant: str | None
    python: str
    builds: tuple[Build, ...]
    good_given: bool
    needs_cuda: bool = False
    options: dict[str, object] = field(default_factory=dict)
    imports: tuple[str, ...] = ()  # the reproducer's third-party packages, installed with torch
    scratch: bool = False  # the script's folder was made for it (taken from an issue)
    newer_builds: int = 0  # builds the index lists after the window's newer end

    def discard(self) -> None:
        """Remove the folder made for the script. A bisection keeps its script in its
        checkpoints, so `resume` writes it again if it needs it."""
        if self.scratch:
            shutil.rmtree(self.script.parent, ignore_errors=True)


def resolve_index(
    index: str | None, variant: str | None, channel: str = "nightly"
) -> tuple[str, str | None]:
    if index and "{variant}" in index:  # a mirror laid out as the nightly server is
        chosen = variant or DEFAULT_VARIANT
        return index.replace("{variant}", chosen), chosen
    if index:
        last = index.rstrip("/").rsplit("/", 1)[-1]
        return index, variant or (last if VARIANT.fullmatch(last) else None)
    if channel == "release":
        return PYPI_INDEX, variant  # PyPI's Linux wheels have no local label: any variant
    chosen = variant or DEFAULT_VARIANT
    return NIGHTLY_INDEX.format(variant=chosen), chosen


def python_tag(python: str) -> str:
    match = re.fullmatch(r"(\d)\.(\d{1,2})", python)
    if not match:
        raise UserError(f"--python {python}: expected X.Y, e.g. 3.12")
    return f"cp{match[1]}{match[2]}"


def check_policy_flags(args: argparse.Namespace) -> None:
    """--metric with --threshold, and both regexes valid (bisect's and triage's)."""
    if (args.metric is None) != (args.threshold is None):
        raise UserError("--metric and --threshold go together")
    for flag, pattern in (("--match", args.match), ("--metric", args.metric)):
        if pattern is not None:
            try:
                groups = re.compile(pattern).groups
            except re.error as exc:
                raise UserError(f"{flag} {pattern!r} is not a regular expression: {exc}") from exc
            if flag == "--metric" and groups < 1:
                raise UserError(f"--metric {pattern!r}: put the number in a (group), like "
                                r"'max abs diff: (\S+)'")


def check_options(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything is read or run (a report that cannot be
    written would otherwise fail after the whole bisection)."""
    for flag, number in (("--timeout", args.timeout), ("--threshold", args.threshold),
                         ("--cache-budget-gb", getattr(args, "cache_budget_gb", 1.0))):
        if number is not None and not math.isfinite(number):
            raise UserError(f"{flag} {number}: give a finite number")
    if args.repeat < 1 or args.workers < 1 or args.timeout <= 0:
        raise UserError("--repeat and --workers must be at least 1, --timeout positive")
    if getattr(args, "cache_budget_gb", 1.0) <= 0:
        raise UserError("--cache-budget-gb must be positive")
    if getattr(args, "variant", None) and not VARIANT.fullmatch(args.variant):
        raise UserError(f"--variant {args.variant}: not a variant of PyTorch's wheels (cpu, "
                        "cu126, cu128, cu130, rocm6.4, xpu)")
    check_policy_flags(args)
    check_paths(args)
    try:
        given_env(getattr(args, "env", None) or ())
    except UserError as error:
        raise UserError(f"--env: {error}") from None
    targets.script_args(args, None)  # refused before anything is read
    for side, spec in (("good", args.good), ("bad", args.bad)):
        try:
            if spec is not None:
                parse_end(spec)
        except UserError as error:
            raise UserError(f"--{side} {spec}: {error}") from None
    if args.python is not None:
        python_tag(args.python)


def check_paths(args: argparse.Namespace) -> None:
    """The files the bisection writes can be written, and its folders are folders; no file it
    writes is the reproducer or another of them (a report written over the script was the
    user's work lost)."""
    files = (("--json", args.json), ("--markdown", args.markdown),
             ("--db", getattr(args, "db", None)))
    folders = (("--cache-dir", args.cache_dir), ("--work-dir", args.work_dir))
    for flag, path, is_file in [(*f, True) for f in files] + [(*f, False) for f in folders]:
        if path is None:
            continue
        if is_file and path.is_dir():
            raise UserError(f"{flag} {path}: that is a folder; give a file name")
        if not is_file and path.exists() and not path.is_dir():
            raise UserError(f"{flag} {path}: that is a file, not a folder")
        _under_folders(flag, path)
    target = getattr(args, "target", None)
    taken: dict[Path, str] = {}
    if target and Path(target).is_file():
        taken[Path(target).resolve()] = "the reproducer given"
    for flag, path in files:
        if path is None:
            continue
        other = taken.get(path.resolve())
        if other is not None:
            raise UserError(f"{flag} {path}: that is {other}; give another file")
        taken[path.resolve()] = flag
        if flag != "--db":  # the history is opened (and made) when the bisection starts
            _writable(flag, path)


def _under_folders(flag: str, path: Path) -> None:
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise UserError(f"{flag} {path}: {blocked} is a file, not a folder")


def file_to_write(flag: str, path: Path) -> None:
    """`path`, given by `flag`, can be written: checked before the work (an install and run,
    a triage), so a bad path is a line, not a traceback after it."""
    if path.is_dir():
        raise UserError(f"{flag} {path}: that is a folder; give a file name")
    _under_folders(flag, path)
    _writable(flag, path)


def _writable(flag: str, path: Path) -> None:
    """Make the report's folder and open the report for appending, now: a path that cannot
    be written failed after the whole bisection, and took the other report with it."""
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot write it ({exc.strerror or exc})") from None
    if not existed:
        path.unlink(missing_ok=True)


def plan_from_args(args: argparse.Namespace) -> Plan:
    check_options(args)
    if (args.python is not None and not args.builds_from_python
            and supported_python(args.python) and find_python(args.python) is None):
        # Every install failed before, each saying so deep in its reason: `cannot-test`.
        why = why_no_python(args.python)
        raise UserError(f"--python {args.python}: uv finds no Python {args.python} on this "
                        f"machine; install it (`uv python install {args.python}`), or give "
                        "another" + (f". uv said: {why}" if why else ""))
    target = load_target(args.target, args.work_dir)
    found = target.reproducer
    if found is not None and found.form:
        take_form(args, dict(found.form))
    good: str | None = args.good
    said: str | None = None
    if good is None and not args.fix and found is not None and found.reported_good:
        good, said = found.reported_good, found.good_said
        _say(f'good end from the issue: {good} ("{said}"); --good overrides it')
    args.good_said = said
    given = args.python or args.builds_from_python  # existing interpreters have their own
    issue_python = None if given else _issue_python(found)
    args.python = args.python or issue_python or THIS_PYTHON
    variant_of_issue = _issue_variant(args, target.reported_version, target.needs_cuda)

    reach = end_to_reach(good, args.bad, args.fix)  # how far back the builds must go
    ends = {"good": good, "bad": args.bad}

    def builds_for(python: str) -> tuple[str, str | None, Sequence[Build]]:
        args.python = python
        if variant_of_issue is None:
            return builds_from_args(args, *reach, ends)
        args.variant = variant_of_issue
        try:
            return builds_from_args(args, *reach, ends)
        except UserError as problem:  # NoBuilds, or no index page for it
            _say(f"no builds of variant {variant_of_issue} ({problem}); "
                 f"bisecting {DEFAULT_VARIANT}")
        args.variant = DEFAULT_VARIANT
        return builds_from_args(args, *reach, ends)

    try:
        args.python, (index_url, variant, builds) = with_default_python(
            args.python, THIS_PYTHON, issue_python is not None, builds_for, _say)
        # The nightly the issue reports failing on: the newer end of a regression, and the
        # older end (a failing build) of a search for its fix.
        bad = args.bad or bad_from_report(target.reported_version, builds, say=_say)
        chosen = window_from(builds, good, bad, said, say=_say, find_fix=args.fix)
    except UserError as error:
        target.discard()
        raise as_typed(error, args) from None
    needs_cuda = target.needs_cuda if args.needs_cuda == "auto" else args.needs_cuda == "yes"
    imports = _reproducer_packages(args, target.imports)
    if args.processes is None and found is not None and found.processes is not None:
        args.processes = found.processes
        count = f"{found.processes} process" + ("" if found.processes == "1" else "es")
        _say(f"running it with torchrun on {count}, a guess: the script reads torchrun's "
             "variables and the issue names no count; --nproc-per-node sets it"
             if found.processes_guessed else
             f"running it with torchrun on {count}, as the issue does; --nproc-per-node "
             "overrides it")
    args.reported_platform = found.reported_platform if found is not None else None
    if args.reported_platform:
        _say(f"the issue reports {args.reported_platform}; the builds are Linux ones, where a "
             f"bug of {args.reported_platform} alone does not show")
    args.issue_env = dict(found.env) if found is not None else {}
    if args.issue_env:
        words = " ".join(f"{name}={value}" for name, value in args.issue_env.items())
        _say(f"running it with {words}, as the issue does")
    args.issue_env.update(given_env(getattr(args, "env", None) or ()))
    args.script_args = list(targets.script_args(args, found))
    if args.script_args:
        how = ("as --args gives them" if args.args_given is not None else
               "as the issue runs it; --args overrides them")
        _say(f"running it as `{shlex.join(['python', target.script.name, *args.script_args])}`"
             f", {how}")
    args.args_refused = (found.args_refused if found is not None and args.args_given is None
                         else None)
    if args.args_refused:
        _say(f"running it without arguments: {args.args_refused}; --args gives them")
    return Plan(target.script, index_url, variant, args.python, chosen.builds,
                chosen.good_given, needs_cuda=needs_cuda, imports=imports, scratch=target.scratch,
                newer_builds=chosen.newer)


def as_typed(error: UserError, args: argparse.Namespace) -> UserError:
    """`error` naming an end as the user typed it here (`--bad X`), where the core spells it
    as in a command (`bad=X`)."""
    said = str(error)
    for side in ("good", "bad"):
        spec = getattr(args, side, None)
        if spec and said.startswith(f"{side}={spec}:"):
            error.args = (f"--{side} {spec}{said[len(side) + 1 + len(spec):]}", *error.args[1:])
    return error


def _reproducer_packages(args: argparse.Namespace, imports: Sequence[str]) -> tuple[str, ...]:
    """What to install beside each build for the issue's script, said with where from: what
    the issue form names, else what the script imports that no option installs already.
    `--with` names the packages instead (the imports are a guess from module names)."""
    given = set(args.with_packages) | (set() if args.no_default_packages else set(DEFAULT_PACKAGES))
    named = tuple(getattr(args, "form_packages", ()))
    wanted = named or tuple(name for name in imports if name not in given)
    what = "the issue form names" if named else "the reproducer imports"
    if wanted and getattr(args, "builds_from_python", None):
        _say(f"{what} {', '.join(wanted)}: the interpreters given are used as they are, so "
             "they must have it")
        return ()
    if wanted and args.with_packages:
        _say(f"--with names the packages: not installing {', '.join(wanted)}, which {what}")
        return ()
    if wanted:
        source = f"torch's index, else {args.packages_index}" if args.packages_index \
            else "torch's index alone (--packages-index '')"
        companions = [name for name in wanted if name in COMPANIONS]
        same_day = (f" ({', '.join(companions)}: the nightly that each build's version pins)"
                    if companions else "")
        _say(f"{what} {', '.join(wanted)}: installing it into every environment from "
             f"{source}{same_day}")
    return wanted


def _issue_variant(args: argparse.Namespace, reported: str | None,
                   needs_cuda: bool) -> str | None:
    """The variant the builds named say, when no option or index fixes one: that of a
    `--good`/`--bad` version (`2.13.0.dev20260510+cpu`), else the CUDA variant of the build the
    issue reports (`job_plan.issue_variant`: no newer than the default's), else `cpu` where
    the issue reports a CPU build and the script needs no GPU."""
    if args.variant or args.builds_from_python or args.channel != "nightly" or (
            args.index and "{variant}" not in args.index):
        return None
    for option, end in (("--bad", args.bad), ("--good", args.good)):
        named = named_variant(end)
        if named is not None:
            _say(f"variant {named}, as {option} {end} names it; --variant overrides it")
            return named
    variant = issue_variant(reported, DEFAULT_VARIANT)
    if variant is None and (reported or "").endswith("+cpu") and not needs_cuda:
        variant = "cpu"
    if variant is not None:
        _say(f"variant {variant}, as the issue's build reports; --variant overrides it")
    return variant


def _issue_python(found: Reproducer | None) -> str | None:
    """The Python the issue's environment reports, when it is not this one and uv finds it
    here (environments are made only with interpreters this machine has)."""
    reported = found.reported_python if found is not None else None
    if reported is None or reported == THIS_PYTHON:
        return None
    if not supported_python(reported):
        _say(f"the issue reports Python {reported}, which nightlies are not built for (3.10 "
             f"to 3.14); bisecting with {THIS_PYTHON}")
        return None
    if find_python(reported) is None:
        said = why_no_python(reported)
        _say(f"the issue reports Python {reported}, which uv does not find here; bisecting "
             f"with {THIS_PYTHON} (install {reported}, or give --python)"
             + (f". uv said: {said}" if said else ""))
        return None
    _say(f"Python {reported}, as the issue's environment reports; --python overrides it")
    return reported


def take_form(args: argparse.Namespace, form: dict[str, str]) -> None:
    """What the issue form answered, where no option says otherwise (its variant only when no
    index is given either)."""
    if args.index is not None:
        form.pop("variant", None)
    asked = with_form(Command(Action.BISECT, good=args.good, bad=args.bad, variant=args.variant,
                              packages=tuple(args.with_packages), find_fix=args.fix), form)
    for option in ("good", "bad", "variant"):
        if getattr(args, option) is None and getattr(asked, option) is not None:
            setattr(args, option, getattr(asked, option))
            _say(f"{option} from the issue form: {getattr(asked, option)}")
    if not args.with_packages and asked.packages:  # the issue's: installed as its imports are
        args.form_packages = asked.packages
        _say(f"packages from the issue form: {', '.join(asked.packages)}")


def builds_from_args(args: argparse.Namespace, name: str, good: str | None,
                     ends: Mapping[str, str | None] | None = None
                     ) -> tuple[str, str | None, Sequence[Build]]:
    """The index URL, the variant and the builds on it that `args` selects, back to `good`
    (the end called `name`); with a yanked build that one of `ends` names exactly."""
    if args.builds_from_python:
        return "", None, existing_builds(args.builds_from_python)
    index_url, variant = resolve_index(args.index, args.variant, args.channel)
    index = WheelIndex(index_url)
    links = index.project_links("torch")
    selection = Selection(python_tag(args.python), variant=variant, channel=args.channel)
    builds = widen(index, links, selection, good, say=_say, name=name,
                   from_words=bool(getattr(args, "good_said", None)) and name == "good",
                   ends=ends)
    if not builds:
        raise NoBuilds(f"no torch builds for Python {args.python} ({variant or 'any variant'}) "
                        f"on {index_url}: {page_offers(links)}")
    return index_url, variant, builds


def _say(text: str) -> None:
    print(visible(text), file=sys.stderr)


def add_derive_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-derive", dest="derive", action="store_false",
                        help="install every build with uv, never by linking the files it "
                        "shares with a build installed before")


def make_cache(args: argparse.Namespace, plan: Plan) -> EnvironmentCache:
    packages = () if args.no_default_packages else DEFAULT_PACKAGES
    return EnvironmentCache(
        root=args.cache_dir or default_cache_dir(), python=plan.python,
        index_url=plan.index_url, extra_packages=(*packages, *args.with_packages),
        issue_packages=plan.imports, packages_index=args.packages_index or None,
        budget_bytes=int(args.cache_budget_gb * 2**30),
        derive=getattr(args, "derive", True),
    )


def preflight(prober: Prober, plan: Plan, slots: Sequence[Mapping[str, str]] = ()) -> str | None:
    """A CUDA reproducer on a runner whose torch sees no GPU (or a worker whose `--gpus`
    share sees none) cannot be tested at all."""
    return gpu_blocker(prober, plan.builds[-1], slots) if plan.needs_cuda else None


def probe_options(args: argparse.Namespace) -> ProbeOptions:
    policy = Policy(on_timeout=Verdict(args.on_timeout), match=args.match,
                    metric=args.metric, threshold=args.threshold,
                    missing_api=Verdict(getattr(args, "missing_api", None) or "skip"))
    return ProbeOptions(timeout_s=args.timeout, repeat=args.repeat, policy=policy,
                        env=dict(getattr(args, "issue_env", None) or {}),
                        processes=getattr(args, "processes", None),
                        args=tuple(getattr(args, "script_args", None) or ()))


def make_runner(args: argparse.Namespace, plan: Plan, cache: EnvironmentCache) -> Runner:
    """The runner of every probe: confined as `--sandbox` says, the cache hidden from it, and
    checked to start the interpreter uv makes the environments from (`--python`, the issue's
    Python: not always the bot's own), so one it cannot start is said once, up front."""
    cuda = plan.needs_cuda or (plan.variant or "").startswith("cu")
    found = find_python(plan.python) if plan.index_url else None  # not for existing builds
    return Runner(make_sandbox(getattr(args, "sandbox", None), hide=[cache.root], cuda=cuda,
                               python=Path(found) if found else None))


def _issue_named(target: str) -> dict[str, object]:
    """Where a bisection's reproducer was read from, for the report's rerun command: the
    issue, or the file as a path that works from any folder (an issue body's `.md`, whose
    script was written to a temporary folder; a script in another folder)."""
    reference = issue_reference(target or "")
    comment = comment_reference(target or "")
    if reference is None:
        return {"target": str(Path(target).absolute())} if target else {}
    named = {"repo": reference[0], "issue": reference[1]}
    return {**named, "comment": comment} if comment else named


def worker_slots(args: argparse.Namespace, plan: Plan) -> list[dict[str, str]]:
    """`--gpus` as one slot a worker; the triage and the commit tier after the bisection run
    in them too, so no run of the reproducer sees GPUs it was not given."""
    processes = getattr(args, "processes", None) if plan.needs_cuda else None
    return gpu_slots(getattr(args, "gpus", None) or (), processes,
                     plan.script.read_text(encoding="utf-8") if plan.needs_cuda else None)


def run_bisection(args: argparse.Namespace, plan: Plan) -> BisectResult:
    with bisection(args, plan) as (result, checkpoints):
        checkpoints.done()
        return result


@contextlib.contextmanager
def bisection(args: argparse.Namespace, plan: Plan
              ) -> Iterator[tuple[BisectResult, resume.Checkpoints]]:
    """The nightly bisection's answer, and its checkpoints: the bisection is held (no other
    process runs it) for the block, where what comes after the answer runs until `done`."""
    processes = getattr(args, "processes", None)
    slots = worker_slots(args, plan)
    workers = len(slots) or args.workers
    progress = TerminalProgress(len(plan.builds), workers)
    cache = make_cache(args, plan)
    runner = make_runner(args, plan, cache)
    prober = Prober(cache, runner, plan.script, probe_options(args), progress,
                    outage_stops=True)
    start = BisectResult(
        builds=plan.builds,
        bisection=Bisection(len(plan.builds), 0 if plan.good_given else None, args.fix),
        probes=(), script_name=plan.script.name, index_url=plan.index_url,
        options={"python": plan.python, "variant": plan.variant, "repeat": args.repeat,
                 "timeout": args.timeout, "match": args.match, "metric": args.metric,
                 "on_timeout": args.on_timeout, "missing_api": args.missing_api,
                 "reported_platform": getattr(args, "reported_platform", None),
                 "threshold": args.threshold, "needs_cuda": plan.needs_cuda,
                 "with": list(args.with_packages) or None,
                 "env": dict(getattr(args, "issue_env", None) or {}) or None,
                 "processes": processes,
                 # The script's argv: part of the bisection's id, so no verdict of a run
                 # with other arguments is taken for one of this (resume's memo).
                 "script_args": list(getattr(args, "script_args", None) or ()) or None,
                 # Only where there is one: a key more would change every bisection's id.
                 **({"args_refused": args.args_refused}
                    if getattr(args, "args_refused", None) else {}),
                 "good_said": getattr(args, "good_said", None),
                 # Where a bad end given passes, the report names the builds after it.
                 "bad_given": args.bad, "newer_builds": plan.newer_builds,
                 # The rerun command then installs the same.
                 "packages_index": args.packages_index,
                 "no_default_packages": args.no_default_packages or None,
                 "checks": checks_itself(plan.script.read_text(encoding="utf-8", errors="replace")),
                 **_issue_named(getattr(args, "target", ""))},
    )
    start, checkpoints = resume.Checkpoints.attach(args, plan, start, prober)
    progress.done_before = checkpoints.probes_done
    try:  # an interrupted one is free to be resumed by another process at once
        try:
            answer = _run_checkpointed(args, plan, start, checkpoints, prober, cache,
                                       progress, workers, slots)
        except IndexOutage as exc:
            # Its probes are checkpointed; a resume tries the builds it could not fetch again.
            raise resume.Unfinished(f"{exc}. The bisection stops unfinished: "
                                    f"`{args.resume_command}` continues it once the index "
                                    "answers") from exc
        yield answer, checkpoints
    finally:
        checkpoints.release()


def _run_checkpointed(args: argparse.Namespace, plan: Plan, start: BisectResult,
                      checkpoints: resume.Checkpoints, prober: Prober, cache: EnvironmentCache,
                      progress: TerminalProgress, workers: int,
                      slots: Sequence[Mapping[str, str]]) -> BisectResult:
    if checkpoints.answered:  # killed after its answer: only what comes after it is left
        return checkpoints.finish(start)
    # Nothing is installed for a script its Python cannot compile (given interpreters are
    # each their own Python: their first probe says it).
    blocker = (syntax_problem(plan.script, plan.python) if plan.index_url else None) \
        or preflight(prober, plan, slots)
    if blocker is not None:
        return checkpoints.cannot_test(start, blocker)
    source = plan.index_url or "the given interpreters"
    progress("message", text=f"bisecting {len(plan.builds)} builds of {source} "
             f"({plan.builds[0].version} .. {plan.builds[-1].version}) with {plan.script}")
    if slots and not plan.needs_cuda:
        progress("message", text=f"--gpus: the reproducer does not use CUDA (give --needs-cuda "
                 f"yes if it does), so the GPUs only set how many probes run at once: {workers}")
    def run_over(state: BisectResult) -> BisectResult:
        checkpoints.widen(state.builds)  # a resumed run goes on over the same builds
        ahead = Prefetcher(cache, state.builds) if getattr(args, "prefetch", True) else None
        engine = Engine(state.builds, prober, workers, progress, checkpoint=checkpoints.save,
                        prefetch=ahead, slots=slots,
                        held=checkpoints.beyond(state, prober.judgement_of))
        return engine.run(state)

    selection = Selection(python_tag(plan.python), variant=plan.variant, channel=args.channel)
    result = search_further_back(run_over(start), selection, run_over,
                                 say=lambda text: progress("message", text=text))
    return checkpoints.finish(result)


def write_reports(args: argparse.Namespace, result: BisectResult,
                  tier: CommitTier | None = None,
                  triage: TriageOutcome | None = None) -> dict[Path, str]:
    """Each report that is asked for; one that cannot be written (a disk filled during the
    bisection) does not keep the other from being written. Returns why, by report."""
    failed: dict[Path, str] = {}
    if args.json:
        extra: dict[str, object] = {"triage": triage.to_dict()} if triage else {}
        if tier:
            extra["commit_tier"] = commit_summary(tier)
        _write(args.json, json.dumps({**result.to_dict(), **extra}, indent=2) + "\n", failed)
    if args.markdown:
        # The commit tier lists the commits between the nightlies (on main, each tested): the
        # triage's own range (the nightly branch's two commits) would say it a second time.
        tiered = tier is not None and bool(tier.candidates)
        sections = [(render_triage_markdown(triage.triage) if tiered else triage.markdown())
                    if triage else "", render_commit_section(tier) if tier else ""]
        extra_text = "\n\n".join(section for section in sections if section)
        # The tier's section links main's compare view: the nightly-branch one is not needed.
        on_main = tier is not None and bool(tier.good_main) and tier.good_main != tier.bad_main
        _write(args.markdown, render_markdown(result, extra=extra_text, limit=None,
                                              compare_line=not on_main, stopped=True), failed)
    return failed


def _write(path: Path, text: str, failed: dict[Path, str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        failed[path] = str(exc.strerror or exc)


def bisect_main(args: argparse.Namespace) -> int:
    plan = resume.stored_plan(args) or plan_from_args(args)
    try:
        return _bisect(args, plan)
    finally:
        plan.discard()


def _bisect(args: argparse.Namespace, plan: Plan) -> int:
    with bisection(args, plan) as (result, checkpoints):
        code = _after_the_answer(args, plan, result)
        checkpoints.done()  # a kill before this continues from the answer
        return code


def _after_the_answer(args: argparse.Namespace, plan: Plan, result: BisectResult) -> int:
    # The answer first, on the terminal and in the reports: a kill during the triage or the
    # commit tier (minutes to hours) leaves it there. They rewrite the reports with theirs.
    print(render_terminal(result), flush=True)
    write_reports(args, result)  # what it cannot write is said at the end
    triage, tier, shown = None, None, False
    try:
        result, triage = after_bisect(args, plan, result)
        shown = True
        if triage is not None:
            print("\n" + triage.terminal())
        tier = commit_tier.after_nightlies(args, result, make_cache(args, plan),
                                           probe_options(args),
                                           args.cache_dir or default_cache_dir(), plan.script,
                                           make_runner(args, plan, make_cache(args, plan)),
                                           worker_slots(args, plan))
    except KeyboardInterrupt:
        # The bisection is finished and checkpointed as such: its answer is not lost to an
        # interrupted triage or commit tier (nothing is left to resume).
        _report_paths(args, result, tier, triage)
        stage = "commit tier" if shown else "triage"
        print(f"bisect-bot: interrupted during the {stage}; the bisection's answer above is "
              f"complete and in the reports, without the {stage}", file=sys.stderr)
        return 130
    _report_paths(args, result, tier, triage)
    return result.exit_status


def _report_paths(args: argparse.Namespace, result: BisectResult, tier: CommitTier | None,
                  triage: TriageOutcome | None) -> None:
    failed = write_reports(args, result, tier, triage)
    # Absolute: `resume` writes them from the first run's folder, which need not be this one.
    for label, path in (("JSON", args.json), ("Markdown", args.markdown)):
        if path and path not in failed:
            print(f"{label} report: {path.absolute()}")
    if failed:
        raise UserError("; ".join(f"cannot write the report {path.absolute()} ({why})"
                                  for path, why in failed.items()))
