"""Resuming an interrupted `bisect-bot bisect` from its checkpoints in the SQLite history."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bot.adapters.history import History, default_db_path, failed_install
from bot.adapters.locks import claim, claimant, try_lock
from bot.core.builds import Build
from bot.core.errors import UserError
from bot.core.results import EXIT_STATUS, EXIT_STATUS_HELP, BisectResult, ProbeRecord
from bot.core.verdicts import Stage

if TYPE_CHECKING:
    from bot.core.verdicts import Judgement
    from bot.jobs.engine import Prober
    from bot.jobs.local import Plan

RUNNING, FINISHED = "running", "finished"
# state["resume"]["after"] of a finished bisection whose triage and commit tier have not ended
# yet: a run killed there is continued from its answer, which is not searched for again.
AFTER_PENDING = "pending"
CASE_ID = "local-bisect"  # the history's case_id of checkpoints written by `bisect-bot bisect`


class Unfinished(UserError):
    """The bisection stops before its answer and stays resumable: exit 7, unfinished."""

    exit_status = EXIT_STATUS["unfinished"]


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=Path, default=None,
                        help=f"history database holding the checkpoints (default "
                        f"{default_db_path()})")


def add_resume_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    resume = commands.add_parser("resume", help="continue an interrupted bisection",
                                 description="Continue the newest unfinished `bisect-bot "
                                 "bisect` that no process runs now (or the one given) without "
                                 "rerunning finished probes.",
                                 epilog=EXIT_STATUS_HELP + " (as `bisect-bot bisect`).")
    resume.add_argument("id", nargs="?", help="the bisection's id (default: the newest "
                        "unfinished one that no process runs now)")
    resume.add_argument("--list", action="store_true", help="list unfinished bisections")
    add_db_argument(resume)
    resume.set_defaults(handler=resume_main)


def run_id(plan: Plan, options: dict[str, Any]) -> str:
    """Same script, index, python, variant, window and options: the same bisection."""
    key = {"script": plan.script.read_text(encoding="utf-8", errors="replace"),
           "index": plan.index_url, "python": plan.python, "variant": plan.variant,
           "window": [b.version for b in plan.builds], "good_given": plan.good_given,
           "options": options}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Checkpoints:
    """Saves a bisection after every round and every probe; finds an unfinished one to continue."""

    history: History
    uid: str
    memo_key: str  # the runs of this attempt (and of the attempts it resumes), never older ones
    extra: dict[str, Any]
    running: IO[str] | None = None  # held while this process runs the bisection
    # The answer was found by an earlier run, killed during the triage or the commit tier.
    answered: bool = False
    finished: BisectResult | None = None
    probes_done: int = 0  # by the runs it resumes
    command: str = ""  # that resumes it

    @classmethod
    def open(cls, args: argparse.Namespace, plan: Plan, start: BisectResult, sandbox: str
             ) -> tuple[Checkpoints, BisectResult]:
        db = getattr(args, "db", None) or default_db_path()
        # The sandbox changes verdicts (`none` reaches the network and the host's files) but
        # is not among the report's options: a run under another one is another bisection,
        # whose memo never holds this one's verdicts.
        options = {**start.options, "fix": start.bisection.find_fix, "sandbox": sandbox}
        uid = getattr(args, "resume_uid", None) or run_id(plan, options)
        running = hold_running(db, uid)  # before anything of it is read or written
        args.resume_command = resume_command(uid, getattr(args, "db", None))
        history = History(db)
        extra = {"argv": list(getattr(args, "argv", None) or []), "cwd": os.getcwd(),
                 "script": plan.script.read_text(encoding="utf-8", errors="replace"),
                 "plan": _plan_dict(plan)}
        row = history.bisection_row(uid)
        if row is not None and not _readable(row, db):
            row = None  # saved over by this run's first checkpoint
        if row is not None and _after_pending(row):
            saved = row["state"]
            print(f"resuming {uid}: its answer was found before the triage or the commit tier "
                  "was cut short; taken as it is, what comes after it runs again",
                  file=sys.stderr)
            memo_key = str(saved["resume"].get("memo_key") or uid)
            return cls(history, uid, memo_key, extra, running, answered=True), \
                _result_of(saved, start)
        if row is None or row["status"] != RUNNING:
            _say_unfinished_twins(history, str(extra["script"]), uid, getattr(args, "db", None))
            return cls(history, uid, f"{uid}:{uuid.uuid4().hex[:8]}", extra, running), start
        saved = row["state"]
        resumed = _without_failed_installs(_result_of(saved, start))
        memo_key = str(saved.get("resume", {}).get("memo_key") or uid)
        done = _probes_done(history, uid, saved)
        print(f"resuming {uid}: {_probes(len(done))} already done", file=sys.stderr)
        return cls(history, uid, memo_key, extra, running, probes_done=len(done),
                   command=args.resume_command), resumed

    @classmethod
    def attach(cls, args: argparse.Namespace, plan: Plan, start: BisectResult, prober: Prober
               ) -> tuple[BisectResult, Checkpoints]:
        """Continue a saved run of this bisection if there is one; its probes become the memo."""
        checkpoints, start = cls.open(args, plan, start, prober.runner.sandbox.name)
        # Saved before the first probe: a run killed during its first round is resumable too
        # (its finished probes are in the memo, keyed by this checkpoint's memo key).
        if not checkpoints.answered:
            checkpoints.save(start)
        prober.memo = checkpoints
        return start, checkpoints

    def cannot_test(self, start: BisectResult, blocker: str) -> BisectResult:
        """Finished as "cannot test" (no GPU, a script its Python cannot compile), unless it
        resumes probes done elsewhere (on a GPU node): that bisection is kept resumable, and
        this run stops unfinished rather than turn it into an answer about this machine."""
        if self.probes_done:
            raise Unfinished(f"bisection {self.uid} cannot go on here: {blocker}. Its "
                             f"{_probes(self.probes_done)} done are kept: `{self.command}` "
                             "continues it on a machine that can run it")
        return self.finish(replace(start, cannot_test=blocker))

    def widen(self, builds: tuple[Build, ...]) -> None:
        """The search goes on over `builds` (older nightlies put before the listed ones): a
        resumed run takes them as its plan's."""
        self.extra["plan"] = {**self.extra["plan"], "builds": [b.to_dict() for b in builds]}

    def save(self, result: BisectResult, status: str = RUNNING) -> None:
        state = {**result.to_dict(), "resume": {**self.extra, "memo_key": self.memo_key}}
        self.history.save_bisection(self.uid, None, CASE_ID, self.memo_key, self.uid,
                                    status, state)

    def finish(self, result: BisectResult) -> BisectResult:
        """The answer is found: saved as finished, but with what comes after it (the triage,
        the commit tier, the reports) still to do until `done`. A run killed before then is
        continued from this answer by the same command, or `resume`."""
        self.extra["after"] = AFTER_PENDING
        self.save(result, FINISHED)
        self.finished = result
        return result

    def done(self) -> None:
        """What comes after the answer has ended (or was stopped by the user): the bisection
        is over, and the same command runs it afresh."""
        if self.finished is not None and self.extra.pop("after", None) is not None:
            self.save(self.finished, FINISHED)
        self.release()

    def release(self) -> None:
        """Another process may run (resume) this bisection from now on."""
        if self.running is not None:
            self.running.close()
            self.running = None
        self.history.close()

    def beyond(self, result: BisectResult, judgement_of: Callable[[ProbeRecord], Judgement]
               ) -> list[tuple[Judgement, ProbeRecord]]:
        """The memo's verdicts on builds of `result` that it has none for: probes that ended
        after the last checkpoint (a failure held back for the bad end, a probe killed in the
        moment before its checkpoint). They go to the engine as verdicts already in: left to
        be asked for again, a resumed plan whose splits moved to other builds (an environment
        made by the killed run's prefetch is nearer) never asked, and they were missing from
        the report while counted among the probes done."""
        known = {probe.version for probe in result.probes} | {
            result.builds[index].version for index, _ in result.bisection.results}
        where = {build.version: index for index, build in enumerate(result.builds)}
        found = []
        for version in sorted(self.history.stored_builds(self.memo_key, self.uid) - known):
            record = self.get(version) if version in where else None
            if record is not None:
                record = replace(record, index=where[version])
                found.append((judgement_of(record), record))
        return found

    # The Memo protocol of the Prober: a probe that finished in a round cut short by a kill.
    def get(self, build_version: str) -> ProbeRecord | None:
        return self.history.lookup(self.memo_key, build_version, self.uid)

    def put(self, record: ProbeRecord) -> None:
        self.history.store(CASE_ID, self.memo_key, self.uid, record)


