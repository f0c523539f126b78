"""`bisect-bot round start|plan|merge` and `probe`: one bisection spread over rounds of runners."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.adapters.actions import append_summary, write_outputs
from bot.adapters.environments import IndexOutage, require_uv, syntax_problem
from bot.core.bisection import Bisection
from bot.core.builds import Selection
from bot.core.errors import UserError
from bot.core.issue_code import checks_itself
from bot.core.report import render_markdown, render_terminal
from bot.core.results import BisectResult, ProbeRecord
from bot.core.triage import triage_target
from bot.core.verdicts import Judgement, Verdict
from bot.jobs import local
from bot.jobs.engine import Prober, awaited_bad_end, fold_round, waits_for_the_signature
from bot.jobs.github_common import load_plan, log, write_json
from bot.jobs.github_run import (
    CannotTest,
    state_from_plan,
    stopped_outcome,
    testable,
    triage_of,
    with_triage,
    write_cannot_test,
)
from bot.jobs.gpu import gpu_blocker
from bot.jobs.window import step_back

# The `bisect` flags a probe needs to run and judge a build the same way on every runner.
_PROBE_FLAGS = ("python", "variant", "repeat", "timeout", "on_timeout", "missing_api", "match",
                "metric", "threshold", "needs_cuda", "with_packages", "no_default_packages",
                "packages_index", "issue_env", "processes", "script_args")
VERDICT_KIND = "torch-bisect-bot/verdict"
# `bisect` flags that `round start` takes (it shares their parser) but that act elsewhere in
# rounds, and where: given to `start`, they would be ignored without a word.
_ELSEWHERE = {
    "workers": "one probe runs a runner: `round plan --width N`",
    "gpus": "one probe runs a runner: `round plan --width N`",
    "prefetch": "a probe makes only its own build",
    "sandbox": "`bisect-bot probe --sandbox`",
    "json": "`round outcome STATE --out FILE`",
    "markdown": "`round report STATE --markdown FILE`",
    "db": "the state file is the checkpoint",
    "cache_dir": "each runner's own: `bisect-bot probe --cache-dir`",
    "cache_budget_gb": "each runner's own: `bisect-bot probe --cache-budget-gb`",
    "no_triage": "the workflow's rounds-triage job (`round triage`)",
    "no_bisector": "the workflow's rounds-triage job (`round triage`)",
    "bisector_timeout": "the workflow's rounds-triage job (`round triage`)",
    "no_commit_tier": "rounds stop at the first bad nightly",
    "upstream": "rounds stop at the first bad nightly",
    "github": "rounds stop at the first bad nightly",
}


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rounds = commands.add_parser("round", help="a bisection as rounds of one-probe jobs",
                                 description="Spread one bisection over runners: start writes "
                                 "the state, plan names the next round's builds, merge folds "
                                 "their verdicts (from `bisect-bot probe`) into the state.")
    actions = rounds.add_subparsers(dest="round_command", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="resolve the window, write the initial state")
    local.add_bisect_arguments(start)
    start.set_defaults(elsewhere={action.dest: (action.option_strings[0], action.default)
                                  for action in start._actions if action.dest in _ELSEWHERE})
    for action in start._actions:  # parsed, to say where they belong (start_main); not shown
        if action.dest in _ELSEWHERE:
            action.help = argparse.SUPPRESS
    start.add_argument("--state", type=Path, required=True, help="the state file to write")
    start.set_defaults(handler=start_main)
    from_plan = actions.add_parser(
        "from-plan", help="the initial state of an issue's bisection (plan.json of `plan`)",
        description="What `start` does, for the GitHub workflow: the window, reproducer and "
        "options come from the plan job's plan.json. Uses no GitHub token.")
    from_plan.add_argument("plan", type=Path, help="plan.json from the plan job")
    from_plan.add_argument("--state", type=Path, required=True, help="the state file to write")
    from_plan.add_argument("--outcome", type=Path, required=True,
                           help="where the outcome goes when nothing can be tested (for the "
                           "report job), e.g. a CUDA reproducer with the cpu variant")
    from_plan.add_argument("--index", help="index URL of one variant, overriding the plan's")
    from_plan.add_argument("--no-default-packages", action="store_true",
                           help="do not add setuptools and numpy to every environment")
    from_plan.set_defaults(handler=from_plan_main)
    outcome = actions.add_parser("outcome", help="the state as the report job's outcome.json")
    outcome.add_argument("state", type=Path)
    outcome.add_argument("--out", type=Path, required=True)
    outcome.set_defaults(handler=outcome_main)
    plan = actions.add_parser("plan", help="print the matrix of builds to probe next")
    plan.add_argument("state", type=Path)
    plan.add_argument("--width", type=int, default=1, help="probes (runners) in the round")
    plan.add_argument("--github-output", action="store_true",
                      help="also write `matrix`, `done` and `triage` (whether there is a "
                      "first bad build to triage) to $GITHUB_OUTPUT")
    plan.set_defaults(handler=plan_main)
    merge = actions.add_parser("merge", help="fold verdict files into the state")
    merge.add_argument("state", type=Path)
    merge.add_argument("verdicts", type=Path, nargs="*",
                       help="files from `bisect-bot probe`, or folders holding them (as "
                       "download-artifact lays artifacts out); none when every probe job of "
                       "the round was lost, which the merge then names")
    merge.add_argument("--out", type=Path, help="where the new state goes (default: STATE)")
    merge.set_defaults(handler=merge_main)
    report = actions.add_parser("report", help="print the state's report so far")
    report.add_argument("state", type=Path)
    report.add_argument("--markdown", type=Path, help="also write the Markdown report here")
    report.add_argument("--github-summary", action="store_true",
                        help="also append the Markdown report to $GITHUB_STEP_SUMMARY")
    report.set_defaults(handler=report_main)
    probe = commands.add_parser("probe", help="test one build of a round state on this runner",
                                description="Provision, run and judge one build of the state, "
                                "exactly as `bisect` would, and write its verdict file.")
    probe.add_argument("state", type=Path)
    probe.add_argument("--build", required=True, help="the build's version, from `round plan`")
    probe.add_argument("--out", type=Path, required=True, help="the verdict file to write")
    _runner_arguments(probe)
    probe.set_defaults(handler=probe_main)
    triage = actions.add_parser(
        "triage", help="triage the first bad build of a finished state (on a GPU runner)",
        description="What `run` does after bisecting, for a bisection spread over runners: "
        "the first bad build is rerun with precision emulation and each backend. Writes the "
        "report job's outcome.json: the state, with the triage when there is one.")
    triage.add_argument("state", type=Path)
    triage.add_argument("--out", type=Path, required=True, help="the outcome.json to write")
    triage.add_argument("--github-summary", action="store_true",
                        help="also append the triage to $GITHUB_STEP_SUMMARY")
    _runner_arguments(triage)
    triage.set_defaults(handler=triage_main)


def _runner_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--cache-budget-gb", type=float, default=60.0)
    parser.add_argument("--sandbox", choices=["none", "namespace", "docker"], default=None)


def load_state(path: Path) -> BisectResult:
    try:
        state = BisectResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a bisection state ({exc})") from exc
    problem = _not_a_round_state(state)
    if problem is not None:
        # A `bisect --json` report, a state of another version or one edited by hand: probed,
        # it ran an empty script (every build GOOD); planned, it said nothing was left.
        raise UserError(f"{path}: not a round state, as `round start` and `round from-plan` "
                        f"write ({problem})")
    return state


_NONE = type(None)
# The options a probe installs, runs and judges by (and the merges' bookkeeping), as `round
# start` and `round from-plan` write them: name, the types it may have, whether it must be set.
_OPTIONS: dict[str, tuple[tuple[type, ...], bool]] = {
    "script": ((str,), True), "state_id": ((str,), True), "python": ((str,), True),
    "repeat": ((int,), True), "timeout": ((int, float), True), "on_timeout": ((str,), True),
    "missing_api": ((str,), False), "variant": ((str,), False), "match": ((str,), False),
    "metric": ((str,), False), "threshold": ((int, float), False),
    "needs_cuda": ((bool,), False), "no_default_packages": ((bool,), False),
    "with_packages": ((list,), False), "imports": ((list,), False),
    "packages_index": ((str,), False), "issue_env": ((dict,), False),
    "processes": ((str,), False), "planned": ((list,), False), "merged": ((list,), False),
    "blocked": ((dict,), False), "held": ((list,), False), "script_args": ((list,), False),
    "stopped": ((str,), False),
}
_VERDICT_OPTIONS = ("on_timeout", "missing_api")


def _not_a_round_state(state: BisectResult) -> str | None:
    """What a state lacks that `round start` and `from-plan` give it, or None."""
    options = state.options
    if not str(options.get("script") or "").strip():
        return "it holds no reproducer script"
    for name, (types, required) in _OPTIONS.items():
        value = options.get(name)
        if value is None:
            if required:
                return f"its options lack {name}"
            continue
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            return f"its option {name} is {value!r}"
    if not options["state_id"] or options["repeat"] < 1 or options["timeout"] <= 0:
        return "its state_id, repeat or timeout is empty"
    for name in _VERDICT_OPTIONS:
        if options.get(name) is not None and options[name] not in {v.value for v in Verdict}:
            return f"its option {name} is {options[name]!r}"
    for name in ("with_packages", "imports"):
        if not all(isinstance(item, str) for item in options.get(name) or ()):
            return f"its option {name} is {options[name]!r}"
    env = options.get("issue_env") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return f"its option issue_env is {env!r}"
    if not all(isinstance(data, dict) for data in options.get("held") or ()):
        return f"its option held is {options['held']!r}"
    if state.bisection.size != len(state.builds):
        return (f"its bisection is of {state.bisection.size} builds, and it lists "
                f"{len(state.builds)}")
    for probe in state.probes:
        if not 0 <= probe.index < len(state.builds) or (
                state.builds[probe.index].version != probe.version):
            return f"its probe of {probe.version} is not of build {probe.index}"
    return None


def _in_actions(flag: str, variable: str) -> None:
    """The file of a GitHub Actions step that `flag` appends to is named: outside a workflow
    it is not, and the flag is a usage error."""
    if not os.environ.get(variable):
        raise UserError(f"{flag}: {variable} is not set; the flag is for a step of a GitHub "
                        "Actions workflow")


def start_main(args: argparse.Namespace) -> int:
    for dest, (option, default) in args.elsewhere.items():
        if getattr(args, dest) != default:
            raise UserError(f"`round start` does not take {option}: {_ELSEWHERE[dest]}")
    local.file_to_write("--state", args.state)
    plan = local.plan_from_args(args)
    options: dict[str, Any] = {flag: getattr(args, flag) for flag in _PROBE_FLAGS}
    script = plan.script.read_text(encoding="utf-8")
    # As `bisect` and `from-plan` do, before any runner installs a build: every probe of a
    # script its Python cannot compile is SKIP, and rounds of them end in 'cannot test'.
    problem = syntax_problem(plan.script, plan.python) if plan.index_url else None
    plan.discard()  # the state holds the script
    if problem is not None:
        raise UserError(f"cannot test: {problem}; no state written")
    options.update(needs_cuda=plan.needs_cuda, variant=plan.variant, python=plan.python,
                   script=script, checks=checks_itself(script), imports=list(plan.imports),
                   state_id=uuid.uuid4().hex)
    state = BisectResult(
        builds=plan.builds,
        bisection=Bisection(len(plan.builds), 0 if plan.good_given else None, args.fix),
        probes=(), script_name=plan.script.name, index_url=plan.index_url, options=options,
    )
    write_json(args.state, state.to_dict())
    log(f"{len(plan.builds)} builds ({plan.builds[0].version} .. {plan.builds[-1].version}); "
        f"state written to {args.state}")
    return 0


def from_plan_main(args: argparse.Namespace) -> int:
    try:
        plan = testable(load_plan(args.plan), args.index)
    except CannotTest as problem:
        return write_cannot_test(args.outcome, problem)
    local.file_to_write("--state", args.state)
    state = state_from_plan(plan, args.no_default_packages)
    state = replace(state, options={**state.options, "state_id": uuid.uuid4().hex})
    write_json(args.state, state.to_dict())
    log(f"{len(state.builds)} builds ({state.builds[0].version} .. "
        f"{state.builds[-1].version}); state written to {args.state}")
    return 0


def outcome_main(args: argparse.Namespace) -> int:
    """The state is a BisectResult, which is what the report job reads; no triage (the merge
    job has no GPU). The failures a merge holds are listed as `held`, beside `probes`. A
    round stopped by an outage (`merge_verdicts`) gives what `run` gives when one stops it."""
    state = load_state(args.state)
    local.file_to_write("--out", args.out)
    outcome = {**state.to_dict(), "held": held_probes(state)}
    stopped = state.options.get("stopped")
    if stopped:
        outcome = stopped_outcome(outcome if state.probes else None, stopped)
    write_json(args.out, outcome)
    return 0


# "A matrix will generate a maximum of 256 jobs per workflow run" (GitHub's docs, "Running
# variations of jobs in a workflow").
MATRIX_LIMIT = 256


def round_matrix(state: BisectResult, width: int) -> dict[str, list[dict[str, str]]]:
    """The next round as an Actions matrix; empty once the state has an outcome, or once an
    outage has stopped the rounds (`merge_verdicts`)."""
    if width < 1:
        raise UserError("--width must be at least 1")
    if width > MATRIX_LIMIT:  # else Actions refuses the matrix, and the run fails there
        raise UserError(f"--width {width}: a GitHub Actions matrix holds at most "
                        f"{MATRIX_LIMIT} jobs; give at most {MATRIX_LIMIT} runners")
    if state.outcome is not None or state.options.get("stopped"):
        return {"include": []}
    bisection = state.bisection  # failures held back by a merge are not probed again
    held = _indices(state, [data.get("build") for data in state.options.get("held") or ()])
    if bisection.find_fix:
        # Held for an older build's verdict (the oldest failure is the one followed): as
        # failures they would make that older build moot and it would never be planned again.
        return {"include": [{"build": state.builds[i].version}
                            for i in bisection.next_probes(width, running=held)]}
    for index in held:
        bisection = bisection.record(index, Verdict.BAD)
    indices = bisection.next_probes(width)
    return {"include": [{"build": state.builds[i].version} for i in indices]}


def plan_main(args: argparse.Namespace) -> int:
    state = load_state(args.state)
    if args.github_output:
        _in_actions("--github-output", "GITHUB_OUTPUT")
    # Every listed nightly failed and no good end was given: the next round goes on among
    # the older nightlies still on the server, as `bisect` and `run` do.
    if state.failed_back_to_the_oldest:
        selection = Selection(local.python_tag(str(state.options.get("python"))),
                              variant=state.options.get("variant"))
        state, _ = step_back(state, selection, log)
        write_json(args.state, state.to_dict())
    matrix = round_matrix(state, args.width)
    if state.options.get("stopped"):
        log(f"nothing planned: the bisection stopped ({state.options['stopped']})")
    # What this round asks for: a merge then knows which verdicts did not come (lost runners).
    planned = [entry["build"] for entry in matrix["include"]]
    if state.options.get("planned") != planned:
        state = replace(state, options={**state.options, "planned": planned})
        write_json(args.state, state.to_dict())
    text = json.dumps(matrix, separators=(",", ":"))
    print(text)
    if args.github_output:
        done = not matrix["include"]
        # A GPU runner is started for the triage only when there is a first bad build.
        triage = done and triage_target(state) is not None
        write_outputs(os.environ, {"matrix": text, "done": str(done).lower(),
                                   "triage": str(triage).lower()})
    return 0


@contextlib.contextmanager
def _on_this_runner(state: BisectResult, args: argparse.Namespace,
                    outage_stops: bool = False) -> Iterator[Prober]:
    """A prober that installs, runs and judges builds of `state` exactly as `bisect` would,
    with this runner's cache and sandbox; `outage_stops` as Prober's."""
    if state.index_url:  # builds to install: a runner without a usable uv says so, once
        require_uv()
    options = {flag: state.options.get(flag) for flag in _PROBE_FLAGS}
    flags = argparse.Namespace(**options, cache_dir=args.cache_dir, sandbox=args.sandbox,
                               cache_budget_gb=args.cache_budget_gb)
    flags.with_packages = list(flags.with_packages or [])
    with tempfile.TemporaryDirectory(prefix="bisect-bot-probe-") as folder:
        script = Path(folder) / state.script_name
        script.write_text(str(state.options.get("script", "")), encoding="utf-8")
        plan = local.Plan(script, state.index_url, flags.variant, flags.python, state.builds,
                          state.bisection.good_index is not None,
                          needs_cuda=bool(flags.needs_cuda),
                          imports=tuple(state.options.get("imports") or ()))
        cache = local.make_cache(flags, plan)
        yield Prober(cache, local.make_runner(flags, plan, cache), script,
                     local.probe_options(flags), outage_stops=outage_stops)


def _blocker(state: BisectResult, prober: Prober, index: int) -> str | None:
    """Why this runner cannot run a CUDA reproducer on the build (its GPU is not usable)."""
    return gpu_blocker(prober, state.builds[index]) if state.options.get("needs_cuda") else None


def probe_main(args: argparse.Namespace) -> int:
    state = load_state(args.state)
    index = _index_of(state, args.build)
    local.file_to_write("--out", args.out)
    # An index that does not answer says nothing of the build: no verdict (a SKIP kept it
    # from the search for good), only the outage, for the merge (`merge_verdicts`).
    with _on_this_runner(state, args, outage_stops=True) as prober:
        # Which bisection it belongs to, and which verdict it is: a merge takes each once.
        verdict: dict[str, Any] = {"kind": VERDICT_KIND, "build": args.build,
                                   "state": state.options.get("state_id"),
                                   "id": uuid.uuid4().hex, "cannot_test": None}
        try:  # the GPU check installs the build too
            verdict["cannot_test"] = _blocker(state, prober, index)
            if verdict["cannot_test"] is None:
                judgement, record = prober.probe(index, state.builds[index])
                verdict.update(record=record.to_dict(), signature=judgement.signature)
        except IndexOutage as outage:
            verdict["outage"] = str(outage)
    write_json(args.out, verdict)
    if verdict.get("outage"):
        said = f"no verdict: {verdict['outage']}; the merge plans it again"
    else:
        said = verdict["cannot_test"] or verdict["record"]["verdict"]
    if said == Verdict.BAD.value and state.signature is not None:
        said += f" (the merge compares its failure with the bad end's: {state.signature})"
    log(f"{args.build}: {said}")
    return 0


def triage_main(args: argparse.Namespace) -> int:
    """The merge jobs have no GPU, so the triage `run` does after its bisection runs here,
    on one more GPU runner, once the rounds have found the first bad build."""
    state = load_state(args.state)
    local.file_to_write("--out", args.out)
    if args.github_summary:
        _in_actions("--github-summary", "GITHUB_STEP_SUMMARY")
    index = triage_target(state)
    triage = None
    if index is None:
        log(f"nothing to triage: {state.summary()['status']}")
    else:
        with _on_this_runner(state, args) as prober:
            blocker = _blocker(state, prober, index)
            triage = None if blocker else triage_of(state, prober, prober.script)
        why = blocker or "its environment could not be made"
        log(f"triage of {state.builds[index].version}: {'done' if triage else why}")
    write_json(args.out, with_triage(state, triage))
    if triage and args.github_summary:
        append_summary(os.environ, triage.markdown())
    return 0


def _index_of(state: BisectResult, version: str) -> int:
    for index, build in enumerate(state.builds):
        if build.version == version:
            return index
    raise UserError(f"{version}: not a build of this bisection "
                    f"({state.builds[0].version} .. {state.builds[-1].version})")


def read_verdict(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the verdict ({exc})") from exc
    if not isinstance(data, dict) or data.get("kind") != VERDICT_KIND:
        raise UserError(f"{path}: not a verdict file of `bisect-bot probe`")
    return data


def _outcome_of(state: BisectResult, data: dict[str, Any]) -> tuple[Judgement, ProbeRecord]:
    """One verdict file's judgement and record; UserError for one that does not hold."""
    index = _index_of(state, str(data.get("build")))
    try:
        record = ProbeRecord.from_dict({**data["record"], "index": index})
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{data.get('build')}: a damaged verdict ({exc!r})") from exc
    if record.version != data.get("build"):  # merged, it would be another build's verdict
        raise UserError(f"{data.get('build')}: a damaged verdict (its record is of "
                        f"{record.version})")
    signature = data.get("signature")
    return Judgement(record.verdict, record.reason, str(signature) if signature else None,
                     record.metric), record


