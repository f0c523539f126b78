"""`bisect-bot suite check`, `sweep`, `sweep-plan` and `sweep-merge`: arguments and handlers."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from bot.adapters.environments import DEFAULT_PACKAGES, EnvironmentCache, require_uv
from bot.adapters.history import History, default_db_path, unusable
from bot.adapters.locks import file_lock, try_lock
from bot.adapters.runner import Runner
from bot.adapters.sandbox import make_sandbox
from bot.adapters.wheel_index import WheelIndex
from bot.core.builds import Build, Selection, page_offers, select_builds
from bot.core.config import PYPI_INDEX
from bot.core.errors import UserError
from bot.core.suite import Case, Requires, issue_number, parse_shard, shard
from bot.jobs.github_common import write_json
from bot.jobs.local import default_cache_dir, python_tag, resolve_index
from bot.jobs.progress import TerminalProgress
from bot.jobs.sweep import Sweeper
from bot.jobs.sweep_filer import Filer, IssueTracker
from bot.jobs.sweep_probe import load_suite, suite_files
from bot.jobs.sweep_text import summary_table
from bot.jobs.triage_commits import GITHUB_REPO, PytorchCommits

CPU_INDEX = "https://download.pytorch.org/whl/nightly/cpu"
CUDA_INDEX = "https://download.pytorch.org/whl/nightly/cu130"


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="a folder of reproducers, e.g. repro_suites/")


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    add_check_arguments(parser)
    parser.add_argument("--shards", type=int, default=1, help="shards per runner kind")
    parser.add_argument("--cpu-runner", default="ubuntu-latest", help="runs-on of CPU shards")
    parser.add_argument("--cuda-runner", default="linux-gpu", help="runs-on of CUDA shards")
    parser.add_argument("--nightly", help="latest or a VERSION: resolved here once, to the "
                        "newest nightly every shard's index has, and given to each shard (a "
                        "shard resolving `latest` itself may meet a nightly published since)")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="the shards' Python, whose builds --nightly looks for")
    parser.add_argument("--cpu-index", default=CPU_INDEX, help=f"default {CPU_INDEX}")
    parser.add_argument("--cuda-index", default=CUDA_INDEX, help=f"default {CUDA_INDEX}")


def _db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, default=None,
                        help=f"history database (default {default_db_path()})")
    parser.add_argument("--github-repo", metavar="OWNER/NAME", type=_repository,
                        help="file and update issues there (needs GITHUB_TOKEN)")


def _repository(text: str) -> str:
    """OWNER/NAME as GitHub spells them: anything else reached GitHub as a wrong path."""
    if not re.fullmatch(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+", text):
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME, e.g. pytorch/pytorch, got "
                                         f"{text!r}")
    return text


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    add_check_arguments(parser)
    parser.add_argument("--index", default=CPU_INDEX, help=f"nightly index (default {CPU_INDEX})")
    parser.add_argument("--variant", help="cpu, cu130... (default: the index's)")
    parser.add_argument("--nightly", default="latest", help="latest or an exact VERSION")
    parser.add_argument("--shard", default="1/1", help="I/N: run every N-th case from the I-th")
    parser.add_argument("--kind", choices=["all", "cpu", "cuda"], default="all",
                        help="only the cases that require this (default all)")
    parser.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                        help="Python X.Y of the environments (default: this interpreter's, "
                        "%(default)s)")
    parser.add_argument("--workers", type=int, default=1, help="probes side by side in bisection")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="environments and uv cache (default ~/.cache/torch-bisect-bot)")
    parser.add_argument("--cache-budget-gb", type=float, default=60.0,
                        help="disk budget of the environments (default 60)")
    parser.add_argument("--packages-index", default=PYPI_INDEX, metavar="URL",
                        help="where what a case imports comes from when torch's index lacks it "
                        f"(default {PYPI_INDEX}; '' for torch's index alone)")
    parser.add_argument("--no-default-packages", action="store_true",
                        help="do not add setuptools and numpy to every environment")
    parser.add_argument("--sandbox", choices=["none", "namespace", "docker"], default=None,
                        help="how the cases are confined, as a bisection's reproducer is "
                        "(default: namespace on Linux; none is unsafe)")
    parser.add_argument("--export", type=Path, help="write this sweep's rows here as JSON "
                        "(written again after each case: a sweep killed keeps what it did)")
    parser.add_argument("--deadline-minutes", type=_minutes, metavar="MINUTES",
                        help="begin no case after MINUTES from the start, and stop a "
                        "bisection going then (bisected again by a later sweep): the cases "
                        "left are untested, for lack of time, and the sweep fails (set it "
                        "below the job's time limit, so that what was done is still uploaded)")
    _db_argument(parser)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not 0 <= days < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more, got {text!r}")
    return days


def _minutes(text: str) -> float:
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not 0 < minutes < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of minutes over 0, got {text!r}")
    return minutes


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("exports", type=Path, nargs="*", help="JSON files from `sweep --export`")
    parser.add_argument("--keep-days", type=_days, metavar="DAYS",
                        help="after filing, forget runs recorded more than DAYS ago, but each "
                        "case's newest passing and failing build (what the next sweep reads), "
                        "and compact the file (default: keep everything)")
    parser.add_argument("--suite", type=Path, metavar="DIR",
                        help="the suite the exports swept (e.g. repro_suites/): an open issue "
                        "whose case is no longer in it is told so, once; a case's fix is "
                        "commented on the issue its `issue` links only when this suite's case "
                        "links it (the history alone could name any issue)")
    _db_argument(parser)


def _valid_cases(root: Path) -> tuple[list[Case], list[str]]:
    """The suite's valid cases; the invalid ones are said on stderr (and make the command fail
    when it ends), without keeping every other case from running that night."""
    cases, errors = load_suite(root)
    if errors:
        print(f"bisect-bot: {len(errors)} invalid case(s) left out (`bisect-bot suite check "
              f"{root}` checks them):\n" + "\n".join(errors), file=sys.stderr)
    return cases, errors


def check_main(args: argparse.Namespace) -> int:
    cases, errors = load_suite(args.dir)
    for error in errors:
        print(error, file=sys.stderr)
    cuda = sum(case.meta.requires is Requires.CUDA for case in cases)
    print(f"{len(cases)} valid case(s) ({len(cases) - cuda} cpu, {cuda} cuda), "
          f"{len(errors)} error(s) in {args.dir}")
    return 1 if errors else 0


def plan_matrix(cases: list[Case], shards: int, runners: dict[str, str],
                indexes: dict[str, str] | None = None) -> dict[str, Any]:
    include = []
    chosen = {"cpu": CPU_INDEX, "cuda": CUDA_INDEX, **(indexes or {})}
    for kind, index in chosen.items():
        count = sum(case.meta.requires.value == kind for case in cases)
        for number in range(1, min(shards, count) + 1):
            total = min(shards, count)
            include.append({"kind": kind, "runs_on": runners[kind], "index": index,
                            "shard": f"{number}/{total}", "name": f"{kind}-{number}-of-{total}"})
    return {"include": include}


def plan_main(args: argparse.Namespace) -> int:
    if args.shards < 1:
        raise UserError("--shards must be at least 1")
    matrix = plan_matrix(_valid_cases(args.dir)[0], args.shards,
                         {"cpu": args.cpu_runner, "cuda": args.cuda_runner},
                         {"cpu": args.cpu_index, "cuda": args.cuda_index})
    if args.nightly and matrix["include"]:
        nightly = common_nightly({entry["index"] for entry in matrix["include"]},
                                 args.nightly, args.python)
        for entry in matrix["include"]:
            entry["nightly"] = nightly
    print(json.dumps(matrix, separators=(",", ":")))
    return 0


def common_nightly(indexes: set[str], nightly: str, python: str) -> str:
    """The nightly (public version, e.g. 2.13.0.dev20260521) that every shard sweeps: the
    newest that each index has for `python`, or `nightly` when each has it."""
    held: dict[str, set[Version]] = {}
    for index in sorted(indexes):
        index_url, variant = resolve_index(index, None)
        links = WheelIndex(index_url).project_links("torch")
        builds = select_builds(links, Selection(python_tag(python), variant=variant))
        held[index_url] = {Version(Version(build.version).public) for build in builds}
    if nightly != "latest":
        try:
            wanted = Version(Version(nightly).public)
        except InvalidVersion as exc:
            raise UserError(f"--nightly {nightly}: not a version (or 'latest')") from exc
        lacking = [url for url, versions in held.items() if wanted not in versions]
        if lacking:
            raise UserError(f"--nightly {nightly}: not on {', '.join(lacking)} for Python "
                            f"{python}")
        return str(wanted)
    common = set.intersection(*held.values())
    if not common:
        raise UserError(f"no nightly for Python {python} is on every shard's index "
                        f"({', '.join(held)})")
    return str(max(common))


def _builds_up_to(args: argparse.Namespace) -> tuple[str, str | None, list[Build]]:
    index_url, variant = resolve_index(args.index, args.variant)
    links = WheelIndex(index_url).project_links("torch")
    builds = select_builds(links, Selection(python_tag(args.python), variant=variant))
    if not builds:
        raise UserError(f"no torch builds for Python {args.python} on {index_url}: "
                        f"{page_offers(links)}")
    if args.nightly == "latest":
        return index_url, variant, builds
    try:
        wanted = Version(args.nightly)
    except InvalidVersion as exc:
        raise UserError(f"--nightly {args.nightly}: not a version (or 'latest')") from exc
    for number, build in enumerate(builds):
        version = Version(build.version)
        if version == wanted or (not wanted.local and version.public == wanted.public):
            return index_url, variant, builds[: number + 1]
    raise UserError(f"--nightly {args.nightly}: no such build on {index_url}")


def make_tracker(repo: str | None) -> IssueTracker | None:
    """The real GitHub tracker, built only when asked for and possible; None says why."""
    if not repo:
        print("filing disabled: no --github-repo given")
        return None
    if not os.environ.get("GITHUB_TOKEN"):
        print("filing disabled: GITHUB_TOKEN is not set")
        return None
    try:
        from bot.jobs.sweep_github import GitHubTracker
    except ImportError as exc:
        print(f"filing disabled: the GitHub adapter is not available ({exc})")
        return None
    return GitHubTracker.connect(repo)


def _publish(text: str) -> None:
    print(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(text + "\n")


TrackerFactory = Callable[[str | None], IssueTracker | None]


def _tracker_errors() -> tuple[type[BaseException], ...]:
    """What GitHub's client raises when a request fails (an HTTP error, the network)."""
    try:
        from github import GithubException
        from requests import RequestException
    except ImportError:
        return ()
    return GithubException, RequestException