def _after_pending(row: dict[str, Any]) -> bool:
    """A finished bisection killed during its triage or commit tier."""
    resume = row["state"].get("resume")
    return bool(row["status"] == FINISHED and isinstance(resume, dict)
                and resume.get("after") == AFTER_PENDING)


def resumable_rows(history: History) -> list[dict[str, Any]]:
    """The bisections `resume` continues, the most recently updated first: the unfinished
    ones, and the finished ones whose triage or commit tier was cut short. A damaged
    checkpoint is named and left out."""
    rows = history.bisection_rows(CASE_ID, RUNNING) + [
        row for row in history.bisection_rows(CASE_ID, FINISHED) if _after_pending(row)]
    rows = [row for row in rows if _readable(row, history.path)]
    return sorted(rows, key=lambda row: str(row["updated_at"]), reverse=True)


# What `resume` reads of a checkpoint's plan (`stored_plan`).
PLAN_KEYS = ("script", "index_url", "variant", "python", "builds", "good_given", "needs_cuda")


def _readable(row: dict[str, Any], db: Path) -> bool:
    """Whether `row`'s checkpoint holds what `resume` needs; one that does not (its state cut
    short by a full disk, edited by hand) stopped every reader with a traceback. Said once
    here, with what to do: nothing of it can be continued."""
    why = row.get("damaged")
    resume = row["state"].get("resume")
    plan = resume.get("plan") if isinstance(resume, dict) else None
    if why is None and not (isinstance(plan, dict) and all(key in plan for key in PLAN_KEYS)
                            and isinstance(resume.get("argv"), list)):
        why = "what resuming needs is missing from it"
    if why is None:
        return True
    print(f"the checkpoint of bisection {row['uid']} in {db} is damaged ({why}); it is left "
          "out: the same `bisect-bot bisect` command starts that bisection afresh",
          file=sys.stderr)
    return False


