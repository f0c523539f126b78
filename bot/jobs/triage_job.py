"""Triage of one build: run the variants (precision, backend ladder, bisector), conclude."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from bot.adapters.environments import (
    DEFAULT_PACKAGES,
    Environment,
    EnvironmentCache,
    ProvisionError,
)
from bot.adapters.runner import Runner, torchrun
from bot.adapters.sandbox import make_sandbox
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Status
from bot.core.bisector_result import parse_bisector_output
from bot.core.builds import Selection, find_build, page_offers, select_builds
from bot.core.config import PYPI_INDEX
from bot.core.errors import UserError
from bot.core.issue_facts import given_env
from bot.core.results import BisectResult, ProbeRecord
from bot.core.safe_markdown import visible
from bot.core.suspects import CommitRange, clues_from, operators_in, render_range_markdown
from bot.core.triage import (
    LADDER,
    LADDER_PASSED_VAR,
    SHIMMED,
    Triage,
    Variant,
    conclude,
    ladder_passed,
    render_triage_markdown,
    render_triage_terminal,
    triage_target,
    variant_env,
)
from bot.core.verdicts import Policy, RunResult, Stage, Verdict, against_signature, judge
from bot.jobs.engine import Progress, _quiet, combine_runs
from bot.jobs.progress import TerminalProgress
from bot.jobs.targets import (
    Target,
    add_args_argument,
    add_env_argument,
    add_processes_argument,
    interpreter_with_torch,
    load_target,
    script_args,
)
from bot.jobs.triage_commits import CommitSource, commit_range, github_source

SHIM_PREFIX = "tbb-triage-"

# Run inside the build's interpreter: does it have the compiler bisector, with its `run`
# command (torch/_inductor/compiler_bisector.py; older builds have only start/good/bad/end)?
BISECTOR_CHECK = """
import importlib.util, sys
try:
    spec = importlib.util.find_spec("torch._inductor.compiler_bisector")
except Exception:
    spec = None
text = open(spec.origin).read() if spec and spec.origin else ""
sys.exit(0 if 'command == "run"' in text else 3)
"""

# The script the runner runs for the bisector variant: it writes the reproducer next to
# itself (the run's private directory) and hands it to `compiler_bisector run`, whose every
# step runs `python <reproducer>` with TORCH_COMPILE_BACKEND set, which the shim obeys (and
# answers itself for a backend the ladder saw pass: TBB_LADDER_PASSED).
BISECTOR_DRIVER = """
import os, runpy, sys
path = os.path.join(os.getcwd(), "tbb_reproducer.py")
with open(path, "w") as handle:
    handle.write({source!r})