def filing_lock(history: History) -> Path:
    """The lock a filing of `history` holds, beside its file."""
    return history.path.with_name(history.path.name + ".filing.lock")


def linked_issues(cases: list[Case], repo: str | None) -> dict[str, int]:
    """The issue each case links (its `issue`) in `repo`, by case id."""
    return {case.case_id: number for case in cases
            if (number := issue_number(case.meta.issue, repo)) is not None}


def _file(history: History, repo: str | None, factory: TrackerFactory,
          linked: dict[str, int] | None = None) -> int:
    """Acts on the pending findings, one filing of a history at a time: two at once (a CPU
    and a CUDA sweep of one box ending together) each filed the same findings, in issues of
    their own and in each other's."""
    lock = filing_lock(history)
    held = try_lock(lock)
    if held is None:
        print(f"waiting for another filing of {history.path} to end (it holds {lock})",
              flush=True)
        with file_lock(lock):
            return _file_held(history, repo, factory, linked)
    try:
        return _file_held(history, repo, factory, linked)
    finally:
        held.close()


def _file_held(history: History, repo: str | None, factory: TrackerFactory,
               linked: dict[str, int] | None) -> int:
    """Acts on the pending findings; 1 when GitHub refused, with what is left kept."""
    pending = len(history.pending_findings())
    owed = history.owes_github()  # what a filing cut short left to write
    tracker = factory(repo) if pending or owed else None
    if tracker is None:
        if pending or owed:
            print(f"{pending} finding(s) kept in the history for a later `sweep-merge`"
                  + (", and issue edits or comments a filing left to make" if owed else ""))
        return 0
    client = getattr(tracker, "client", None)  # GitHub's: it reads pytorch/pytorch too
    commits = (PytorchCommits(lambda: client.for_repo(GITHUB_REPO)) if client is not None
               else None)
    filer = Filer(history, tracker, repo, commits=commits, linked=linked)
    try:
        filer.file_all()
    except _tracker_errors() as exc:
        left = len(history.pending_findings())
        still = " (and the issue edits and comments still owed)" if history.owes_github() else ""
        status = getattr(exc, "status", None)
        hint = (" (a 403 or 404 here means the token lacks `issues: write` on the repository)"
                if status in (403, 404) else
                " (GitHub failed for a while: nothing to change)" if isinstance(status, int)
                and status >= 500 else "")
        print(f"bisect-bot: filing stopped at a GitHub error: {exc}\n{left} finding(s) stay in "
              f"the history{still}; the next `sweep-merge` acts on them{hint}", file=sys.stderr)
        return 1
    if filer.foreign:
        _publish(f"**{len(filer.foreign)} issue(s) the history names are not the bot's own: "
                 "left untouched** (was the history uploaded by another workflow?)\n\n"
                 + "\n".join(f"- {line}" for line in filer.foreign) + "\n")
    if filer.refused:
        print(f"bisect-bot: GitHub refused {len(filer.refused)} finding(s) for good, set "
              "aside so that the others were filed:\n  " + "\n  ".join(filer.refused),
              file=sys.stderr)
        return 1
    return 1 if filer.foreign else 0