def _waiting(state: BisectResult, outcomes: Sequence[tuple[Judgement, ProbeRecord]]
             ) -> tuple[list[int], list[int]]:
    """The failures to hold back: while no failure has defined the signature, the bad end's
    (the newest testable build's) defines it. When that build's runner was lost, an older
    failure must not define it in its place (it may be another, older failure); it waits in
    the state, as the engine holds one while a newer probe runs. Looking for the fix, the
    oldest failure is the one followed: a newer one waits while an older build this round
    planned has no verdict. Returned with the builds they wait for."""
    if state.signature is not None:
        return [], []
    if state.bisection.find_fix:
        known = set(state.bisection.verdicts) | {record.index for _, record in outcomes}
        planned = _indices(state, state.options.get("planned") or ())  # by the last plan
        missing = [index for index in planned if index not in known]
        held = [record.index for judgement, record in outcomes
                if waits_for_the_signature(state, record.index, judgement.verdict, missing)]
        return held, [i for i in missing if held and i < max(held)]
    end = awaited_bad_end(state, outcomes)
    if end is None:
        return [], []
    # The engine's rule, with the lost probe of the newest build as the one still running.
    held = [record.index for judgement, record in outcomes
            if waits_for_the_signature(state, record.index, judgement.verdict, [end])]
    return held, [end] if held else []