sys.argv = ["compiler_bisector", "run", sys.executable, path, *sys.argv[1:]]
runpy.run_module("torch._inductor.compiler_bisector", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class TriageOutcome:
    """A triage, its records (ProbeRecords with variant_env) and the commit range, if known."""

    triage: Triage
    records: tuple[ProbeRecord, ...]
    commits: CommitRange | None = None

    def markdown(self) -> str:
        parts = [render_triage_markdown(self.triage)]
        if self.commits is not None:
            parts.append(render_range_markdown(self.commits))
        return "\n\n".join(parts)

    def terminal(self) -> str:
        text = render_triage_terminal(self.triage)
        if self.commits is not None and self.commits.url:
            text += f"\n  compare: {self.commits.url}"
            for suspect in self.commits.suspects:
                text += f"\n  suspect {suspect.commit.sha[:10]} {suspect.commit.title[:70]}"
        return visible(text)

    def to_dict(self) -> dict[str, Any]:
        return {"triage": self.triage.to_dict(),
                "commits": self.commits.to_dict() if self.commits else None,
                "records": [r.to_dict() for r in self.records]}


def make_shim_dir() -> Path:
    """A private directory holding only the shim's sitecustomize.py; the caller removes it."""
    shim = Path(tempfile.mkdtemp(prefix=SHIM_PREFIX))
    source = resources.files("bot.jobs.triage_shim").joinpath("sitecustomize.py")
    (shim / "sitecustomize.py").write_text(source.read_text())
    # The sandbox runs the reproducer as an unprivileged uid of its own: it must read the shim.
    shim.chmod(0o755)
    (shim / "sitecustomize.py").chmod(0o644)
    return shim


def has_bisector_run(env: Environment) -> bool:
    """Whether the build's compiler_bisector has its `run` command. An environment of the
    cache is read, not imported: importing torch outside the sandbox would run whatever the
    reproducer's packages hook into it. Other interpreters (`--python`) are asked."""
    for source in env.path.glob("lib/python*/site-packages/torch/_inductor/compiler_bisector.py"):
        return 'command == "run"' in source.read_text(errors="replace")
    if env.info.get("issue_packages"):
        return False
    try:
        done = subprocess.run([str(env.python), "-c", BISECTOR_CHECK], capture_output=True,
                              timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass
class TriageRunner:
    """Runs the triage variants of one build and records each like a probe."""

    runner: Runner
    script: Path
    timeout_s: float = 600.0
    policy: Policy = Policy()
    bisector: bool = True
    bisector_timeout_s: float = 1800.0
    progress: Progress = _quiet
    # Static shapes runs always, whatever the script says of shapes: Dynamo makes a size
    # dynamic by itself when a second size comes (automatic dynamic shapes), so a script that
    # never names `dynamic` fails this way as often, and one run costs as a rung of the
    # ladder does (the bisector alone runs the reproducer many times over).
    variants: Sequence[Variant] = field(
        default_factory=lambda: (Variant.EMULATE_PRECISION, Variant.STATIC_SHAPES, *LADDER))
    env: Mapping[str, str] = field(default_factory=dict)  # the issue's, in every run
    processes: str | None = None  # torchrun's --nproc_per_node, as the issue runs it
    args: tuple[str, ...] = ()  # the script's own arguments, as the issue runs it
    # Runs of each variant, as the bisection's probes had: runs that disagree are flaky
    # (SKIP), so no conclusion rests on one run of a flaky failure.
    repeat: int = 1

    def run(self, env: Environment, index: int, version: str,
            baseline: ProbeRecord | None = None, signature: str | None = None) -> TriageOutcome:
        """Triage `env`; without a `baseline` record the unmodified reproducer runs first."""
        shim = make_shim_dir()
        try:
            records = [baseline] if baseline else [self._run(env, index, version, shim,
                                                             Variant.BASELINE, None)]
            signature = signature or records[0].info.get("signature")
            if records[0].verdict is Verdict.BAD:
                for variant in self.variants:
                    records.append(self._run(env, index, version, shim, variant, signature))
                # The bisector reruns the script in one process: not for one run by torchrun.
                if self.bisector and self.processes is None and has_bisector_run(env):
                    records.append(self._run_bisector(env, index, version, shim,
                                                      ladder_passed(records)))
        finally:
            shutil.rmtree(shim, ignore_errors=True)
        triage = conclude(version, records, signature,
                          self.script.read_text(encoding="utf-8", errors="replace"))
        return TriageOutcome(triage, tuple(r for r in records if r.variant_env))

    def _execute(self, env: Environment, script: Path, extra: dict[str, str],
                 timeout_s: float) -> RunResult:
        if env.info.get("import_error"):
            return RunResult(Stage.IMPORT, error=str(env.info["import_error"]))
        return self.runner.run(env.python, script, timeout_s=timeout_s,
                               extra_env={**self.env, **extra},
                               readonly=[env.path, Path(extra.get("PYTHONPATH", env.path))],
                               launcher=torchrun(self.processes), args=self.args)

    def _run(self, env: Environment, index: int, version: str, shim: Path, variant: Variant,
             signature: str | None) -> ProbeRecord:
        extra = variant_env(variant)
        if variant in SHIMMED:
            extra["PYTHONPATH"] = str(shim)
        self.progress("message", text=f"triage {version}: {variant.value}")
        results = [self._execute(env, self.script, extra, self.timeout_s)
                   for _ in range(max(1, self.repeat))]
        judged = combine_runs([against_signature(judge(result, self.policy), signature)
                               for result in results])
        return ProbeRecord(
            index=index, version=version, verdict=judged.verdict, reason=judged.reason,
            seconds=sum(result.seconds for result in results), result=results[-1],
            info={**env.info, "signature": judged.signature}, variant_env=extra,
            runs=len(results),
        )

    def _run_bisector(self, env: Environment, index: int, version: str, shim: Path,
                      passed: Sequence[str] = ()) -> ProbeRecord:
        """compiler_bisector on the reproducer; its step for a backend in `passed` (the ladder
        ran it and it passed) is answered by the shim without running the reproducer again."""
        extra = {**variant_env(Variant.BISECTOR), "PYTHONPATH": str(shim)}
        if passed:
            extra[LADDER_PASSED_VAR] = ",".join(passed)
        driver = shim / "tbb_bisector_driver.py"
        driver.write_text(BISECTOR_DRIVER.format(source=self.script.read_text()))
        self.progress("message", text=f"triage {version}: compiler_bisector (many runs)")
        result = self._execute(env, driver, extra, self.bisector_timeout_s)
        found = parse_bisector_output(result.output)
        if found is None:
            verdict, reason = Verdict.SKIP, judge(result, self.policy).reason + ": no result"
        else:
            verdict = Verdict.GOOD if found.backend is None else Verdict.BAD
            reason = ("no issue found" if found.backend is None
                      else f"{found.backend} / {found.subsystem or '?'}")
        return ProbeRecord(index=index, version=version, verdict=verdict, reason=reason,
                           seconds=result.seconds, result=result, info=dict(env.info),
                           variant_env=extra)


def add_triage_flags(parser: argparse.ArgumentParser, *, in_bisect: bool) -> None:
    """Flags shared by `bisect` (which triages its first bad build) and `triage`."""
    if in_bisect:
        parser.add_argument("--no-triage", action="store_true", help="skip the triage of the "
                            "first bad build (precision, backend ladder, compiler_bisector)")
    parser.add_argument("--no-bisector", action="store_true",
                        help="do not run torch._inductor.compiler_bisector in the triage")
    parser.add_argument("--bisector-timeout", type=float, default=1800.0,
                        help="seconds the compiler_bisector may take (default 1800)")
    if in_bisect:  # a triage of one build has no two nightlies to compare
        parser.add_argument("--github", action="store_true", help="look up the commits between "
                            "the two nightlies on api.github.com (token: GITHUB_TOKEN, optional)")


def add_triage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="the reproducer: a .py file, an issue body (.md) "
                        "or an issue reference")
    parser.add_argument("--sandbox", choices=["none", "namespace", "docker"], default=None,
                        help="how the runs are confined (default: namespace on Linux)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--python", type=Path, metavar="INTERPRETER",
                       help="the path of an existing interpreter with torch, used as it is (no "
                       "environment is made); for a Python X.Y, --build with --python-version")
    where.add_argument("--build", help="a torch version on --index, installed in a cached "
                       "environment")
    parser.add_argument("--index", help="index URL of one variant (with --build)")
    parser.add_argument("--variant", help="cpu, cu130, ... (default: the index's)")
    parser.add_argument("--python-version", default=f"{sys.version_info[0]}.{sys.version_info[1]}",
                        help="Python X.Y of the environment made for --build")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each variant; runs that disagree are flaky (default 1)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="environment cache")
    parser.add_argument("--no-default-packages", action="store_true",
                        help="do not add setuptools and numpy to the environment (--build)")
    parser.add_argument("--packages-index", default=PYPI_INDEX, metavar="URL",
                        help="where what the reproducer imports comes from when torch's index "
                        "lacks it (--build; as for bisect)")
    parser.add_argument("--with", dest="with_packages", action="append", default=[],
                        metavar="PKG", help="a package for the environment of --build "
                        "(repeatable), installed instead of what the reproducer imports")
    # What a failure is, as the bisection judged it: a triage of a metric, a match or a hang
    # regression judges its runs the same way, or it triages a different question.
    parser.add_argument("--on-timeout", choices=["bad", "skip"], default="skip",
                        help="verdict of a run that times out (default skip; bad for a hang)")
    parser.add_argument("--match", help="regex a failing run's output must match to be BAD "
                        "(as for bisect)")
    parser.add_argument("--metric", help="regex whose first group is a number printed by the "
                        "reproducer; BAD above --threshold (as for bisect)")
    parser.add_argument("--threshold", type=float, help="the metric's largest good value")
    parser.add_argument("--json", type=Path, help="write the triage as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the triage section here")
    add_processes_argument(parser)
    add_env_argument(parser)
    add_args_argument(parser)
    add_triage_flags(parser, in_bisect=False)


