"""The SQLite history on real files: schema, memo lookups, ordering, export and merge."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bot.adapters.history import (
    GOOD_OUTPUT_TAIL,
    MIGRATIONS,
    OUTPUT_TAIL,
    SCHEMA_VERSION,
    History,
)
from bot.core.errors import UserError
from bot.core.results import ProbeRecord
from bot.core.verdicts import RunResult, Stage, Verdict


def record(version: str, verdict: Verdict = Verdict.GOOD, stage: Stage = Stage.RUN,
           output: str = "ok\n") -> ProbeRecord:
    return ProbeRecord(index=0, version=version, verdict=verdict, reason=verdict.value,
                       seconds=1.5, result=RunResult(stage, exit_code=0, output=output))


V = "2.13.0.dev202605{:02d}+cpu".format


def test_a_new_file_gets_the_schema_in_wal_mode(tmp_path: Path) -> None:
    with History(tmp_path / "h" / "history.sqlite3") as history:
        assert history.schema_version == SCHEMA_VERSION
    raw = sqlite3.connect(tmp_path / "h" / "history.sqlite3")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "sweeps", "findings", "issues", "notices", "bisections"} <= tables


def test_reopening_keeps_data_and_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    with History(path) as history:
        history.store("s/c", "hash", "opts", record(V(1)))
    with History(path) as history:
        assert history.run_count() == 1
    sqlite3.connect(path).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="newer than this bot's") as raised:
        History(path)
    assert "upgrade torch-bisect-bot" in str(raised.value) and "\n" not in str(raised.value)


def test_two_processes_opening_a_new_history_at_once_both_get_its_schema(
        tmp_path: Path) -> None:
    """Two bisections started at once on a fresh history: the second read the schema version
    before the first migrated, then ran the same migration again under its own transaction,
    and stopped with "duplicate column name ...; it is damaged: move it away" (its unfinished
    bisections lost to a user who did)."""
    path = tmp_path / "history.sqlite3"
    other: list[History] = []

    class SecondToMigrate(History):
        def _tx(self):  # type: ignore[no-untyped-def]
            if not other:  # another process migrates it between our read and our write
                other.append(History(path))
            return super()._tx()

    with SecondToMigrate(path) as history:
        assert history.schema_version == SCHEMA_VERSION
    other[0].close()


def test_lookup_is_keyed_by_script_build_and_options(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        history.store("s/c", "hash", "opts", record(V(1), Verdict.BAD, output="Boom\n"))
        found = history.lookup("hash", V(1), "opts")
        assert found is not None and found.verdict is Verdict.BAD
        assert found.result is not None and found.result.output == "Boom\n"
        assert history.lookup("other-hash", V(1), "opts") is None
        assert history.lookup("hash", V(2), "opts") is None
        assert history.lookup("hash", V(1), "other-opts") is None


def test_a_run_s_judged_signature_is_kept_with_it_and_older_rows_still_read(
        tmp_path: Path) -> None:
    """Its output is kept cut to the tail, which a long message can fill past the traceback's
    header: the signature it was judged to is stored, not judged again from that tail."""
    from dataclasses import replace

    long = ("Traceback (most recent call last):\n  File \"repro.py\", line 1\n"
            "RuntimeError: CompilationError: at 12:4:\n" + "    tmp = tl.load(x)\n" * 2000)
    judged = replace(record(V(1), Verdict.BAD, output=long),
                     signature="RuntimeError: CompilationError: at 12:4:")
    with History(tmp_path / "h.sqlite3") as history:
        history.store("s/c", "h", "o", judged)
        found = history.lookup("h", V(1), "o")
        assert found is not None and found.signature == judged.signature
        assert found.result is not None and "Traceback" not in found.result.output
        # a row stored before the signature was: read as it was, without one
        row = history._db.execute("SELECT rowid, record FROM runs").fetchone()
        older = json.loads(row["record"])
        del older["signature"]
        history._db.execute("UPDATE runs SET record = ? WHERE rowid = ?",
                            (json.dumps(older), row["rowid"]))
        found = history.lookup("h", V(1), "o")
        assert found is not None and found.verdict is Verdict.BAD and found.signature is None


def test_a_failed_install_is_not_reused_and_output_is_trimmed(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        history.store("s/c", "h", "o", record(V(1), Verdict.SKIP, stage=Stage.INSTALL))
        assert history.lookup("h", V(1), "o") is None
        assert history.stored_builds("h", "o") == set()  # no verdict: probed again
        history.store("s/c", "h", "o", record(V(1), Verdict.BAD,
                                              output="x" * (OUTPUT_TAIL * 2) + "END"))
        found = history.lookup("h", V(1), "o")
        assert found is not None and found.result is not None
        assert len(found.result.output) == OUTPUT_TAIL and found.result.output.endswith("END")
        # a passing run keeps less, and every run's output is stored once (in `record`)
        history.store("s/c", "h", "o", record(V(2), output="y" * OUTPUT_TAIL + "END"))
        passed = history.lookup("h", V(2), "o")
        assert passed is not None and passed.result is not None
        assert len(passed.result.output) == GOOD_OUTPUT_TAIL
        stored = history._db.execute("SELECT output_tail, record FROM runs").fetchall()
        assert [len(row[0]) for row in stored] == [3, OUTPUT_TAIL, GOOD_OUTPUT_TAIL]
        assert all("output" not in json.loads(row[1])["result"] for row in stored)


def test_previous_and_last_good_follow_version_order_not_insertion(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        for day, verdict in ((10, Verdict.BAD), (2, Verdict.GOOD), (5, Verdict.GOOD),
                             (7, Verdict.BAD), (8, Verdict.SKIP)):
            history.store("s/c", "h", "o", record(V(day), verdict))
        assert history.previous("h", "o", V(10)) == (V(7), Verdict.BAD)  # the skip is ignored
        assert history.last_good("h", "o", V(10)) == V(5)
        assert history.previous("h", "o", V(2)) is None


def shard_db(path: Path, case: str, day: int) -> dict[str, object]:
    with History(path) as history:
        sweep = history.start_sweep(V(day), "1/2")
        history.store(case, f"hash-{case}", "o", record(V(day), Verdict.BAD), sweep)
        history.add_finding(sweep, case, V(day), "new-failure", {"first_bad": V(day)})
        history.save_bisection(f"{sweep}-b", sweep, case, f"hash-{case}", "o", "found", {})
        history.finish_sweep(sweep)
        return json.loads(json.dumps(history.export([sweep])))


def test_export_then_merge_round_trip_is_idempotent(tmp_path: Path) -> None:
    exports = [shard_db(tmp_path / "a.sqlite3", "s/a", 3), shard_db(tmp_path / "b.sqlite3",
                                                                    "s/b", 3)]
    with History(tmp_path / "collector.sqlite3") as collector:
        assert sum(collector.merge(e) for e in exports) == 2 * 4
        assert sum(collector.merge(e) for e in exports) == 0  # merging again adds nothing
        assert collector.run_count() == 2
        assert sorted(f.case_id for f in collector.pending_findings()) == ["s/a", "s/b"]
        assert collector.lookup("hash-s/a", V(3), "o") is not None


def test_merge_rejects_foreign_columns_and_schemas(tmp_path: Path) -> None:
    export = shard_db(tmp_path / "a.sqlite3", "s/a", 3)
    with History(tmp_path / "c.sqlite3") as collector:
        with pytest.raises(ValueError, match="schema"):
            collector.merge({**export, "schema_version": 99})
        bad = {**export, "runs": [{"uid": "x", "evil); DROP TABLE runs; --": 1}]}
        with pytest.raises(ValueError, match="unknown columns"):
            collector.merge(bad)
        assert collector.run_count() == 0  # the failed merge changed nothing
        with pytest.raises(ValueError, match="expected a JSON object, found list"):
            collector.merge([])
        without = {**export, "runs": [{**export["runs"][0], "verdict": None}]}
        with pytest.raises(ValueError, match="a runs row without verdict"):
            collector.merge(without)
        assert collector.run_count() == 0


def test_a_first_version_history_gains_the_issues_script_hash(tmp_path: Path) -> None:
    """A history written by the first schema: its issues have no script hash, and are still
    found by their case id after the migration."""
    path = tmp_path / "history.sqlite3"
    raw = sqlite3.connect(path)
    raw.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    raw.execute("INSERT INTO issues VALUES ('key', 's/c', 7, ?, NULL, '{}', 'then', 'then')",
                (V(3),))
    raw.commit()
    raw.close()
    with History(path) as history:
        assert history.schema_version == SCHEMA_VERSION
        assert history.open_issues("s/c", "new-hash") == [(7, {})]
        history.follow_case("s/c", "new-hash")  # the case was edited: its issue follows
        assert history.open_issues("s/renamed", "new-hash") == [(7, {})]  # then moved
        history.follow_case("s/renamed", "new-hash")
        assert history.open_issues("s/c") == []


def test_issues_and_notices(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        history.remember_issue("key", "s/c", 7, V(3), {"first_bad": V(3)})
        assert history.open_issues("s/c") == [(7, {"first_bad": V(3)})]
        assert history.add_notice(7, "s/c", "fixed", V(6)) is True
        assert history.add_notice(7, "s/c", "fixed", V(7)) is False
        assert history.has_notice(7, "s/c", "fixed")
        history.mark_fixed("s/c", V(6))
        assert history.open_issues("s/c") == []


def test_an_issue_holds_the_cases_of_one_window_and_what_was_seen_of_each(
    tmp_path: Path
) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        window = {"first_bad": V(3), "last_good": V(2)}
        history.remember_issue("ka", "s/a", 7, V(3), window, seen_in=V(4))
        assert history.window_issues(V(2), V(3)) == [7]
        assert not history.owes_github()  # a comment given before is not given again
        assert history.window_issues(V(1), V(3)) == []  # another last good: another window
        assert history.window_issues(None, V(3)) == []
        # the CUDA builds of the same two dates: the same commits, the same window
        assert history.window_issues(V(2).replace("+cpu", "+cu130"),
                                     V(3).replace("+cpu", "+cu130")) == [7]
        history.remember_issue("kb", "s/b", 7, V(3), window, seen_in=V(4))
        history.saw_again(7, "s/b", V(5), "RuntimeError: other")
        history.mark_fixed("s/a", V(6))
        a, b = history.issue_cases(7)
        assert (a.case_id, a.fixed_in, a.seen_in, a.seen_signature) == ("s/a", V(6), V(4), None)
        assert (b.case_id, b.fixed_in, b.seen_in, b.seen_signature) == (
            "s/b", None, V(5), "RuntimeError: other")
        history.mark_fixed("s/b", V(6))
        assert history.window_issues(V(2), V(3)) == [7]  # fixed, but it may still be open
        history.forget_issue(7)
        assert history.window_issues(V(2), V(3)) == []  # gone
        assert len(history.issue_cases(7)) == 2  # fixed ones stay; only a gone issue's go
        history.remember_issue("kc", "s/c", 8, V(3), window)
        history.forget_issue(8)
        assert history.issue_cases(8) == []


def test_what_github_is_owed_stays_until_it_is_paid(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        history.remember_issue("ka", "s/a", 7, V(3), {"first_bad": V(3)})
        history.mark_stale(7)
        history.mark_stale(7, retitle=True)
        history.mark_stale(7)  # a body-only debt does not forgive the title
        history.add_notice(7, "s/a", "fixed", V(6), previous=V(5))
        history.add_notice(7, "s/b", "joined", V(6))
        assert history.stale_issues() == [(7, True)] and history.owes_github()
        notices = history.unposted_notices()[7]
        assert [(n.case_id, n.kind, n.previous) for n in notices] == [
            ("s/a", "fixed", V(5)), ("s/b", "joined", None)]
        history.written(7, "[sweep] title")
        history.notices_posted(7, notices)
        assert not history.owes_github() and history.bot_title(7) == "[sweep] title"
        assert history.has_notice(7, "s/a", "fixed")  # given: never given again
        assert history.add_notice(7, "s/a", "fixed", V(9)) is False
        history.mark_stale(8)
        history.forget_issue(8)  # gone: nothing is owed to it
        assert history.stale_issues() == []


def test_a_second_version_history_gains_what_the_sweeps_saw_of_its_issues_and_owe(
    tmp_path: Path
) -> None:
    path = tmp_path / "history.sqlite3"
    raw = sqlite3.connect(path)
    raw.executescript(MIGRATIONS[0] + MIGRATIONS[1] + "PRAGMA user_version = 2;")
    raw.execute("INSERT INTO issues VALUES ('key', 's/c', 7, ?, NULL, ?, 'then', 'then', 'h')",
                (V(3), json.dumps({"first_bad": V(3), "last_good": V(2)})))
    raw.execute("INSERT INTO notices VALUES (7, 's/c', 'fixed', ?, 'then')", (V(6),))
    raw.commit()
    raw.close()
    with History(path) as history:
        assert history.schema_version == SCHEMA_VERSION
        [case] = history.issue_cases(7)
        assert (case.case_id, case.seen_in, case.seen_signature) == ("s/c", None, None)
        assert history.window_issues(V(2), V(3)) == [7]
        assert not history.owes_github()  # a comment given before is not given again


def test_pruning_forgets_old_runs_but_what_the_next_sweep_reads(tmp_path: Path) -> None:
    """A year of 200 cases is 176 MB, carried to every shard every night, and grew for good."""
    clock = ["2026-01-01T00:00:00+00:00"]
    path = tmp_path / "h.sqlite3"
    with History(path, now=lambda: clock[0]) as history:
        sweep = history.start_sweep(V(1))
        for day in range(1, 21):  # old: a case passing to the 10th, failing from the 11th
            verdict = Verdict.GOOD if day <= 10 else Verdict.BAD
            history.store("s/c", "hash", "opts", record(V(day), verdict, output="x" * 5000),
                          sweep)
        history.store("s/c", "hash", "opts", record(V(21), Verdict.SKIP), sweep)
        history.store("s/old", "old-hash", "opts", record(V(5)), sweep)  # an edited case's text
        history.store("s/old", "new-hash", "opts", record(V(4), Verdict.BAD), sweep)
        handled = history.add_finding(sweep, "s/c", V(11), "new-failure", {})
        history.mark_handled(handled)
        history.add_finding(sweep, "s/c", V(20), "still-failing", {})  # not filed yet
        history.save_bisection("done", sweep, "s/c", "hash", "opts", "finished", {})
        history.save_bisection("resumable", None, "local-bisect", "h", "o", "running", {})
        history.remember_issue("key", "s/c", 7, V(11), {"first_bad": V(11)})
        history.add_notice(7, "s/c", "fixed", V(12))
        clock[0] = "2026-03-01T00:00:00+00:00"
        recent = history.start_sweep(V(22))
        history.store("s/c", "hash", "opts", record(V(22), Verdict.BAD), recent)
        wal = path.with_name(path.name + "-wal")
        before = path.stat().st_size + wal.stat().st_size

        gone = history.prune(keep_days=30)
        assert gone == {"runs": 20, "findings": 1, "bisections": 1, "sweeps": 1}
        assert history.previous("hash", "opts", V(23)) == (V(22), Verdict.BAD)
        assert history.last_good("hash", "opts", V(23)) == V(10)  # a bisection starts there
        assert history.previous_of_case("s/old", V(23)) == (V(5), Verdict.GOOD)
        assert history.stored_builds("hash", "opts") == {V(10), V(22)}
        assert [f.nightly for f in history.pending_findings()] == [V(20)]
        assert history.bisection_row("resumable") is not None
        assert history.bisection_row("done") is None
        assert history.open_issues("s/c") == [(7, {"first_bad": V(11)})]
        assert history.has_notice(7, "s/c", "fixed")
        assert path.stat().st_size + wal.stat().st_size < before / 2  # compacted, in the file
        assert wal.stat().st_size == 0
        assert history.prune(keep_days=30) == {"runs": 0, "findings": 0, "bisections": 0,
                                               "sweeps": 0}
        with pytest.raises(ValueError, match="0 or more"):
            history.prune(-1)


def test_the_newest_nightly_an_open_issue_failed_in_is_kept_whatever_the_order_of_sweeps(
        tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite3") as history:
        history.remember_issue("key", "s/c", 7, V(4), {"first_bad": V(4)})
        assert history.open_failures("s/c") == [V(4)]
        history.saw_again(7, "s/c", V(9), "RuntimeError")
        history.saw_again(7, "s/c", V(6), "RuntimeError")  # a missed night swept late
        assert history.open_failures("s/c") == [V(9)]
        history.saw_again(7, "s/c", "2.13.0.dev20260510+cu130", "RuntimeError")
        assert history.open_failures("s/c") == ["2.13.0.dev20260510+cu130"]
        history.mark_fixed("s/c", V(11))
        assert history.open_failures("s/c") == []


def test_pruning_forgets_an_old_sweep_bisection_left_running_but_not_a_resumable_one(
        tmp_path: Path) -> None:
    """A sweep killed in a bisection (Ctrl-C, the runner's SIGTERM) leaves its checkpoint
    `running`: read as a `bisect` that can be resumed, every prune kept it for ever, though
    no process resumes it (the next sweep bisects the case again, from its memo)."""
    clock = ["2026-01-01T00:00:00+00:00"]
    with History(tmp_path / "h.sqlite3", now=lambda: clock[0]) as history:
        sweep = history.start_sweep(V(1))
        history.save_bisection("killed", sweep, "s/c", "hash", "opts", "running", {})
        history.save_bisection("resumable", None, "local-bisect", "h", "o", "running", {})
        clock[0] = "2026-03-01T00:00:00+00:00"
        assert history.prune(keep_days=30)["bisections"] == 1
        assert history.bisection_row("killed") is None
        assert history.bisection_row("resumable") is not None