def _indices(state: BisectResult, versions: Sequence[object]) -> list[int]:
    """The indices of the builds named (a name that is none of them is passed over)."""
    found = []
    for version in versions:
        with contextlib.suppress(UserError):
            found.append(_index_of(state, str(version)))
    return found


def merge_verdicts(state: BisectResult, verdicts: Sequence[dict[str, Any]]
                   ) -> tuple[BisectResult, list[str]]:
    """The state with a round's verdicts folded in, and what was left out and why (each
    left-out build is planned again). A verdict already merged is passed over, so merging a
    round again, or with an earlier round's files, changes nothing.

    A probe that met an index outage has no verdict: its build stays untested and is planned
    again (folded in as SKIP, it was never tried again and could leave the answer ambiguous
    for an index down a minute). When every probe of the round that reported met it, the
    rounds stop, as `run` does (`stopped` in the options; `round outcome` says so)."""
    options = dict(state.options)
    merged_ids = list(options.get("merged") or [])
    blocked = dict(options.get("blocked") or {})
    held = [dict(data) for data in options.get("held") or []]
    notes: list[str] = []
    taken: dict[int, dict[str, Any]] = {}
    blockers: dict[str, str] = {}
    outages: dict[str, str] = {}
    answered = False  # a probe of this round got past the index (a verdict, or no GPU)
    for position, data in enumerate([*held, *verdicts]):
        version = str(data.get("build"))
        if data.get("state") != options.get("state_id"):
            notes.append(f"{version}: a verdict of another bisection (its state "
                         f"{data.get('state')}, this one {options.get('state_id')}); left out")
            continue
        if not isinstance(data.get("id"), (str, type(None))):
            notes.append(f"{version}: a damaged verdict (its id is not text); left out")
            continue
        taken_ids = {other.get("id") for other in taken.values()}
        if data.get("id") is not None and data.get("id") in {*merged_ids, *taken_ids}:
            notes.append(f"{version}: already merged, passed over")
            continue
        try:
            index = _index_of(state, version)
        except UserError as error:
            notes.append(f"{error}; left out")
            continue
        if index in state.bisection.verdicts or index in taken:
            notes.append(f"{version}: already has a verdict; this one is left out")
            continue
        if data.get("outage"):  # says nothing of the build
            outages.setdefault(version, str(data["outage"]))
            if data.get("id") is not None:  # merged again, it is passed over
                merged_ids.append(str(data["id"]))
            continue
        answered = answered or position >= len(held)
        if data.get("cannot_test"):
            blockers[version] = str(data["cannot_test"])
            if data.get("id") is not None:  # merged again, it is passed over, not a second
                merged_ids.append(str(data["id"]))
            continue
        taken[index] = data
    outcomes = []
    for data in taken.values():
        try:
            outcomes.append(_outcome_of(state, data))
        except UserError as error:
            notes.append(f"{error}; left out, planned again")
    skipped_here = []
    planned = set(options.get("planned") or blockers)  # a state from before: as it was
    # No runner of the first round could use its GPU: nothing can be tested. (Lost runners
    # are not ones without a GPU: their builds are planned again.)
    nothing_testable = bool(blockers) and not taken and not state.probes and (
        planned <= set(blockers))
    for version, why in blockers.items():
        index = _index_of(state, version)
        if index in taken:  # another runner's verdict of it came in this merge: that counts
            continue
        if version in blocked:  # a second runner could not use it either: the build's doing
            skipped_here.append((Judgement(Verdict.SKIP, f"cannot test it: {why}"),
                                 ProbeRecord(index, version, Verdict.SKIP,
                                             f"cannot test it: {why}", 0.0)))
        else:
            blocked[version] = why
            again = "" if nothing_testable else "; planned again"
            notes.append(f"{version}: its runner could not use it ({why}){again}")
    stops = bool(outages) and not answered
    for version, why in outages.items():
        if _index_of(state, version) not in taken:  # else another runner's verdict counts
            then = ("the rounds stop here: every probe of the round met the outage; start "
                    "the bisection again once the index answers") if stops else "planned again"
            notes.append(f"{version}: no verdict: {why}; {then}")
    # A build skipped here is known: the failures do not wait for it.
    held_back, awaited = _waiting(state, [*outcomes, *skipped_here])
    waiting = set(held_back)
    ready = [pair for pair in outcomes if pair[1].index not in waiting]
    if waiting:
        notes.append(_held_note(state, len(waiting), awaited, blockers, outages))
    result = fold_round(state, [*ready, *skipped_here])
    merged_ids += [str(taken[record.index]["id"]) for _, record in ready
                   if taken[record.index].get("id") is not None]
    options.update(merged=merged_ids, blocked=blocked,
                   held=[taken[index] for index in sorted(waiting)])
    if stops:
        options["stopped"] = next(iter(outages.values()))
    result = replace(result, options=options)
    if nothing_testable:
        result = replace(result, cannot_test=next(iter(blockers.values())))
    arrived = {str(data.get("build")) for data in [*held, *verdicts]}
    return result, notes + _lost_notes(result, arrived, awaited)