# `bisect-bot triage`'s exit status, as bisect's: 0 triaged, 4 the build passes (nothing
# reproduced), 6 the reproducer could not be tested on it.
TRIAGE_EXIT = {"passes": 4, "untestable": 6}
TRIAGE_EXIT_HELP = ("exit status: 0 triaged; 4 the build passes (nothing to triage); 6 the "
                    "reproducer could not be tested on it; 2 bad usage; 130 interrupted; 1 a "
                    "crash (a bug of the bot).")


@contextlib.contextmanager
def _environment(args: argparse.Namespace, imports: Sequence[str] = ()
                 ) -> Iterator[tuple[Environment, str]]:
    """The interpreter given, as it is, or the cached environment of --build with what the
    reproducer imports (`imports`), kept from eviction for the block."""
    from bot.jobs import local

    if args.python is not None:
        if getattr(args, "with_packages", None):
            raise UserError("--with installs into the environment of --build; an interpreter "
                            "given with --python is used as it is")
        python, info = interpreter_with_torch(Path(args.python))
        yield Environment(python.parent.parent, python, info), str(info["torch"])
        return
    if not args.index:
        raise UserError("--build needs --index, the index URL of its variant")
    index_url, variant = local.resolve_index(args.index, args.variant)
    links = WheelIndex(index_url).project_links("torch")
    builds = select_builds(links, Selection(local.python_tag(args.python_version),
                                            variant=variant), pinned=[args.build])
    if not builds:
        raise UserError(f"no torch builds on {index_url} for Python {args.python_version}: "
                        f"{page_offers(links)}")
    try:
        build = find_build(builds, args.build)
    except UserError as error:
        raise UserError(f"--build {args.build}: {error} ({index_url}, Python "
                        f"{args.python_version})") from None
    if build.wheel.yanked is not None:  # kept only when named exactly (select_builds)
        why = f" ({build.wheel.yanked})" if build.wheel.yanked else ""
        print(f"--build {args.build}: {build.version} is yanked on the index{why}; triaging "
              "it all the same, as it was named exactly", file=sys.stderr)
    wanted = tuple(getattr(args, "with_packages", None) or ())
    cache = EnvironmentCache(root=args.cache_dir or local.default_cache_dir(),
                             python=args.python_version, index_url=index_url,
                             extra_packages=(() if args.no_default_packages
                                             else DEFAULT_PACKAGES) + wanted,
                             issue_packages=() if wanted else imports,
                             packages_index=args.packages_index or None)
    with contextlib.ExitStack() as stack:
        try:
            env = stack.enter_context(cache.using(build))
        except ProvisionError as exc:
            raise UserError(f"cannot install {build.version}: {exc}") from exc
        yield env, build.version