@contextlib.contextmanager
def _history(path: Path | None) -> Iterator[History]:
    """The history database, its failures said as what to do about them."""
    where = path or default_db_path()
    try:
        with History(where) as history:
            yield history
    except sqlite3.DatabaseError as exc:  # a lock that outlasted the wait, mid-sweep
        raise UserError(unusable(where, exc)) from exc


def _exporter(path: Path | None, history: History) -> Callable[[str], None]:
    """What writes the sweep's export after each case (nothing without `--export`)."""
    def export(sweep_id: str) -> None:
        if path is not None:
            try:
                write_json(path, history.export([sweep_id]))
            except OSError as exc:
                raise UserError(f"--export {path}: cannot write it ({exc})") from exc
    return export


def sweep_main(args: argparse.Namespace, factory: TrackerFactory = make_tracker) -> int:
    started = time.monotonic()
    index, count = parse_shard(args.shard)
    if args.workers < 1:  # as `bisect` says: else the first bisection ended in a traceback
        raise UserError("--workers must be at least 1")
    if not args.cache_budget_gb > 0:
        raise UserError("--cache-budget-gb must be positive")
    cases, invalid = _valid_cases(args.dir)
    linked = linked_issues(cases, args.github_repo)
    if args.kind != "all":
        cases = [case for case in cases if case.meta.requires.value == args.kind]
    cases = shard(cases, index, count)
    if args.export is not None and args.export.is_dir():
        raise UserError(f"--export {args.export}: a folder; name the file to write, e.g. "
                        f"{args.export / 'export.json'}")
    index_url, _, builds = _builds_up_to(args)
    require_uv()  # every case's probe installs its build: without uv each would be SKIP
    packages = () if args.no_default_packages else DEFAULT_PACKAGES
    cache = EnvironmentCache(root=args.cache_dir or default_cache_dir(), python=args.python,
                             index_url=index_url, extra_packages=packages,
                             packages_index=args.packages_index or None,
                             budget_bytes=int(args.cache_budget_gb * 2**30))
    # A stored case came from an issue: confined as a bisection's reproducer is, with no
    # network and nothing of the host to write (the shard's history, whose export is filed).
    cuda = any(case.meta.requires is Requires.CUDA for case in cases)
    runner = Runner(make_sandbox(args.sandbox, hide=[cache.root], cuda=cuda))
    with _history(args.db) as history:
        sweeper = Sweeper(history, cache, runner, builds, index_url, args.python,
                          args.workers, args.shard, TerminalProgress(len(builds), args.workers))
        print(f"sweeping {len(cases)} case(s) of {args.dir} (shard {args.shard}) on nightly "
              f"{builds[-1].version}")
        deadline = (started + args.deadline_minutes * 60
                    if args.deadline_minutes is not None else None)
        sweep_id, rows = sweeper.run(cases, deadline=deadline,
                                     after_case=_exporter(args.export, history))
        _publish(summary_table(builds[-1].version, rows))
        print(f"{sweeper.computed} reproducer run(s) made, {sweeper.reused} result(s) "
              "taken from the history" + (f", {sweeper.uninstalled} probe(s) of a build that "
                                          "did not install or import" if sweeper.uninstalled
                                          else ""))
        if args.export:
            print(f"exported this sweep to {args.export}")
        failed = _file(history, args.github_repo, factory, linked)
    problems = [f"{len(invalid)} invalid case(s) were not run (see above)"] if invalid else []
    if rows and len(sweeper.not_installed) == len(rows):
        problems.append(f"no case could be tested on nightly {builds[-1].version}: each "
                        f"failed to install or import it ({sweeper.not_installed[0]}), so the "
                        "nightly itself is broken here")
    if sweeper.out_of_time:
        problems.append(f"the deadline of {args.deadline_minutes:g} minute(s) passed with "
                        f"{len(sweeper.out_of_time)} case(s) not begun or not finished, "
                        f"untested for lack of time ({_some(sweeper.out_of_time)}): a case that "
                        "hangs until its timeout on this nightly, or too many cases for one "
                        "shard (more --shards)")
    if sweeper.unfinished:
        problems.append(f"the deadline of {args.deadline_minutes:g} minute(s) passed while "
                        f"bisecting: {len(sweeper.unfinished)} case(s) whose bisection the "
                        f"deadline stopped ({_some(sweeper.unfinished)}) are not filed; "
                        "a later sweep bisects them again")
    if sweeper.stopped is not None:
        done = [row.case_id for row in rows if row.case_id not in sweeper.not_done]
        problems.append(f"{sweeper.stopped}. The sweep stopped before finishing: "
                        f"{len(done)} of {len(rows)} case(s) done"
                        + (f" ({_some(done)})" if done else "")
                        + f", {len(sweeper.not_done)} not ({_some(sweeper.not_done)}), with no "
                        f"result of nightly {builds[-1].version} recorded for them; run the "
                        "sweep again once the index answers (the next one runs them anyway)")
    if args.kind == "cuda" and sweeper.without_gpu:
        problems.append(f"this CUDA shard ran where torch sees no usable GPU, so "
                        f"{len(sweeper.without_gpu)} CUDA case(s) were not tested (see the "
                        "notes above): check the runner's driver and its GPU label")
    for problem in problems:
        print(f"bisect-bot: error: {problem}", file=sys.stderr)
    return 1 if problems or failed else 0