def _lost_notes(result: BisectResult, arrived: set[str], awaited: Sequence[int]) -> list[str]:
    """The builds the last plan asked for that no verdict file names (a probe job that
    failed or was cancelled uploads none), each a line; those the held note names aside."""
    if result.outcome is not None or result.options.get("stopped"):
        return []
    waited = {result.builds[index].version for index in awaited}
    return [f"{version}: planned, but no verdict of it came (its probe job failed or was "
            "cancelled?); `round plan` plans again what the search still needs"
            for index in _indices(result, result.options.get("planned") or ())
            if (version := result.builds[index].version) not in arrived | waited
            and index not in result.bisection.verdicts]


def _held_note(state: BisectResult, count: int, awaited: Sequence[int],
               blockers: dict[str, str], outages: dict[str, str]) -> str:
    """Why failures wait, by what happened to the build(s) they wait for."""
    planned = set(state.options.get("planned") or ())
    said = []
    for index in awaited:
        version = state.builds[index].version
        if version in blockers:
            why = "its runner could not use it"
        elif version in outages:
            why = "its probe met an index outage"
        elif version in planned:
            why = "its verdict did not come: a lost runner"
        elif state.bisection.find_fix:
            why = "not probed yet"
        else:  # the newer builds came untestable (SKIP): it is the newest one left
            why = "not probed yet: the builds newer than it could not be tested"
        said.append(f"{version}: {why}")
    if state.bisection.find_fix:
        whose, follows = "an older build's", "the oldest failure is the one followed"
    else:
        whose, follows = "the newest testable build's", "its failure is the one followed"
    return (f"{count} failure(s) held until {whose} verdict is in ({'; '.join(said)}), since "
            f"{follows}; it is planned next")