def _say_unfinished_twins(history: History, script: str, uid: str, db: Path | None) -> None:
    """A new bisection of a script that an unfinished one (with other options or another
    window) also bisects: starting afresh is right, and the other one can still be resumed."""
    twins = [row["uid"] for row in history.bisection_rows(CASE_ID, RUNNING)
             if row["uid"] != uid and isinstance(resume := row["state"].get("resume"), dict)
             and resume.get("script") == script]
    if twins:
        print(f"an unfinished bisection of this script with other options or another window "
              f"is kept: `{resume_command(twins[0], db)}` continues it; this one starts afresh",
              file=sys.stderr)


def resume_command(uid: str, db: Path | None) -> str:
    """The command that continues bisection `uid` (in the history `db`, when not the default)."""
    return f"bisect-bot resume {uid}" + (f" --db {shlex.quote(str(db))}" if db else "")


def _running_lock(db: Path, uid: str) -> Path:
    return db.parent / "running" / f"{uid}.lock"


def hold_running(db: Path, uid: str) -> IO[str]:
    """Hold bisection `uid` for this process: the same bisection started again (or resumed)
    while it runs is refused. Before, both ran every probe left, side by side, and the one
    that ended last wrote its reports over the other's."""
    path = _running_lock(db, uid)
    handle = claim(path)
    if handle is None:
        raise UserError(f"bisection {uid} is running already, in process {claimant(path)}: "
                        "wait for it to end, or stop it and resume it")
    return handle


def running_in(db: Path, uid: str) -> str | None:
    """The process that runs bisection `uid` now, or None."""
    path = _running_lock(db, uid)
    if not path.is_file():
        return None
    free = try_lock(path, shared=True)
    if free is None:
        return claimant(path)
    free.close()
    return None