def _some(case_ids: list[str], most: int = 5) -> str:
    """The first case ids of a list that may hold a whole shard's."""
    return ", ".join(case_ids[:most]) + (", ..." if len(case_ids) > most else "")


def _shards_missing(exports: list[dict[str, Any]]) -> list[str]:
    """`I/N of nightly V` for each shard of a merged nightly whose export is not among them."""
    seen: dict[tuple[str, int], set[int]] = {}
    for exported in exports:
        for sweep in exported.get("sweeps") or ():
            try:
                number, count = parse_shard(str(sweep.get("shard") or "1/1"))
            except UserError:
                continue
            seen.setdefault((str(sweep.get("nightly")), count), set()).add(number)
    return [f"{n}/{count} of nightly {nightly}" for (nightly, count), numbers in sorted(
        seen.items()) for n in range(1, count + 1) if n not in numbers]


def _removed_cases(history: History, root: Path, renamed: set[str]) -> None:
    """Owes each open issue whose case is no longer in the suite (by its id, its text for one
    renamed, or `renamed`: the ids a case says it had) a comment saying so, once: a deleted
    case's issue said 'still failing' for ever, as no sweep runs it."""
    if not root.is_dir():
        raise UserError(f"--suite {root}: not a folder of reproducers")
    suite = suite_files(root)
    texts = set(suite.values())
    nightly = history.newest_nightly() or "-"
    for number, case_id, case_hash in history.open_issue_cases():
        if case_id in suite or case_id in renamed or (case_hash is not None and
                                                      case_hash in texts):
            continue
        if history.add_notice(number, case_id, "removed", nightly):
            if len(history.issue_cases(number)) > 1:  # its row, and the count, say so
                history.mark_stale(number)
            print(f"{case_id}: no longer in {root}; issue #{number} is to be told")