def _verdict_files(paths: Sequence[Path], notes: list[str]) -> list[Path]:
    """The files named, a folder standing for the .json files under it: actions/download-
    artifact without merge-multiple, and `gh run download`, put each artifact in a folder."""
    files = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(path.rglob("*.json"))
        if not found:
            notes.append(f"{path}: a folder with no verdict file (*.json) in it; left out")
        files += found
    return files


def merge_main(args: argparse.Namespace) -> int:
    state = load_state(args.state)
    local.file_to_write("--out" if args.out else "STATE", args.out or args.state)
    verdicts: list[dict[str, Any]] = []
    notes: list[str] = []
    files = _verdict_files(args.verdicts, notes)
    if not files:  # the jobs' `verdicts/*.json` matched nothing: the round is named, not skipped
        notes.append("no verdict file came from this round: every probe job failed, was "
                     "cancelled or uploaded nothing")
    for path in files:
        try:
            verdicts.append(read_verdict(path))
        except UserError as error:
            notes.append(f"{error}; left out")
    merged, more = merge_verdicts(state, verdicts)
    write_json(args.out or args.state, merged.to_dict())
    for note in [*notes, *more]:
        log(f"warning: {note}")
    summary = merged.summary()
    status = summary["status"]
    if merged.failed_back_to_the_oldest:
        status = "unfinished (every listed build fails: `round plan` goes on among older ones)"
    elif merged.options.get("stopped"):
        status = f"unfinished (stopped: {merged.options['stopped']})"
    log(f"{len(merged.probes) - len(state.probes)} verdict(s) merged; status: {status}")
    keys = ("last_bad", "first_good") if merged.bisection.find_fix else ("last_good",
                                                                         "first_bad")
    print(json.dumps({"status": status, **{key: summary[key] for key in keys}}))
    return 0