def write_outputs(args: argparse.Namespace, outcome: TriageOutcome) -> None:
    if args.json:
        args.json.write_text(json.dumps(outcome.to_dict(), indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(outcome.markdown() + "\n")


def triage_main(args: argparse.Namespace) -> int:
    """`bisect-bot triage`: the triage alone, on one interpreter or one build of an index.
    A reproducer taken from an issue goes with its folder when the triage ends (a bisection
    keeps its own, for `resume`)."""
    target = load_target(args.target)  # a script, an issue body, or an issue reference
    try:
        return _triage(args, target)
    finally:
        target.discard()


def _triage(args: argparse.Namespace, target: Target) -> int:
    with _environment(args, target.imports) as (env, version):
        return _triage_in(args, target, env, version)


def _triage_in(args: argparse.Namespace, target: Target, env: Environment, version: str) -> int:
    script = target.script
    from bot.jobs import local

    # A build's environment sits in the cache, which the reproducer must not see beyond it
    # (the other environments, uv's cache), as in a bisection.
    hidden = [] if args.python is not None else [args.cache_dir or local.default_cache_dir()]
    confined = Runner(make_sandbox(getattr(args, "sandbox", None), hide=hidden,
                                   cuda=target.needs_cuda))
    if args.repeat < 1:
        raise UserError("--repeat must be at least 1")
    policy = triage_policy(args)
    runner = TriageRunner(confined, script.resolve(), args.timeout, policy, repeat=args.repeat,
                          bisector=not args.no_bisector,
                          bisector_timeout_s=args.bisector_timeout,
                          progress=TerminalProgress(1),
                          env={**(dict(target.reproducer.env) if target.reproducer else {}),
                               **dict(given_env(args.env))},
                          processes=args.processes or (target.reproducer.processes
                                                       if target.reproducer else None),
                          args=script_args(args, target.reproducer))
    outcome = runner.run(env, 0, version)
    print(outcome.terminal())
    write_outputs(args, outcome)
    kinds = {finding.kind for finding in outcome.triage.findings}
    return next((code for kind, code in TRIAGE_EXIT.items() if kind in kinds), 0)


def triage_policy(args: argparse.Namespace) -> Policy:
    """The verdict policy of `bisect-bot triage`'s flags, checked as bisect checks its own."""
    from bot.jobs import local

    local.check_policy_flags(args)
    return Policy(on_timeout=Verdict(args.on_timeout), match=args.match, metric=args.metric,
                  threshold=args.threshold)


def after_bisect(args: argparse.Namespace, plan: Any, result: BisectResult,
                 source: CommitSource | None = None
                 ) -> tuple[BisectResult, TriageOutcome | None]:
    """Triage the first bad build of a finished bisection; the result gains its records."""
    index = triage_target(result)
    if index is None or getattr(args, "no_triage", False):
        return result, None
    from bot.jobs import local

    build = plan.builds[index]
    cache = local.make_cache(args, plan)
    options = local.probe_options(args)
    # One run at a time, on the first worker's GPUs (`--gpus`), as a probe of the bisection.
    slot = next(iter(local.worker_slots(args, plan)), {})
    runner = TriageRunner(local.make_runner(args, plan, cache), plan.script, args.timeout,
                          options.policy, bisector=not args.no_bisector,
                          bisector_timeout_s=args.bisector_timeout,
                          progress=TerminalProgress(1), env={**options.env, **slot},
                          processes=options.processes, repeat=options.repeat,
                          args=options.args)
    try:
        with cache.using(build) as env:
            outcome = runner.run(env, index, build.version, result.probe_for(index),
                                 result.signature)
    except ProvisionError:
        return result, None
    if result.outcome is not None and result.outcome.status is Status.FOUND:
        outcome = replace(outcome, commits=_commits(args, plan, result, outcome, source))
    return replace(result, probes=result.probes + outcome.records), outcome


def _commits(args: argparse.Namespace, plan: Any, result: BisectResult,
             outcome: TriageOutcome, source: CommitSource | None) -> CommitRange:
    assert result.outcome is not None
    ends = sorted((result.outcome.before, result.outcome.after), key=lambda i: i or 0)
    good, bad = (result.probe_for(i) for i in ends)
    triage = outcome.triage
    clues = clues_from(operators_in(Path(plan.script).read_text()), triage.subsystem,
                       triage.precision, triage.bisector.subsystem if triage.bisector else None)
    source = source or (github_source() if args.github else None)
    return replace(commit_range(source, good.info.get("git_version") if good else None,
                                bad.info.get("git_version") if bad else None, clues),
                   find_fix=result.bisection.find_fix)
