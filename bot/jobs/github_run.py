"""The run job: bisect what plan.json says on this (GPU) runner; needs no GitHub token at all."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.adapters.environments import (
    DEFAULT_PACKAGES,
    EnvironmentCache,
    IndexOutage,
    syntax_problem,
)
from bot.adapters.runner import Runner
from bot.adapters.sandbox import make_sandbox
from bot.adapters.wheel_index import WheelIndex
from bot.core.bisection import Bisection
from bot.core.builds import Selection
from bot.core.errors import UserError
from bot.core.issue_code import checks_itself
from bot.core.job_plan import JobPlan, unusable_variant
from bot.core.results import BisectResult
from bot.core.triage import triage_target
from bot.core.verdicts import Policy, Verdict
from bot.jobs import resume
from bot.jobs.engine import Engine, ProbeOptions, Prober
from bot.jobs.github_common import load_plan, log, read_outcome, write_json
from bot.jobs.github_plan import builds_in_window
from bot.jobs.gpu import gpu_blocker
from bot.jobs.local import default_cache_dir, python_tag
from bot.jobs.prefetch import Prefetcher
from bot.jobs.progress import TerminalProgress
from bot.jobs.triage_job import TriageOutcome, TriageRunner
from bot.jobs.window import search_further_back


def run_job(args: argparse.Namespace) -> int:
    """Write outcome.json: the BisectResult, or {"error", "state"} when nothing could be run."""
    try:
        plan = testable(load_plan(args.plan), args.index)
    except CannotTest as problem:
        return write_cannot_test(args.out, problem)
    with tempfile.TemporaryDirectory(prefix="bisect-bot-run-") as folder:
        script = Path(folder) / "repro.py"
        script.write_text(plan.reproducer.script, encoding="utf-8")
        try:
            result, prober = _bisect(plan, script, args)
        except IndexOutage as outage:
            return write_stopped(args.out, outage)
        triage = None if args.no_triage else triage_of(result, prober, script)
    write_json(args.out, with_triage(result, triage))
    log(f"outcome: {result.summary()['status']}; written to {args.out}")
    return 0


def write_stopped(out: Path, outage: IndexOutage) -> int:
    """The index stopped answering: the builds left are not SKIP (which made the answer
    "ambiguous", a false word about the nightlies), and the outcome is the last checkpoint,
    with why it stopped, so that the report says how to go on; nothing tested yet, a failure."""
    log(f"stopped: {outage}")
    write_json(out, stopped_outcome(read_outcome(out), str(outage)))
    return 0


def stopped_outcome(partial: object, why: str) -> dict[str, Any]:
    """outcome.json of a bisection stopped by an outage, from what it had tested (`partial`,
    a result's dict, or None when nothing was). Shared by `run` and `round outcome`."""
    if not isinstance(partial, dict) or "error" in partial:
        return {"error": f"{why}; nothing was tested. Start the bisection again once the "
                         "index answers."}
    return {**partial, "stopped": why}


def with_triage(result: BisectResult, triage: TriageOutcome | None) -> dict[str, Any]:
    """outcome.json for the report job: the result, and the triage when there is one."""
    extra = {"triage": triage.to_dict(), "triage_markdown": triage.markdown()} if triage else {}
    return {**result.to_dict(), **extra}


class CannotTest(UserError):
    """Nothing of the plan can be tested; the report job says so on the issue."""


def testable(plan: JobPlan, index: str | None = None) -> JobPlan:
    """The plan with its builds listed (from `index` when given) and checked before anything
    runs; CannotTest says why not. Shared by `run` and `round from-plan`."""
    if index:
        plan = replace(plan, settings=replace(plan.settings, index_url=index), builds=None)
    try:
        plan = _with_builds(plan)
        _preflight(plan)
    except UserError as problem:
        raise CannotTest(str(problem)) from None
    if not plan.builds:
        raise CannotTest("no builds in the window")
    with tempfile.TemporaryDirectory(prefix="tbb-syntax-") as folder:
        script = Path(folder) / "repro.py"
        script.write_text(plan.reproducer.script, encoding="utf-8")
        said = syntax_problem(script, plan.settings.python)
    if said is not None:  # nothing is installed for a script its Python cannot compile
        raise CannotTest(said)
    return plan


def write_cannot_test(out: Path, problem: UserError) -> int:
    log(f"cannot test: {problem}")
    write_json(out, {"error": str(problem), "state": "cannot_test"})
    return 0


def initial_state(plan: JobPlan, options: dict[str, Any] | None = None) -> BisectResult:
    """The empty bisection of a testable plan's builds."""
    builds = plan.builds or ()
    chosen = plan.settings
    return BisectResult(
        builds=builds,
        bisection=Bisection(len(builds), 0 if plan.good_given else None, chosen.find_fix),
        probes=(), script_name="repro.py", index_url=chosen.index_url,
        options={**_options(plan), **(options or {})},
    )


def state_from_plan(plan: JobPlan, no_default_packages: bool = False) -> BisectResult:
    """The initial state of a bisection spread over rounds of runners (`round from-plan`),
    holding what `bisect-bot probe` needs to install and judge exactly as `run` would."""
    chosen = plan.settings
    return initial_state(plan, {
        "on_timeout": chosen.on_timeout, "metric": chosen.metric, "threshold": chosen.threshold,
        "needs_cuda": plan.reproducer.needs_cuda, "with_packages": [],
        "imports": list(plan.packages), "packages_index": chosen.packages_index,
        "issue_env": dict(plan.reproducer.env), "processes": plan.reproducer.processes,
        "no_default_packages": no_default_packages, "script": plan.reproducer.script,
    })


def _with_builds(plan: JobPlan) -> JobPlan:
    if plan.builds is not None:
        return plan
    index = WheelIndex(plan.settings.index_url)
    found = builds_in_window(index, index.project_links("torch"), plan.settings)
    return replace(plan, builds=found.builds, good_given=found.good_given,
                   newer_builds=found.newer)


def _preflight(plan: JobPlan) -> None:
    # A CUDA reproducer on a build without CUDA is "cannot test", before bisecting.
    unusable_variant(plan.reproducer.needs_cuda, plan.settings.variant)


def _bisect(plan: JobPlan, script: Path, args: argparse.Namespace
            ) -> tuple[BisectResult, Prober]:
    builds = plan.builds or ()
    chosen = plan.settings
    cache = EnvironmentCache(
        root=args.cache_dir or default_cache_dir(), python=chosen.python,
        index_url=chosen.index_url,
        extra_packages=() if args.no_default_packages else DEFAULT_PACKAGES,
        issue_packages=plan.packages, packages_index=chosen.packages_index or None,
        derive=args.derive,
    )
    progress = TerminalProgress(len(builds), args.workers)
    policy = Policy(on_timeout=Verdict(chosen.on_timeout), match=chosen.match,
                    metric=chosen.metric, threshold=chosen.threshold)
    options = ProbeOptions(timeout_s=float(chosen.timeout_s), repeat=chosen.repeat, policy=policy,
                           env=dict(plan.reproducer.env),
                           processes=plan.reproducer.processes, args=plan.reproducer.args)
    cuda = plan.reproducer.needs_cuda or chosen.variant.startswith("cu")
    # The reproducer is a stranger's code: confined, no network, the cache hidden
    # (docs/security.md).
    runner = Runner(make_sandbox(args.sandbox, hide=[cache.root], cuda=cuda))
    # An index that stops answering stops the run (`write_stopped`), no build SKIP for it.
    prober = Prober(cache, runner, script, options, progress, outage_stops=True)
    start = initial_state(plan)
    if plan.reproducer.needs_cuda and builds:
        blocker = gpu_blocker(prober, builds[-1])
        if blocker is not None:
            return replace(start, cannot_test=blocker), prober
    if getattr(args, "resume", None):
        start = resume.from_partial_outcome(args.resume, start)

    def run_over(state: BisectResult) -> BisectResult:
        ahead = Prefetcher(cache, state.builds) if getattr(args, "prefetch", True) else None
        engine = Engine(state.builds, prober, args.workers, progress,
                        checkpoint=lambda partial: write_json(args.out, partial.to_dict()),
                        prefetch=ahead)
        return engine.run(state)

    selection = Selection(python_tag(chosen.python), variant=chosen.variant)
    return search_further_back(run_over(start), selection, run_over, say=log), prober


def triage_of(result: BisectResult, prober: Prober, script: Path) -> TriageOutcome | None:
    """The first bad build rerun with precision emulation and each backend; None
    when there is nothing to triage or its environment cannot be made. Shared by `run` and
    `round triage`."""
    index = triage_target(result)
    if index is None:
        return None
    with prober.environment(result.builds[index]) as (env, failure, _):
        if env is None or failure is not None:
            return None
        runner = TriageRunner(prober.runner, script, prober.options.timeout_s,
                              prober.options.policy, bisector_timeout_s=900.0,
                              progress=prober.progress, env=prober.options.env,
                              processes=prober.options.processes, repeat=prober.options.repeat,
                              args=prober.options.args)
        return runner.run(env, index, result.builds[index].version, result.probe_for(index),
                          result.signature)


def _options(plan: JobPlan) -> dict[str, Any]:
    chosen = plan.settings
    return {"python": chosen.python, "variant": chosen.variant, "repeat": chosen.repeat,
            "timeout": chosen.timeout_s, "match": chosen.match, "metric": chosen.metric,
            "threshold": chosen.threshold, "with": list(chosen.packages) or None,
            "env": dict(plan.reproducer.env) or None,
            "processes": plan.reproducer.processes,
            "script_args": list(plan.reproducer.args) or None,
            "args_refused": plan.reproducer.args_refused,
            "issue": plan.issue, "repo": plan.repo,
            "comment": plan.reproducer_comment or None,
            "good_said": chosen.good_said,
            # A bad end given (by a command or the form), and the nightlies after it: where
            # it passes, that is no "not reproduced" (`report.headline`).
            "bad_given": chosen.bad, "newer_builds": plan.newer_builds,
            "on_timeout": chosen.on_timeout,
            "reported_platform": plan.reproducer.reported_platform,
            "checks": checks_itself(plan.reproducer.script)}