def _result_of(saved: dict[str, Any], start: BisectResult) -> BisectResult:
    try:
        resumed = BisectResult.from_dict(saved)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"the saved checkpoint is unreadable ({exc}); rerun with another "
                        f"--db or delete it") from exc
    if [b.version for b in resumed.builds] != [b.version for b in start.builds]:
        return start  # the same id with another window cannot happen unless the hash collides
    return replace(resumed, options=_options_of(resumed, start))


def _without_failed_installs(resumed: BisectResult) -> BisectResult:
    """A checkpoint's builds whose install failed are untested again, as the memo's are (a
    failed install says nothing of the build, and may be an outage since mended): kept as
    SKIP verdicts, they were counted among the probes done, never tried again, and could
    leave the answer ambiguous."""
    failed = {probe.index for probe in resumed.probes if probe.stopped_at(Stage.INSTALL)}
    if not failed:
        return resumed
    results = tuple(item for item in resumed.bisection.results if item[0] not in failed)
    return replace(resumed, bisection=replace(resumed.bisection, results=results),
                   probes=tuple(p for p in resumed.probes if p.index not in failed))


def _options_of(saved: BisectResult, start: BisectResult) -> dict[str, Any]:
    """The saved options, over the new run's: those of one bisection (its id hashes them),
    but for what only the first run knew (`resume` reads no issue again: the good end's
    words, the platform it reports) and what the search added (`back_to`, the limit of a
    search without a good end, which was recomputed from the oldest build it had reached).
    The new run's fill in keys a checkpoint of an older version lacks."""
    return {**start.options, **saved.options}


