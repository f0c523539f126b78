"""SQLite history of runs, sweeps, findings, filed issues and bisections; memoizes probes."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from bot.core.builds import same_commit
from bot.core.errors import UserError
from bot.core.results import ProbeRecord
from bot.core.verdicts import RunResult, Stage, Verdict

# PRAGMA user_version is the schema version; MIGRATIONS[n] takes version n to n + 1.
MIGRATIONS: tuple[str, ...] = ("""
CREATE TABLE sweeps (id TEXT PRIMARY KEY, nightly TEXT NOT NULL, shard TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE runs (uid TEXT PRIMARY KEY, sweep_id TEXT, case_id TEXT NOT NULL,
    case_hash TEXT NOT NULL, build_version TEXT NOT NULL, options_hash TEXT NOT NULL,
    verdict TEXT NOT NULL, reason TEXT NOT NULL, metric REAL, seconds REAL NOT NULL,
    output_tail TEXT NOT NULL, record TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE INDEX runs_memo ON runs (case_hash, options_hash, build_version);
CREATE INDEX runs_case ON runs (case_id);
CREATE TABLE findings (uid TEXT PRIMARY KEY, sweep_id TEXT NOT NULL, case_id TEXT NOT NULL,
    nightly TEXT NOT NULL, transition TEXT NOT NULL, detail TEXT NOT NULL,
    handled_at TEXT, recorded_at TEXT NOT NULL);
CREATE TABLE issues (regression_key TEXT PRIMARY KEY, case_id TEXT NOT NULL,
    number INTEGER NOT NULL, first_bad TEXT NOT NULL, fixed_in TEXT, detail TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE notices (number INTEGER NOT NULL, case_id TEXT NOT NULL, kind TEXT NOT NULL,
    nightly TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (number, case_id, kind));
CREATE TABLE bisections (uid TEXT PRIMARY KEY, sweep_id TEXT, case_id TEXT NOT NULL,
    case_hash TEXT NOT NULL, options_hash TEXT NOT NULL, status TEXT NOT NULL,
    state TEXT NOT NULL, updated_at TEXT NOT NULL);
""", """
ALTER TABLE issues ADD COLUMN case_hash TEXT;
CREATE INDEX issues_case ON issues (case_id);
""", """
ALTER TABLE issues ADD COLUMN seen_in TEXT;
ALTER TABLE issues ADD COLUMN seen_signature TEXT;
CREATE INDEX issues_number ON issues (number);
""", """
CREATE TABLE issue_state (number INTEGER PRIMARY KEY, stale INTEGER NOT NULL DEFAULT 0,
    title TEXT, gone INTEGER NOT NULL DEFAULT 0);
ALTER TABLE notices ADD COLUMN posted_at TEXT;
ALTER TABLE notices ADD COLUMN previous TEXT;
UPDATE notices SET posted_at = created_at;
""")
SCHEMA_VERSION = len(MIGRATIONS)
ISSUE_GONE = "(issue gone)"  # fixed_in of an issue no longer followed: deleted on GitHub
OUTPUT_TAIL = 8_000  # characters of output kept per run: the tail holds the traceback
EXPORTED = ("sweeps", "runs", "findings", "bisections")  # what a shard hands to the collector


def unusable(path: Path, error: sqlite3.DatabaseError) -> str:
    """What to do about a history database SQLite cannot use."""
    if path.is_dir():
        return (f"history database {path}: a folder; give the file, e.g. "
                f"{path / 'history.sqlite3'}")
    hint = ("another process is writing it: wait for that one, or give this one its own --db"
            if "locked" in str(error) else
            "it is damaged: move it away (in Actions, delete the `bisect-history` artifact) "
            "and a fresh history starts (unfinished local bisections in it are lost; sweep "
            "issues already filed are found again by their hidden marker)")
    return f"history database {path}: {error}; {hint}"


def default_db_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torch-bisect-bot" / "history.sqlite3"


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def version_key(version: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def nightly_after(one: str, other: str) -> bool:
    """Whether build `one` is newer than `other`; `+cpu` and `+cu130` of a day are one
    nightly."""
    return version_key(one.split("+", 1)[0]) > version_key(other.split("+", 1)[0])


def _newest_before(verdicts: dict[str, Verdict], before: str) -> tuple[str, Verdict] | None:
    """The newest build older than `before` among `verdicts`, and its verdict."""
    older = [(v, verdict) for v, verdict in verdicts.items()
             if version_key(v) < version_key(before)]
    return max(older, key=lambda item: version_key(item[0])) if older else None


@dataclass(frozen=True)
class Finding:
    """A sweep's decision about one case on one nightly, waiting to be acted on (filed)."""

    uid: str
    sweep_id: str
    case_id: str
    nightly: str
    transition: str
    detail: dict[str, Any]


# A passing run's output is kept shorter: a sweep's history holds a run of every case every
# night, nearly all of them passing, and nothing reads their output but a person.
GOOD_OUTPUT_TAIL = 1024


@dataclass(frozen=True)
class IssueCase:
    """One case's regression as filed in an issue, and what the sweeps saw of it since."""

    case_id: str
    detail: dict[str, Any]  # the finding it was filed from
    fixed_in: str | None = None
    seen_in: str | None = None  # the newest nightly it was seen failing in
    seen_signature: str | None = None  # and how it failed there
    # The nightly whose sweeps no longer had the case (`sweep-merge --suite`), when it was not
    # seen failing since: its last state is as of an earlier sweep.
    removed_in: str | None = None


@dataclass(frozen=True)
class Notice:
    """A comment owed to an issue about one of its cases: "fixed" or "joined"."""

    case_id: str
    kind: str
    nightly: str
    previous: str | None = None  # fixed: the nightly it last failed on


def trimmed(record: ProbeRecord) -> ProbeRecord:
    """The record with its output cut to what the history keeps of a run's."""
    result = record.result
    keep = GOOD_OUTPUT_TAIL if record.verdict is Verdict.GOOD else OUTPUT_TAIL
    if result is None or len(result.output) <= keep:
        return record
    kept = RunResult(**{**result.__dict__, "output": result.output[-keep:]})
    return ProbeRecord(**{**record.__dict__, "result": kept})


def failed_install(stored: dict[str, Any]) -> bool:
    """A stored record of a build whose environment could not be made."""
    result = stored.get("result")
    return isinstance(result, dict) and result.get("stage") == Stage.INSTALL.value


def _bisection_dict(row: sqlite3.Row) -> dict[str, Any]:
    """The row with its state decoded; a state that does not decode to an object (a write
    cut short, an edit by hand) is an empty one, with why under "damaged", so that one bad
    checkpoint neither hides the others nor stops a reader with a traceback."""
    try:
        state = json.loads(row["state"])
    except ValueError as exc:
        return {**dict(row), "state": {}, "damaged": str(exc)}
    if not isinstance(state, dict):
        return {**dict(row), "state": {}, "damaged": f"a JSON {type(state).__name__}"}
    return {**dict(row), "state": state}


class History:
    """One SQLite file in WAL mode; safe for one writer and many readers on one machine."""

    def __init__(self, path: Path, now: Callable[[], str] = _utc_now) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.now = now
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()  # the engine probes from threads when --workers > 1
        try:
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise UserError(unusable(path, exc)) from exc
        except UserError:
            self._db.close()
            raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise UserError(f"history database {self.path} has schema {version}, newer than "
                            f"this bot's {SCHEMA_VERSION} (a newer torch-bisect-bot wrote it): "
                            "upgrade torch-bisect-bot, or give this one its own --db (in "
                            "Actions, a bot taken back to an older version needs the "
                            "`bisect-history` artifact deleted, and starts a fresh history)")
        for number in range(version, SCHEMA_VERSION):
            with self._tx() as db:
                # Read again under the write lock: another process opening a new history at
                # the same moment (two bisections started at once) may have migrated it since,
                # and running a migration twice failed ("duplicate column name").
                if int(db.execute("PRAGMA user_version").fetchone()[0]) > number:
                    continue
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # -- sweeps ---------------------------------------------------------------------------
    def start_sweep(self, nightly: str, shard: str = "") -> str:
        sweep_id = f"sweep-{uuid.uuid4().hex[:12]}"
        with self._tx() as db:
            db.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, NULL)",
                       (sweep_id, nightly, shard, self.now()))
        return sweep_id

    def finish_sweep(self, sweep_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE sweeps SET finished_at = ? WHERE id = ?", (self.now(), sweep_id))

    # -- runs and the memo ----------------------------------------------------------------
    def store(self, case_id: str, case_hash: str, options_hash: str, record: ProbeRecord,
              sweep_id: str | None = None) -> None:
        """Record one probe (one build tested for one case)."""
        record = trimmed(record)
        stored = record.to_dict()
        # The output is kept once, in `output_tail` (the exports carry it there), and not in
        # `record` too, where it was a second copy (an audit's year of 200 cases: 1.2 GB).
        result = stored.get("result")
        output = result.pop("output", "") if isinstance(result, dict) else ""
        if record.signature is not None:  # the judged failure: its output is kept cut
            stored["signature"] = record.signature
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (uuid.uuid4().hex, sweep_id, case_id, case_hash, record.version, options_hash,
                 record.verdict.value, record.reason, record.metric, record.seconds,
                 output, json.dumps(stored), self.now()))

    def stored_builds(self, case_hash: str, options_hash: str) -> set[str]:
        """The builds that have a stored run of this script under these options that `lookup`
        gives back: a failed install is no verdict, and is probed again."""
        rows = self._db.execute("SELECT build_version, record FROM runs WHERE case_hash = ? "
                                "AND options_hash = ?", (case_hash, options_hash))
        return {str(row["build_version"]) for row in rows
                if not failed_install(json.loads(row["record"]))}

    def lookup(self, case_hash: str, build_version: str, options_hash: str
               ) -> ProbeRecord | None:
        """The stored result of this script on this build under these options, if reusable.

        A failed install is not reused: it says nothing about the build, and may be transient.
        """
        rows = self._db.execute(
            "SELECT record, output_tail FROM runs WHERE case_hash = ? AND build_version = ? AND "
            "options_hash = ? ORDER BY recorded_at DESC, rowid DESC",
            (case_hash, build_version, options_hash)).fetchall()
        for row in rows:
            stored = json.loads(row["record"])
            if isinstance(stored.get("result"), dict):  # its output is in the column
                stored["result"].setdefault("output", row["output_tail"])
            record = ProbeRecord.from_dict(stored)
            if isinstance(stored.get("signature"), str):  # absent from older rows
                record = replace(record, signature=stored["signature"])
            if not record.stopped_at(Stage.INSTALL):
                return record
        return None

    def run_count(self, sweep_id: str | None = None) -> int:
        query, args = "SELECT COUNT(*) FROM runs", tuple[str, ...]()
        if sweep_id is not None:
            query, args = query + " WHERE sweep_id = ?", (sweep_id,)
        return int(self._db.execute(query, args).fetchone()[0])

    def verdicts(self, case_hash: str, options_hash: str) -> dict[str, Verdict]:
        """Build version -> the newest GOOD or BAD verdict recorded for this case."""
        rows = self._db.execute(
            "SELECT build_version, verdict FROM runs WHERE case_hash = ? AND options_hash = ? "
            "AND verdict != 'skip' ORDER BY recorded_at, rowid", (case_hash, options_hash))
        return {row["build_version"]: Verdict(row["verdict"]) for row in rows}

    def previous(self, case_hash: str, options_hash: str, before: str
                 ) -> tuple[str, Verdict] | None:
        """The newest nightly older than `before` with a GOOD or BAD result, and that result."""
        return _newest_before(self.verdicts(case_hash, options_hash), before)

    def previous_of_case(self, case_id: str, before: str, earlier_ids: Iterable[str] = ()
                         ) -> tuple[str, Verdict] | None:
        """Like `previous`, over every version of the case's script and options: what the
        case did before it was edited (its history by script text starts afresh); with
        `earlier_ids`, the ids it had before (renamed and edited at once), too."""
        ids = [case_id, *earlier_ids]
        rows = self._db.execute(
            f"SELECT build_version, verdict FROM runs WHERE case_id IN "
            f"({', '.join('?' for _ in ids)}) AND verdict != 'skip' ORDER BY recorded_at, "
            "rowid", ids)
        return _newest_before({row["build_version"]: Verdict(row["verdict"]) for row in rows},
                              before)

    def last_good(self, case_hash: str, options_hash: str, before: str) -> str | None:
        good = [v for v, verdict in self.verdicts(case_hash, options_hash).items()
                if verdict is Verdict.GOOD and version_key(v) < version_key(before)]
        return max(good, key=version_key) if good else None

    # -- findings, issues, notices --------------------------------------------------------
    def add_finding(self, sweep_id: str, case_id: str, nightly: str, transition: str,
                    detail: dict[str, Any]) -> str:
        uid = uuid.uuid4().hex
        with self._tx() as db:
            db.execute("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                       (uid, sweep_id, case_id, nightly, transition,
                        json.dumps(detail, sort_keys=True), self.now()))
        return uid

    def pending_findings(self) -> list[Finding]:
        rows = self._db.execute("SELECT * FROM findings WHERE handled_at IS NULL "
                                "ORDER BY recorded_at, rowid").fetchall()
        return [Finding(r["uid"], r["sweep_id"], r["case_id"], r["nightly"], r["transition"],
                        json.loads(r["detail"])) for r in rows]

    def mark_handled(self, uid: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE findings SET handled_at = ? WHERE uid = ?", (self.now(), uid))

    def remember_issue(self, key: str, case_id: str, number: int, first_bad: str,
                       detail: dict[str, Any], case_hash: str | None = None,
                       seen_in: str | None = None) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO issues (regression_key, case_id, number, first_bad, "
                       "fixed_in, detail, created_at, updated_at, case_hash, seen_in) "
                       "VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?) ON CONFLICT"
                       "(regression_key) DO UPDATE SET number = excluded.number, "
                       "detail = excluded.detail, updated_at = excluded.updated_at, "
                       "case_hash = excluded.case_hash, seen_in = excluded.seen_in, "
                       "seen_signature = NULL",
                       (key, case_id, number, first_bad, json.dumps(detail), self.now(),
                        self.now(), case_hash, seen_in))

    def saw_again(self, number: int, case_id: str, nightly: str, signature: str | None) -> None:
        """A later sweep saw the case's regression filed in issue `number` still failing."""
        with self._tx() as db:
            rows = db.execute("SELECT rowid, COALESCE(seen_in, first_bad) AS seen FROM issues "
                              "WHERE number = ? AND case_id = ? AND fixed_in IS NULL",
                              (number, case_id)).fetchall()
            for row in rows:  # an older nightly swept late is not the newest seen failing
                if not nightly_after(row["seen"], nightly):
                    db.execute("UPDATE issues SET seen_in = ?, seen_signature = ?, "
                               "updated_at = ? WHERE rowid = ?",
                               (nightly, signature, self.now(), row["rowid"]))

    def issue_cases(self, number: int) -> list[IssueCase]:
        """The regressions filed in issue `number`, the first filed first: one, or several
        cases that broke between the same two nightlies. Those of a gone issue are left out."""
        rows = self._db.execute(
            "SELECT issues.*, notices.nightly AS removed_in FROM issues LEFT JOIN notices ON "
            "notices.number = issues.number AND notices.case_id = issues.case_id AND "
            "notices.kind = 'removed' WHERE issues.number = ? AND (fixed_in IS NULL OR "
            "fixed_in != ?) ORDER BY issues.created_at, issues.rowid", (number, ISSUE_GONE))
        return [IssueCase(r["case_id"], dict(json.loads(r["detail"])), r["fixed_in"],
                          r["seen_in"], r["seen_signature"],
                          r["removed_in"] if r["removed_in"] and not nightly_after(
                              r["seen_in"] or r["first_bad"], r["removed_in"]) else None)
                for r in rows]

    def window_issues(self, last_good: str | None, first_bad: str) -> list[int]:
        """The issues, newest first, of cases that broke between the same two nightlies
        (whatever the builds' variant: `+cpu` and `+cu130` of a date are one commit), but
        gone ones: a new case of that regression may join one that is still open."""
        if not last_good:
            return []
        rows = self._db.execute(
            "SELECT number, first_bad, detail FROM issues WHERE number NOT IN (SELECT number "
            "FROM issue_state WHERE gone = 1) ORDER BY created_at DESC, rowid DESC")
        found = [int(row["number"]) for row in rows if same_commit(row["first_bad"], first_bad)
                 and same_commit(str(json.loads(row["detail"]).get("last_good")), last_good)]
        return list(dict.fromkeys(found))

    # -- what is owed to GitHub: bodies to write, comments to post --------------------------
    def mark_stale(self, number: int, retitle: bool = False) -> None:
        """Issue `number`'s body (and, `retitle`, its title) is to be written again."""
        with self._tx() as db:
            db.execute("INSERT INTO issue_state (number, stale) VALUES (?, ?) ON CONFLICT"
                       "(number) DO UPDATE SET stale = MAX(stale, excluded.stale)",
                       (number, 2 if retitle else 1))

    def stale_issues(self) -> list[tuple[int, bool]]:
        """(number, title too) of the issues to write again, but gone ones."""
        rows = self._db.execute("SELECT number, stale FROM issue_state WHERE stale > 0 AND "
                                "gone = 0 ORDER BY number")
        return [(int(row["number"]), row["stale"] == 2) for row in rows]

    def written(self, number: int, title: str | None = None) -> None:
        """The issue was written as it should be; `title`: the title the bot gave it."""
        with self._tx() as db:
            db.execute("INSERT INTO issue_state (number, title) VALUES (?, ?) ON CONFLICT"
                       "(number) DO UPDATE SET stale = 0, title = COALESCE(excluded.title, "
                       "title)", (number, title))

    def bot_title(self, number: int) -> str | None:
        row = self._db.execute("SELECT title FROM issue_state WHERE number = ?",
                               (number,)).fetchone()
        return str(row["title"]) if row is not None and row["title"] is not None else None

    def unannounced_joins(self, number: int) -> list[IssueCase]:
        """The cases that joined issue `number` with no comment posted about it yet: on
        GitHub, they are in no issue."""
        joined = {str(row["case_id"]) for row in self._db.execute(
            "SELECT case_id FROM notices WHERE number = ? AND kind = 'joined' AND posted_at IS "
            "NULL", (number,))}
        return [case for case in self.issue_cases(number) if case.case_id in joined]

    def unposted_notices(self) -> dict[int, list[Notice]]:
        """Comments owed, by issue: each issue gets one a filing, whatever it has to say."""
        owed: dict[int, list[Notice]] = {}
        for row in self._db.execute("SELECT * FROM notices WHERE posted_at IS NULL AND number "
                                    "NOT IN (SELECT number FROM issue_state WHERE gone = 1) "
                                    "ORDER BY number, created_at, rowid"):
            owed.setdefault(int(row["number"]), []).append(
                Notice(row["case_id"], row["kind"], row["nightly"], row["previous"]))
        return owed

    def notices_posted(self, number: int, notices: Iterable[Notice]) -> None:
        """The comment holding `notices` was posted (or given up): no longer owed."""
        with self._tx() as db:
            db.executemany("UPDATE notices SET posted_at = ? WHERE number = ? AND case_id = ? "
                           "AND kind = ?", [(self.now(), number, n.case_id, n.kind)
                                            for n in notices])

    def requeue(self, case_id: str, nightly: str, detail: dict[str, Any]) -> None:
        """File the case's new failure again (the issue it was in is gone): a pending finding,
        so that a filing cut short on the way still has it."""
        with self._tx() as db:
            db.execute("INSERT INTO findings VALUES (?, 'refile', ?, ?, 'new-failure', ?, NULL, "
                       "?)", (uuid.uuid4().hex, case_id, nightly,
                              json.dumps(detail, sort_keys=True), self.now()))
            db.execute("DELETE FROM issues WHERE case_id = ? AND first_bad = ?",
                       (case_id, detail.get("first_bad")))

    def claim(self, case_id: str, case_hash: str, build_version: str, options_hash: str,
              sweep_id: str | None) -> None:
        """Another case with this script's text ran this build: the result is this case's
        too. Kept as a run of its own (once), so that the history knows the case was swept
        that night and does not take it for the other one renamed."""
        with self._tx() as db:
            if db.execute("SELECT 1 FROM runs WHERE case_id = ? AND build_version = ? AND "
                          "options_hash = ?", (case_id, build_version,
                                               options_hash)).fetchone() is not None:
                return
            row = db.execute("SELECT * FROM runs WHERE case_hash = ? AND build_version = ? AND "
                             "options_hash = ? ORDER BY recorded_at DESC, rowid DESC",
                             (case_hash, build_version, options_hash)).fetchone()
            if row is not None:
                db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (uuid.uuid4().hex, sweep_id, case_id, *tuple(row)[3:12],
                            self.now()))

    def owes_github(self) -> bool:
        """Whether a comment or a body is still to be written (a filing was cut short)."""
        return bool(self.stale_issues() or self.unposted_notices())

    # An issue belongs to a case by its id, or by its script's text: a case renamed (moved to
    # another file) keeps its issues, and so does one edited under the same name.
    _OF_CASE = "(case_id = ? OR (case_hash IS NOT NULL AND case_hash = ?))"

    def open_issues(self, case_id: str, case_hash: str | None = None
                    ) -> list[tuple[int, dict[str, Any]]]:
        """(number, detail) of the case's filed regressions not yet seen fixed."""
        rows = self._db.execute(f"SELECT number, detail FROM issues WHERE {self._OF_CASE} AND "
                                "fixed_in IS NULL ORDER BY created_at", (case_id, case_hash))
        return [(int(r["number"]), dict(json.loads(r["detail"]))) for r in rows]

    def open_failures(self, case_id: str, case_hash: str | None = None) -> list[str]:
        """The newest nightly each of the case's open issues was seen failing in (its first
        bad nightly, when no later sweep saw it)."""
        rows = self._db.execute(f"SELECT COALESCE(seen_in, first_bad) AS failed FROM issues "
                                f"WHERE {self._OF_CASE} AND fixed_in IS NULL", (case_id, case_hash))
        return [str(r["failed"]) for r in rows]

    def follow_case(self, case_id: str, case_hash: str, nightly: str | None = None,
                    path: str | None = None) -> list[int]:
        """The case's open issues take its current name, text and path, so that a rename
        after an edit (or an edit after a rename) still finds them. By its text only an issue
        of a case id that did not run on `nightly` is taken: another case with the same text
        (a reproducer copied into two suites) keeps its own. Returns the issues whose case
        was renamed or moved (their bodies and titles name it)."""
        moved: set[int] = set()
        with self._tx() as db:
            rows = db.execute(
                f"SELECT rowid, number, case_id, detail FROM issues WHERE {self._OF_CASE} AND "
                "fixed_in IS NULL", (case_id, case_hash)).fetchall()
            for row in rows:
                if row["case_id"] != case_id and nightly is not None and db.execute(
                        "SELECT 1 FROM runs WHERE case_id = ? AND build_version = ?",
                        (row["case_id"], nightly)).fetchone() is not None:
                    continue  # that case is still swept: same text, another case
                detail = dict(json.loads(row["detail"]))
                renamed = row["case_id"] != case_id
                if path is not None and detail.get("path") != path:
                    detail["path"], renamed = path, True
                db.execute("UPDATE issues SET case_id = ?, case_hash = ?, detail = ? WHERE "
                           "rowid = ?", (case_id, case_hash, json.dumps(detail), row["rowid"]))
                if renamed:
                    moved.add(int(row["number"]))
        return sorted(moved)

    def rename_case(self, old: str, new: str) -> None:
        """The issues filed for case `old` are case `new`'s: the case says it was renamed
        (`renamed_from`), where its text, edited too, cannot tell."""
        with self._tx() as db:
            db.execute("UPDATE issues SET case_id = ? WHERE case_id = ?", (new, old))

    def open_issue_cases(self) -> list[tuple[int, str, str | None]]:
        """(number, case id, script hash) of every case an issue followed now has."""
        rows = self._db.execute("SELECT number, case_id, case_hash FROM issues WHERE fixed_in IS "
                                "NULL ORDER BY number, rowid")
        return [(int(r["number"]), str(r["case_id"]), r["case_hash"]) for r in rows]

    def newest_nightly(self) -> str | None:
        """The newest nightly a sweep of this history ran."""
        nightlies = [str(r["nightly"]) for r in self._db.execute("SELECT nightly FROM sweeps")]
        return max(nightlies, key=version_key) if nightlies else None

    def issue_of_key(self, key: str) -> int | None:
        """The issue the history filed under `key` (a hidden marker), if any."""
        row = self._db.execute("SELECT number FROM issues WHERE regression_key = ?",
                               (key,)).fetchone()
        return int(row["number"]) if row is not None else None

    def fixed_issues(self, case_id: str, case_hash: str | None = None
                     ) -> list[tuple[int, dict[str, Any], str]]:
        """(number, detail, fixed in) of the case's filed issues seen fixed, the newest fixed
        first; gone ones left out."""
        rows = self._db.execute(f"SELECT number, detail, fixed_in FROM issues WHERE "
                                f"{self._OF_CASE} AND fixed_in IS NOT NULL AND fixed_in != ?",
                                (case_id, case_hash, ISSUE_GONE)).fetchall()
        found = [(int(r["number"]), dict(json.loads(r["detail"])), str(r["fixed_in"]))
                 for r in rows]
        return sorted(found, key=lambda item: version_key(item[2]), reverse=True)

    def reopen_issue(self, number: int, case_id: str, key: str, first_bad: str,
                     detail: dict[str, Any], case_hash: str | None = None,
                     seen_in: str | None = None) -> str | None:
        """Issue `number`, whose case was seen fixed, follows the case's new failure (`key`):
        its row takes the new one, the earlier episodes kept in `detail["earlier"]`, and the
        notices it was given are forgotten, so that a fix of this one is said too. Returns
        the nightly it was seen fixed in."""
        with self._tx() as db:
            row = db.execute("SELECT rowid, first_bad, fixed_in, detail FROM issues WHERE "
                             "number = ? AND case_id = ? AND fixed_in IS NOT NULL ORDER BY "
                             "updated_at DESC, rowid DESC", (number, case_id)).fetchone()
            if row is None:
                return None
            old = dict(json.loads(row["detail"]))
            earlier = [*(old.get("earlier") or ()),
                       {"first_bad": row["first_bad"], "fixed_in": row["fixed_in"]}]
            db.execute("UPDATE issues SET regression_key = ?, first_bad = ?, fixed_in = NULL, "
                       "detail = ?, case_hash = ?, seen_in = ?, seen_signature = NULL, "
                       "updated_at = ? WHERE rowid = ?",
                       (key, first_bad, json.dumps({**detail, "earlier": earlier}),
                        case_hash, seen_in, self.now(), row["rowid"]))
            db.execute("DELETE FROM notices WHERE number = ? AND case_id = ? AND posted_at IS "
                       "NOT NULL", (number, case_id))
        return str(row["fixed_in"])

    def forget_issue(self, number: int) -> None:
        """Stop following an issue that is gone from GitHub (deleted, or moved where the
        token cannot see it): no later finding updates or comments on it."""
        with self._tx() as db:
            db.execute("UPDATE issues SET fixed_in = ?, updated_at = ? WHERE number = ? AND "
                       "fixed_in IS NULL", (ISSUE_GONE, self.now(), number))
            db.execute("INSERT INTO issue_state (number, gone) VALUES (?, 1) ON CONFLICT"
                       "(number) DO UPDATE SET gone = 1, stale = 0", (number,))
            db.execute("DELETE FROM notices WHERE number = ? AND posted_at IS NULL", (number,))

    def mark_fixed(self, case_id: str, nightly: str, case_hash: str | None = None) -> None:
        with self._tx() as db:
            db.execute(f"UPDATE issues SET fixed_in = ?, updated_at = ? WHERE {self._OF_CASE} "
                       "AND fixed_in IS NULL", (nightly, self.now(), case_id, case_hash))

    def has_notice(self, number: int, case_id: str, kind: str) -> bool:
        row = self._db.execute("SELECT 1 FROM notices WHERE number = ? AND case_id = ? AND "
                               "kind = ?", (number, case_id, kind)).fetchone()
        return row is not None

    def add_notice(self, number: int, case_id: str, kind: str, nightly: str,
                   previous: str | None = None) -> bool:
        """A comment owed to issue `number` (posted by the filing, `notices_posted`). True the
        first time; a notice already given is not given again."""
        with self._tx() as db:
            cursor = db.execute("INSERT OR IGNORE INTO notices (number, case_id, kind, nightly, "
                                "created_at, previous) VALUES (?, ?, ?, ?, ?, ?)",
                                (number, case_id, kind, nightly, self.now(), previous))
        return cursor.rowcount == 1

    # -- keeping it small -----------------------------------------------------------------
    def prune(self, keep_days: float) -> dict[str, int]:
        """Forgets what was recorded more than `keep_days` ago, but what a later sweep reads:
        each script's newest passing and newest failing build under each options (its previous
        result, and the last good nightly a bisection starts from), each case id's newest run
        (what an edited case is compared with), findings not filed yet, bisections that can be
        resumed, and every issue and notice (what keeps an issue from being filed twice). Then
        the file is compacted. Returns how many rows of each table went."""
        if keep_days < 0:
            raise ValueError("keep_days must be 0 or more")
        now = dt.datetime.fromisoformat(self.now())
        cutoff = (now - dt.timedelta(days=keep_days)).isoformat(timespec="seconds")
        newest: dict[tuple[str, ...], tuple[tuple[int, Version | str], int]] = {}
        for row in self._db.execute("SELECT rowid, case_id, case_hash, options_hash, "
                                    "build_version, verdict FROM runs WHERE verdict != 'skip'"):
            rank = version_key(row["build_version"])
            for key in ((row["case_hash"], row["options_hash"], row["verdict"]),
                        (row["case_id"],)):
                if key not in newest or (rank, row["rowid"]) > newest[key]:
                    newest[key] = (rank, row["rowid"])
        kept = [(rowid,) for _, rowid in newest.values()]
        gone: dict[str, int] = {}
        with self._tx() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS kept_runs (id INTEGER PRIMARY KEY)")
            db.execute("DELETE FROM kept_runs")
            db.executemany("INSERT OR IGNORE INTO kept_runs VALUES (?)", kept)
            for table, where in (
                ("runs", "recorded_at < ? AND rowid NOT IN (SELECT id FROM kept_runs)"),
                ("findings", "recorded_at < ? AND handled_at IS NOT NULL"),
                # `running` is a `bisect` that can be resumed; a sweep's (a sweep killed in
                # it) is bisected again by the next sweep, never resumed, and kept no longer
                # than one it stopped itself (`unfinished`).
                ("bisections", "updated_at < ? AND (status != 'running' OR sweep_id IS NOT "
                 "NULL)"),
                ("sweeps", "started_at < ?"),
            ):
                gone[table] = db.execute(f"DELETE FROM {table} WHERE {where}", (cutoff,)).rowcount
            db.execute("DROP TABLE kept_runs")
        with self._lock:
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file, which shrinks
        return gone

    # -- bisections -----------------------------------------------------------------------
    def save_bisection(self, uid: str, sweep_id: str | None, case_id: str, case_hash: str,
                       options_hash: str, status: str, state: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO bisections VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid) "
                       "DO UPDATE SET status = excluded.status, state = excluded.state, "
                       "updated_at = excluded.updated_at",
                       (uid, sweep_id, case_id, case_hash, options_hash, status,
                        json.dumps(state), self.now()))

    def bisection(self, uid: str) -> dict[str, Any] | None:
        row = self.bisection_row(uid)
        return row["state"] if row else None

    def bisection_row(self, uid: str) -> dict[str, Any] | None:
        """uid, case_id, status, updated_at and the decoded state of one bisection."""
        row = self._db.execute("SELECT * FROM bisections WHERE uid = ?", (uid,)).fetchone()
        return _bisection_dict(row) if row else None

    def bisection_stopped(self, case_id: str, case_hash: str, options_hash: str) -> bool:
        """Whether the case's newest sweep bisection (of this text and options) ended with no
        answer: stopped at the sweep's deadline or by an index that did not answer
        (`unfinished`), or killed (Ctrl-C, the runner's SIGTERM: left `running`)."""
        row = self._db.execute("SELECT status FROM bisections WHERE case_id = ? AND case_hash = "
                               "? AND options_hash = ? AND sweep_id IS NOT NULL ORDER BY "
                               "updated_at DESC, rowid DESC LIMIT 1",
                               (case_id, case_hash, options_hash)).fetchone()
        return row is not None and row["status"] in ("unfinished", "running")

    def bisection_rows(self, case_id: str, status: str) -> list[dict[str, Any]]:
        """The case's bisections in `status`, the most recently updated first."""
        rows = self._db.execute("SELECT * FROM bisections WHERE case_id = ? AND status = ? "
                                "ORDER BY updated_at DESC, rowid DESC", (case_id, status))
        return [_bisection_dict(row) for row in rows]

    # -- export and merge: how shard jobs hand their rows to the collector ----------------
    def export(self, sweep_ids: Iterable[str]) -> dict[str, Any]:
        ids = list(sweep_ids)
        marks = ", ".join("?" for _ in ids)
        tables: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for table in EXPORTED:
            column = "id" if table == "sweeps" else "sweep_id"
            rows = self._db.execute(f"SELECT * FROM {table} WHERE {column} IN ({marks})", ids)
            tables[table] = [dict(row) for row in rows]
        return tables

    def merge(self, exported: object) -> int:
        """Fold an export in; rows already present (same key) are kept, so merging is idempotent.
        A damaged export (ValueError) adds nothing."""
        if not isinstance(exported, dict):
            raise ValueError(f"expected a JSON object, found {type(exported).__name__}")
        if exported.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"export has schema {exported.get('schema_version')}, "
                             f"expected {SCHEMA_VERSION}")
        added = 0
        with self._tx() as db:
            for table in EXPORTED:
                columns = list(db.execute(f"PRAGMA table_info({table})"))
                known = {column["name"] for column in columns}
                required = {column["name"] for column in columns if column["notnull"]}
                rows = exported.get(table, [])
                if not isinstance(rows, list):
                    raise ValueError(f"export's {table} is not a list of rows")
                for row in rows:
                    if not isinstance(row, dict) or not set(row) <= known:
                        raise ValueError(f"export has a {table} row with unknown columns")
                    if missing := sorted(n for n in required if row.get(n) is None):
                        raise ValueError(f"export has a {table} row without "
                                         f"{', '.join(missing)}")
                    names = ", ".join(row)
                    marks = ", ".join("?" for _ in row)
                    cursor = db.execute(f"INSERT OR IGNORE INTO {table} ({names}) "
                                        f"VALUES ({marks})", tuple(row.values()))
                    added += cursor.rowcount
        return added