def merge_main(args: argparse.Namespace, factory: TrackerFactory = make_tracker) -> int:
    """Folds every readable export in, says which are not and which shards never reported, and
    still files what came in (one lost upload does not hold back the other shards' issues)."""
    problems, merged = [], []
    cases = _valid_cases(args.suite)[0] if args.suite is not None else None
    linked = linked_issues(cases, args.github_repo) if cases is not None else None
    renamed = {old for case in cases or () for old in case.meta.renamed_from}
    with _history(args.db) as history:
        for path in args.exports:
            try:
                exported = json.loads(path.read_text(encoding="utf-8"))
                added = history.merge(exported)
            except (OSError, ValueError) as exc:
                problems.append(f"{path}: not merged, not a sweep export: {exc}")
                continue
            merged.append(exported)
            print(f"{path}: merged {added} row(s)")
        problems += [f"shard {shard} sent no export: its cases are not in this history"
                     for shard in _shards_missing(merged)]
        for problem in problems:
            print(f"bisect-bot: error: {problem}", file=sys.stderr)
        if args.suite is not None:
            _removed_cases(history, args.suite, renamed)
        failed = _file(history, args.github_repo, factory, linked)
        if args.keep_days is not None:
            gone = history.prune(args.keep_days)
            print(f"forgot what was recorded over {args.keep_days:g} day(s) ago: "
                  + ", ".join(f"{n} {table} row(s)" for table, n in gone.items())
                  + f"; the history is now {history.path.stat().st_size / 2**20:.1f} MiB")
    return 1 if problems or failed else 0