def from_partial_outcome(path: Path, start: BisectResult) -> BisectResult:
    """`run --resume outcome.json`: a previous attempt's checkpoint of the same builds."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--resume {path}: cannot read it ({exc})") from exc
    if not isinstance(data, dict) or "builds" not in data:
        print(f"--resume {path}: no bisection state in it; starting afresh", file=sys.stderr)
        return start
    saved = BisectResult.from_dict(data)
    versions = [b.version for b in start.builds]
    # A search that went on past the listed nightlies put older ones before them.
    if [b.version for b in saved.builds][-len(versions):] != versions or (
            len(saved.builds) > len(versions) and start.bisection.good_index is not None):
        print(f"--resume {path}: another window of builds; starting afresh", file=sys.stderr)
        return start
    if saved.options.get("script_args") != start.options.get("script_args"):
        # Its verdicts are of runs with other arguments: none of them holds for these.
        print(f"--resume {path}: the reproducer ran with other arguments; starting afresh",
              file=sys.stderr)
        return start
    print(f"resuming {path}: {_probes(len(saved.probes))} already done", file=sys.stderr)
    return replace(saved, options=_options_of(saved, start))


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return {"script": str(plan.script), "index_url": plan.index_url, "variant": plan.variant,
            "python": plan.python, "builds": [b.to_dict() for b in plan.builds],
            "good_given": plan.good_given, "needs_cuda": plan.needs_cuda,
            "imports": list(plan.imports)}


def stored_plan(args: argparse.Namespace) -> Plan | None:
    """The plan of the bisection `resume` continues: no index read, the same builds."""
    saved = getattr(args, "resume_state", None)
    if saved is None:
        return None
    from bot.jobs.local import Plan

    data = saved["resume"]["plan"]
    # What plan_from_args would have read from the issue and is not in the plan itself.
    args.issue_env = dict(saved.get("options", {}).get("env") or {})
    args.processes = getattr(args, "processes", None) or saved.get("options", {}).get("processes")
    args.script_args = list(saved.get("options", {}).get("script_args") or [])
    script = Path(data["script"])
    if not script.is_file() or script.read_text(errors="replace") != saved["resume"]["script"]:
        # Its own folder: two bisections resumed at once must not run each other's script.
        folder = (getattr(args, "db", None) or default_db_path()).parent / "resumed" / str(
            getattr(args, "resume_uid", None) or "script")
        folder.mkdir(parents=True, exist_ok=True)
        script = folder / script.name
        script.write_text(saved["resume"]["script"], encoding="utf-8")
    return Plan(script, data["index_url"], data["variant"], data["python"],
                tuple(Build.from_dict(b) for b in data["builds"]), bool(data["good_given"]),
                needs_cuda=bool(data["needs_cuda"]), imports=tuple(data.get("imports", ())))


def _from_gone_folder(args: argparse.Namespace, cwd: Path) -> None:
    """The folder the bisection was started in is gone: its relative paths are still taken
    from there. Taken from the folder `resume` ran in, `--cache-dir ../cache` made a fresh
    cache (every build installed again) and the reports went there, without a word."""
    for name in ("cache_dir", "work_dir", "json", "markdown"):
        value = getattr(args, name, None)
        if value is not None and not value.is_absolute():
            setattr(args, name, Path(os.path.normpath(cwd / value)))
    print(f"the folder this bisection was started in, {cwd}, is gone: its relative paths "
          "are taken from there all the same", file=sys.stderr)


def _probes_done(history: History, uid: str, saved: dict[str, Any]) -> set[str]:
    """The builds a saved bisection has verdicts for: its checkpoint's, and those of the
    round a kill cut short, which are in the memo beyond the last checkpoint (`--list`
    counted only the checkpoint's, and said one probe fewer than the resume then did)."""
    memo_key = str(saved.get("resume", {}).get("memo_key") or uid)
    records = saved.get("probe_records") or saved.get("probes") or []
    checkpointed = {str(probe.get("version")) for probe in records
                    if isinstance(probe, dict) and not failed_install(probe)}
    return checkpointed | history.stored_builds(memo_key, uid)


def _probes(count: int) -> str:
    return f"{count} probe{'' if count == 1 else 's'}"


def resume_main(args: argparse.Namespace) -> int:
    from bot.jobs import local

    # Taken from here, before the chdir below to the bisection's own folder: a relative
    # --db went on as a new, empty history there, and every probe ran again.
    args.db = args.db.absolute() if args.db else None
    db = args.db or default_db_path()
    if not db.is_file():  # a command that reads it makes no database where there was none
        raise UserError(f"no unfinished bisection in {db}: there is no history there yet")
    with History(db) as history:
        rows = resumable_rows(history)
        if args.list:
            if not rows:  # said on stderr: the listing itself (stdout) stays empty
                print(f"no unfinished bisections in {db}", file=sys.stderr)
            for row in rows:
                summary = row["state"]
                done = _probes_done(history, str(row["uid"]), summary)
                print(f"{row['uid']}  {row['updated_at']}  {_probes(len(done))}  "
                      f"{summary.get('script_name', '?')}  {summary.get('index_url')}"
                      + ("  (answer found; the triage or commit tier was cut short)"
                         if _after_pending(row) else "")
                      + (f"  (running, process {pid})"
                         if (pid := running_in(db, str(row["uid"]))) else ""))
            return 0
        if args.id:
            chosen = next((r for r in rows if r["uid"] == args.id), None)
        else:  # the newest one no process runs now (the newest is often the one running)
            live = {str(r["uid"]): running_in(db, str(r["uid"])) for r in rows}
            chosen = next((r for r in rows if live[str(r["uid"])] is None), None)
            if chosen is None and rows:
                busy = "; ".join(f"bisection {uid} is running already, in process {pid}"
                                 for uid, pid in live.items())
                raise UserError(f"no unfinished bisection in {db} is free to resume: {busy}: "
                                "wait for it to end, or stop it and resume it")
    if chosen is None:
        raise UserError(f"no unfinished bisection {args.id or ''} in {args.db or default_db_path()}"
                        .replace("  ", " "))
    saved = chosen["state"]
    parser = argparse.ArgumentParser(prog="bisect-bot bisect")
    local.add_bisect_arguments(parser)
    argv = list(saved["resume"]["argv"]) or [saved["resume"]["plan"]["script"]]
    argv = argv[1:] if argv[0] == "bisect" else argv
    cwd = Path(saved["resume"]["cwd"])
    bisect_args = parser.parse_args(argv)
    if cwd.is_dir():
        os.chdir(cwd)  # the saved arguments may hold paths relative to it
    else:
        _from_gone_folder(bisect_args, cwd)
    bisect_args.db, bisect_args.resume_uid, bisect_args.resume_state = (
        args.db, chosen["uid"], saved)
    bisect_args.argv = saved["resume"]["argv"]
    return local.bisect_main(bisect_args)