def held_probes(state: BisectResult) -> list[dict[str, Any]]:
    """The failures a merge holds back (they are in no probe yet), each as the JSON report
    lists a probe: version, verdict, reason, seconds, metric."""
    held = []
    for data in state.options.get("held") or ():
        record = data.get("record") if isinstance(data.get("record"), dict) else {}
        held.append({"version": str(data.get("build")), "verdict": record.get("verdict", "?"),
                     "reason": str(record.get("reason", "")), "seconds": record.get("seconds"),
                     "metric": record.get("metric")})
    return held


def _held_lines(state: BisectResult) -> list[str]:
    """The failures a merge holds back, each a line."""
    return [f"held: {probe['version']} {probe['verdict']} ({probe['reason'][:200]}), until "
            "the verdict of the build whose failure is followed is in"
            for probe in held_probes(state)]


def report_main(args: argparse.Namespace) -> int:
    state = load_state(args.state)
    if args.markdown:
        local.file_to_write("--markdown", args.markdown)
    if args.github_summary:
        _in_actions("--github-summary", "GITHUB_STEP_SUMMARY")
    held = _held_lines(state)
    stopped = state.options.get("stopped")
    if stopped:  # by an outage (`merge_verdicts`): no more rounds come
        held.append(f"stopped: {stopped}; start the bisection again once the index answers")
    print("\n".join([render_terminal(state), *held]))
    markdown = render_markdown(state, stopped=bool(stopped))
    if held:  # the merges' own, under the report
        markdown = markdown.rstrip("\n") + "\n\n" + "".join(f"- {line}\n" for line in held)
    if args.markdown:
        args.markdown.write_text(markdown, encoding="utf-8")
    if args.github_summary:
        append_summary(os.environ, markdown)
    return 0
