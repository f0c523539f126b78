"""A bisection killed with SIGKILL continues where it stopped: same outcome, no stored probe run twice."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.helpers import BISECT_BOT, bisect_argv, counting_script, run_lines

COMPARED = ("status", "first_bad", "last_good", "candidates")


def counted(stored):
    """"1 probe", "2 probes": what the resume says it has."""
    return f"{len(stored)} probe" + ("" if len(stored) == 1 else "s")


def _column(db: Path, query: str) -> list[str]:
    """The first column of `query` on the bisection's db; none before its schema is there."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        try:
            return [row[0] for row in conn.execute(query)]
        except sqlite3.OperationalError:  # the schema is not there yet
            return []


def _stored_versions(db: Path) -> list[str]:
    """The builds whose probe results the bisection has stored so far."""
    return _column(db, "SELECT build_version FROM runs")


def _checkpointed(db: Path) -> bool:
    """Whether a bisection has saved its first checkpoint (it holds its lock from before)."""
    if not db.exists():
        return False
    with sqlite3.connect(db) as conn:
        try:
            return bool(conn.execute("SELECT count(*) FROM bisections").fetchone()[0])
        except sqlite3.OperationalError:
            return False


def _assert_no_stored_probe_ran_again(lines: list[str], stored: list[str]) -> None:
    """The probe cut off by the kill has no stored result, so it may run again; no other may.

    (Its reproducer can finish its run in the moment between the poll and the kill.)
    """
    assert all(lines.count(version) == 1 for version in stored), (lines, stored)
    assert len(lines) <= len(set(lines)) + 1, lines


def _tree(root: int) -> list[int]:
    """`root` and its descendants (the reproducer runs in its own session, so not its group)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def _kill_after_probes(argv: list[str], db: Path, probes: int) -> None:
    """SIGKILL the bot and everything it started, as when a runner is lost mid-bisection."""
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        while len(_stored_versions(db)) < probes and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, "the bisection ended before it could be interrupted"
    finally:
        _kill_tree(process)


def _killed_after_one_probe(index_server, cache_dir: Path, tmp_path: Path
                            ) -> tuple[list[str], Path, Path]:
    """A bisection of the counting script (1 s runs) killed once its first probe is stored:
    its command, its history and the file of its runs."""
    script, runs = counting_script(tmp_path, sleep=1.0)
    db = tmp_path / "h.db"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                       tmp_path / "r.json")
    _kill_after_probes(argv, db, probes=1)
    return argv, db, runs


def _kill_tree(process: subprocess.Popen) -> None:
    # Freeze the bot first, so it cannot start a reproducer between the scan and the kill.
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGSTOP)
    for pid in _tree(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def _statuses(db: Path) -> list[str]:
    return _column(db, "SELECT status FROM bisections")


def test_a_killed_bisection_resumes_without_rerunning_probes(index_server, cache_dir, tmp_path):
    plain_dir, killed_dir = tmp_path / "plain", tmp_path / "killed"
    plain_dir.mkdir()
    killed_dir.mkdir()
    url = index_server.variant_url("cpu")

    script, _ = counting_script(plain_dir)
    subprocess.run(bisect_argv(script, url, cache_dir, plain_dir / "h.db", plain_dir / "r.json"),
                   check=True, capture_output=True)
    expected = json.loads((plain_dir / "r.json").read_text())

    script, runs = counting_script(killed_dir, sleep=1.0)
    argv = bisect_argv(script, url, cache_dir, killed_dir / "h.db", killed_dir / "r.json")
    _kill_after_probes(argv, killed_dir / "h.db", probes=2)
    stored = _stored_versions(killed_dir / "h.db")
    # A stalled test process may see the kill land a probe later than asked: count what is there.
    assert len(stored) >= 2 and set(stored) <= set(run_lines(runs))
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr and f"{counted(stored)} already done" in done.stderr

    resumed = json.loads((killed_dir / "r.json").read_text())
    assert {key: resumed[key] for key in COMPARED} == {key: expected[key] for key in COMPARED}
    assert [p["version"] for p in resumed["probes"]] == [p["version"] for p in expected["probes"]]
    lines = run_lines(runs)
    assert len(set(lines)) == len(expected["probes"])
    _assert_no_stored_probe_ran_again(lines, stored)


def test_a_bisection_killed_mid_round_with_two_workers_keeps_each_finished_probe(
        index_server, cache_dir, tmp_path):
    """Killed after one probe of a round of two: the finished one is kept (per probe, not per
    round), and the resume runs none of what was stored again."""
    script, runs = counting_script(tmp_path, sleep=1.0)
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, tmp_path / "h.db",
                       tmp_path / "r.json", "--workers", "2")
    _kill_after_probes(argv, tmp_path / "h.db", probes=1)
    stored = _stored_versions(tmp_path / "h.db")
    assert stored and set(stored) <= set(run_lines(runs))
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{counted(stored)} already done" in done.stderr
    resumed = json.loads((tmp_path / "r.json").read_text())
    assert resumed["first_bad"] == "2.13.0.dev20260521+cpu"
    assert set(stored) <= {p["version"] for p in resumed["probes"]}
    _assert_no_stored_probe_ran_again(run_lines(runs), stored)


def test_a_verdict_stored_after_the_last_checkpoint_is_in_the_resumed_report(
        index_server, cache_dir, tmp_path):
    """A probe that ended after the last checkpoint (a failure held back for the bad end, as
    in a round of two) is only in the memo. The resumed plan may never ask for its build (its
    splits move to environments the killed run made): the verdict is still the resumed run's,
    in its report, and not run again. Planted here on a build the search never goes near."""
    argv, db, runs = _killed_after_one_probe(index_server, cache_dir, tmp_path)
    with sqlite3.connect(db) as conn:
        [state] = [json.loads(row[0]) for row in conn.execute("SELECT state FROM bisections")]
        planted = state["resume"]["plan"]["builds"][1]["version"]  # just after the good end
        row = list(conn.execute("SELECT * FROM runs").fetchone())
        record = json.loads(row[11])
        record.update(version=planted, verdict="good", reason="passed", signature=None)
        row[0], row[4], row[6], row[11] = "planted", planted, "good", json.dumps(record)
        conn.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(row))})", row)
    stored = _stored_versions(db)
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"{counted(stored)} already done" in done.stderr
    resumed = json.loads((tmp_path / "r.json").read_text())
    assert resumed["first_bad"] == "2.13.0.dev20260521+cpu"
    assert planted in {p["version"] for p in resumed["probes"]}, resumed["probes"]
    assert planted not in run_lines(runs)


def test_resume_command_lists_and_continues_the_newest(index_server, cache_dir, tmp_path):
    argv, db, runs = _killed_after_one_probe(index_server, cache_dir, tmp_path)
    stored = _stored_versions(db)
    assert stored
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert len(listed.stdout.strip().splitlines()) == 1 and "repro.py" in listed.stdout
    assert f"  {counted(stored)}  " in listed.stdout  # as many as the resume says it has
    done = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{counted(stored)} already done" in done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "found"
    _assert_no_stored_probe_ran_again(run_lines(runs), stored)
    again = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                           capture_output=True, text=True, check=True)
    assert again.stdout.strip() == ""
    nothing = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                             text=True)
    assert nothing.returncode == 2 and "no unfinished bisection" in nothing.stderr
    assert "Traceback" not in nothing.stderr


def test_a_bisection_killed_in_its_first_round_is_resumable(index_server, cache_dir, tmp_path):
    script, runs = counting_script(tmp_path, sleep=3.0)
    db = tmp_path / "h.db"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                       tmp_path / "r.json")
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        while not db.exists() and process.poll() is None:
            time.sleep(0.05)
        time.sleep(1.5)  # installed by now; the first probe's reproducer sleeps for 3 s
    finally:
        os.kill(process.pid, signal.SIGKILL)  # the reproducer dies with it (PR_SET_PDEATHSIG)
        process.wait()
    assert run_lines(runs) == [], "the kill was meant to land in the first probe"
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert len(listed.stdout.strip().splitlines()) == 1


def test_another_option_starts_afresh_and_says_the_unfinished_one_is_kept(index_server,
                                                                           cache_dir, tmp_path):
    argv, db, _ = _killed_after_one_probe(index_server, cache_dir, tmp_path)
    [uid] = [line.split()[0] for line in subprocess.run(
        [BISECT_BOT, "resume", "--list", "--db", str(db)], capture_output=True, text=True,
        check=True).stdout.splitlines()]
    other = subprocess.run([*argv, "--timeout", "300"], capture_output=True, text=True)
    assert other.returncode == 0, other.stderr
    assert f"`bisect-bot resume {uid} --db {db}` continues it; this one starts afresh" in \
        other.stderr
    assert "resuming" not in other.stderr


def test_the_same_bisection_twice_at_once_is_refused_and_listed_as_running(
        index_server, cache_dir, tmp_path):
    """Started again (or resumed) while it ran, the same bisection used to run every probe
    left a second time, side by side, and the one that ended last wrote the reports."""
    script, runs = counting_script(tmp_path, sleep=0.0)
    hold = tmp_path / "hold"  # each run waits while it is there: the first is surely running
    hold.touch()
    script.write_text(f"import os, time\nwhile os.path.exists({str(hold)!r}):\n"
                      "    time.sleep(0.05)\n" + script.read_text())
    db = tmp_path / "h.db"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                       tmp_path / "r.json")
    first = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             text=True)
    try:
        while not _checkpointed(db) and first.poll() is None:
            time.sleep(0.05)
        assert first.poll() is None, "the bisection ended before the second one started"
        again = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        resumed = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                                 text=True, timeout=60)
        listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                                capture_output=True, text=True, timeout=60)
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
        hold.unlink()
    for refused in (again, resumed):
        assert refused.returncode == 2, refused.stderr
        assert f"is running already, in process {first.pid}" in refused.stderr
    assert f"(running, process {first.pid})" in listed.stdout
    uid = listed.stdout.split()[0]
    assert f"`bisect-bot resume {uid} --db {db}` continues it" in err  # its id and history
    done = subprocess.run([BISECT_BOT, "resume", uid, "--db", str(db)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr  # once the first has stopped, it goes on
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "found"
    _assert_no_stored_probe_ran_again(run_lines(runs), _stored_versions(db))


def test_another_sandbox_is_another_bisection_whose_verdicts_are_not_taken(
        index_server, cache_dir, tmp_path):
    """The namespace sandbox hides /tmp: there, a reproducer that reads a file of its folder
    fails on every build. Run again with --sandbox none, it used to resume those verdicts
    (the sandbox was not part of the bisection's id) and name the wrong first bad nightly."""
    data = tmp_path / "data.txt"
    data.write_text("x")
    script, _ = counting_script(tmp_path, sleep=1.0)
    script.write_text(f"open({str(data)!r}).read()\n" + script.read_text())
    db = tmp_path / "h.db"
    confined = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                           tmp_path / "r.json")
    confined[confined.index("--sandbox") + 1] = "namespace"
    _kill_after_probes(confined, db, probes=2)
    assert len(_stored_versions(db)) >= 2
    unconfined = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                             tmp_path / "r.json")
    done = subprocess.run(unconfined, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" not in done.stderr
    assert "this one starts afresh" in done.stderr  # the confined one is kept, resumable
    assert json.loads((tmp_path / "r.json").read_text())["first_bad"] == "2.13.0.dev20260521+cpu"


def test_a_kill_during_the_triage_keeps_the_answer_and_the_same_command_goes_on_from_it(
        index_server, cache_dir, tmp_path):
    """The triage and the commit tier run after the bisection is checkpointed as finished. A
    SIGKILL there lost the answer (printed and written only after them), and the same command
    then bisected afresh."""
    script, runs = counting_script(tmp_path, sleep=1.0)
    db, report = tmp_path / "h.db", tmp_path / "r.json"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db, report)
    with_triage = [arg for arg in argv if arg != "--no-triage"]
    process = subprocess.Popen(with_triage, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        while _statuses(db) != ["finished"] and process.poll() is None:
            time.sleep(0.05)
        time.sleep(2.0)  # into the triage's runs (a run of the reproducer takes a second)
        assert process.poll() is None, "the triage ended before the kill"
    finally:
        _kill_tree(process)
    assert process.stdout is not None
    assert "first bad nightly 2.13.0.dev20260521+cpu" in process.stdout.read()
    assert json.loads(report.read_text())["first_bad"] == "2.13.0.dev20260521+cpu"
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert "(answer found; the triage or commit tier was cut short)" in listed.stdout
    report.unlink()
    ran = len(run_lines(runs))
    again = subprocess.run(argv, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "its answer was found before the triage or the commit tier was cut short" in \
        again.stderr
    assert len(run_lines(runs)) == ran  # no probe ran again
    assert "first bad nightly 2.13.0.dev20260521+cpu" in again.stdout
    assert json.loads(report.read_text())["first_bad"] == "2.13.0.dev20260521+cpu"
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert listed.stdout.strip() == ""  # over: the same command would now start afresh


# torch.cuda of the builds below: a GPU is there while the marker file is (the GPU node).
GPU_WHILE = '''import os
_MARKER = {marker!r}


def is_available():
    return os.path.exists(_MARKER)


def device_count():
    return 1 if is_available() else 0
'''


@pytest.fixture
def gpu_node(tmp_path):
    """An index of 16 nightlies (bad from 05-10) whose torch sees a GPU while the marker file
    is there, and that marker."""
    from bot.demo.synthetic_torch import package_files
    from bot.demo.wheels import build_wheel
    from tests.fakes.mirror import IndexServer

    marker = tmp_path / "gpu-here"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for day in range(1, 17):
        version = f"2.13.0.dev202605{day:02d}+cpu"
        files = {**package_files(version, "0" * 40, None),
                 "torch/cuda.py": GPU_WHILE.format(marker=str(marker))}
        build_wheel(tmp_path / "mirror" / "cpu", "torch", version, files,
                    f"{tag}-{tag}-manylinux_2_28_x86_64")
    with IndexServer(tmp_path / "mirror") as server:
        yield server.variant_url("cpu"), marker


def test_a_resume_where_the_gpu_check_fails_stops_unfinished_and_keeps_the_probes(
        gpu_node, tmp_path):
    """Resumed on a host whose torch sees no GPU, the bisection used to be finished as
    "cannot test" there, its probes from the GPU node thrown away with its resumable row."""
    url, marker = gpu_node
    cache_dir = tmp_path / "cache"  # its builds are not the shared mirror's of the same names
    runs = tmp_path / "runs.txt"
    script = tmp_path / "cuda_repro.py"
    script.write_text("import time\nimport torch\n"
                      "assert torch.cuda.is_available(), 'No CUDA GPUs are available'\n"
                      f"time.sleep(1.0)\nopen({str(runs)!r}, 'a').write(torch.__version__ + '\\n')\n"
                      "raise SystemExit(torch.__version__ >= '2.13.0.dev20260510')\n")
    db, report = tmp_path / "h.db", tmp_path / "r.json"
    argv = [arg if arg != "2026-05-02" else "2026-05-01" for arg in
            bisect_argv(script, url, cache_dir, db, report, "--needs-cuda", "yes")]
    marker.touch()
    _kill_after_probes(argv, db, probes=2)
    stored = _stored_versions(db)
    marker.unlink()  # resumed on a host without a GPU
    elsewhere = subprocess.run(argv, capture_output=True, text=True)
    assert elsewhere.returncode == 7, elsewhere.stderr
    assert "cannot go on here: needs a CUDA GPU; torch.cuda.is_available() is False" in \
        elsewhere.stderr
    assert f"Its {counted(stored)} done are kept: `bisect-bot resume " in elsewhere.stderr
    assert not report.exists()
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert f"  {counted(stored)}  cuda_repro.py" in listed.stdout
    marker.touch()  # back on the GPU node
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr and f"{counted(stored)} already done" in done.stderr
    assert json.loads(report.read_text())["first_bad"] == "2.13.0.dev20260510+cpu"
    _assert_no_stored_probe_ran_again(run_lines(runs), stored)


def test_resume_with_a_relative_db_from_another_folder_continues_in_that_db(
        index_server, cache_dir, tmp_path):
    """`resume --db work/h.db` from the folder above: the db was opened from here, and then,
    after the move into the bisection's own folder, the same relative path made a new one."""
    work = tmp_path / "work"
    work.mkdir()
    script, runs = counting_script(work, sleep=1.0)
    argv = bisect_argv(Path("repro.py"), index_server.variant_url("cpu"), cache_dir,
                       Path("h.db"), Path("r.json"))
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               cwd=work)
    try:
        while len(_stored_versions(work / "h.db")) < 1 and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, "the bisection ended before it could be interrupted"
    finally:
        _kill_tree(process)
    stored = _stored_versions(work / "h.db")
    done = subprocess.run([BISECT_BOT, "resume", "--db", "work/h.db"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{counted(stored)} already done" in done.stderr
    assert not (work / "work").exists()  # no second history
    assert json.loads((work / "r.json").read_text())["first_bad"] == "2.13.0.dev20260521+cpu"
    # where it went, not `r.json`, which from here is another file
    assert f"JSON report: {work / 'r.json'}\n" in done.stdout, done.stdout
    _assert_no_stored_probe_ran_again(run_lines(runs), stored)


LONG_FAILURE = """\
import time
import torch
day = torch.__version__.split("dev")[1][:8]
time.sleep(8 if day == "20260531" else 0.5)
if day >= "20260510":
    raise RuntimeError("CompilationError: at 12:4:\\n" + "\\n".join(
        f"    tmp{i} = tl.load(in_ptr0 + (x0), xmask)" for i in range(300)))
"""


def _stored_bad(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        try:
            return [row[0] for row in conn.execute("SELECT build_version FROM runs WHERE "
                                                   "verdict = 'bad'")]
        except sqlite3.OperationalError:
            return []


def test_a_remembered_failure_keeps_its_signature_when_its_message_is_long(
        index_server, cache_dir, tmp_path):
    """An exception whose message is longer than the output the history keeps (8,000
    characters): judged again from that tail, which no longer holds the traceback's header,
    a remembered BAD became `exit 1`, and so SKIP, "different failure", and more probes."""
    script = tmp_path / "repro.py"
    script.write_text(LONG_FAILURE)
    db, report = tmp_path / "h.db", tmp_path / "r.json"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db, report,
                       "--workers", "2")
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:  # a failure stored while the bad end (8 s) that defines the signature still runs
        while not [v for v in _stored_bad(db) if "20260531" not in v] and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, "the bisection ended before it could be interrupted"
    finally:
        _kill_tree(process)
    remembered = [v for v in _stored_bad(db) if "20260531" not in v]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    data = json.loads(report.read_text())
    verdicts = {p["version"]: (p["verdict"], p["reason"]) for p in data["probes"]}
    assert all(verdicts[v] == ("bad", "RuntimeError: CompilationError: at 12:4:")
               for v in remembered), verdicts
    assert data["first_bad"] == "2.13.0.dev20260510+cpu"
    assert not any(reason.startswith("different failure") for _, reason in verdicts.values())


def test_resume_without_an_id_takes_the_newest_that_no_process_runs(index_server, cache_dir,
                                                                     tmp_path):
    """The newest unfinished bisection is often the one running in another terminal: `resume`
    took it, and was refused ("running already"), with the killed one left behind."""
    killed, live = tmp_path / "killed", tmp_path / "live"
    killed.mkdir()
    live.mkdir()
    db = tmp_path / "h.db"
    script, runs = counting_script(killed, sleep=1.0)
    _kill_after_probes(bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                                   killed / "r.json"), db, probes=1)
    stored = _stored_versions(db)
    hold = live / "hold"
    hold.touch()
    other, _ = counting_script(live)
    other.write_text(f"import os, time\nwhile os.path.exists({str(hold)!r}):\n"
                     "    time.sleep(0.05)\n" + other.read_text())
    running = subprocess.Popen(bisect_argv(other, index_server.variant_url("cpu"), cache_dir,
                                           db, live / "r.json"),
                               stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        while len(_statuses(db)) < 2 and running.poll() is None:
            time.sleep(0.05)
        time.sleep(1.5)  # its first checkpoint is saved after the killed one's last
        assert running.poll() is None
        done = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                              text=True, timeout=300)
    finally:
        running.send_signal(signal.SIGINT)
        running.wait(timeout=60)
        hold.unlink()
    assert done.returncode == 0, done.stderr
    assert f"{counted(stored)} already done" in done.stderr
    assert json.loads((killed / "r.json").read_text())["first_bad"] == "2.13.0.dev20260521+cpu"
    _assert_no_stored_probe_ran_again(run_lines(runs), stored)


@pytest.fixture(scope="module")
def listing_eight(tmp_path_factory):
    """45 nightlies from 02-01 of which the index lists the newest 8 (from 03-10), as the
    nightly index lists its newest 60: a search without a good end steps back past them."""
    import datetime as dt

    from tests.fakes.mirror import IndexServer, build_mirror

    mirror = build_mirror(tmp_path_factory.mktemp("listing-eight"), start=dt.date(2026, 2, 1),
                          days=45, first_bad=dt.date(2026, 3, 3), missing=(),
                          cut=dt.date(2026, 2, 20))
    with IndexServer(mirror.root, listed=8) as server:
        yield server.variant_url("cpu")


def test_a_resume_keeps_the_options_only_the_first_run_knew(listing_eight, tmp_path):
    """`resume` reads no issue again and took the new run's options: the platform the issue
    reports was gone from the report, and `back_to`, the year a search without a good end may
    step back, was recomputed from the oldest build it had reached, a step further back."""
    issue = tmp_path / "issue.md"
    issue.write_text("Fails on every build.\n\n```python\nimport time\nimport torch\n"
                     "time.sleep(0.5)\nraise SystemExit('fails on every build')\n```\n\n"
                     "### Versions\nOS: macOS 14.1.1 (arm64)\n")
    db, report = tmp_path / "h.db", tmp_path / "r.json"
    argv = [BISECT_BOT, "bisect", str(issue), "--index", listing_eight, "--cache-dir",
            str(tmp_path / "cache"), "--no-default-packages", "--sandbox", "none", "--db", str(db),
            "--no-commit-tier", "--no-triage", "--no-prefetch", "--json", str(report),
            "--work-dir", str(tmp_path / "work")]
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:  # killed once the search has stepped back past the listed nightlies
        while not [v for v in _stored_versions(db) if v < "2.13.0.dev20260310"] \
                and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, "the bisection ended before it could be interrupted"
    finally:
        _kill_tree(process)
    done = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 5, done.stderr  # not a regression: it fails on every build
    options = json.loads(report.read_text())["options"]
    assert options["back_to"] == "2025-03-09"  # a year before the oldest listed nightly
    assert options["reported_platform"] == "macOS"


def test_a_stored_install_failure_is_not_counted_as_a_probe_done(index_server, cache_dir,
                                                                 tmp_path):
    """A build whose install failed in the round a kill cut short is in the memo, but is no
    verdict and is probed again: "N probes already done" (and `--list`) counted it."""
    from bot.adapters.history import History
    from bot.core.results import ProbeRecord
    from bot.core.verdicts import RunResult, Stage, Verdict
    from bot.jobs.resume import CASE_ID

    argv, db, _ = _killed_after_one_probe(index_server, cache_dir, tmp_path)
    stored = _stored_versions(db)
    with History(db) as history:
        (row,) = history.bisection_rows(CASE_ID, "running")
        failed = ProbeRecord(index=3, version="2.13.0.dev20260505+cpu", verdict=Verdict.SKIP,
                             reason="install failed: connection reset", seconds=0.0,
                             result=RunResult(Stage.INSTALL, error="connection reset"))
        assert failed.version not in stored
        history.store(CASE_ID, row["state"]["resume"]["memo_key"], row["uid"], failed)
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True, check=True)
    assert f"  {counted(stored)}  " in listed.stdout, listed.stdout
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"resuming {row['uid']}: {counted(stored)} already done" in done.stderr


def test_other_script_arguments_are_another_bisection_whose_verdicts_are_not_taken(
        index_server, cache_dir, tmp_path):
    """With `--since 20260510` the script fails from the 10th on, with `--since 20260521` from
    the planted nightly on. Killed, and run again with the other arguments, it would have
    resumed the first one's verdicts if the arguments were not part of the bisection's id
    (its memo), and named a first bad nightly before the 21st."""
    script, _ = counting_script(tmp_path, sleep=1.0)
    script.write_text("import argparse\nparser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--since', required=True)\n"
                      "since = parser.parse_args().since\n"
                      + script.read_text().replace('< "20260521"', "< since"))
    db = tmp_path / "h.db"
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, db,
                       tmp_path / "r.json")
    _kill_after_probes([*argv, "--args=--since 20260510"], db, probes=2)
    assert len(_stored_versions(db)) >= 2
    done = subprocess.run([*argv, "--args=--since 20260521"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "resuming" not in done.stderr
    assert "this one starts afresh" in done.stderr  # the other one is kept, resumable
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["first_bad"] == "2.13.0.dev20260521+cpu"
    assert report["options"]["script_args"] == ["--since", "20260521"]
    # The same arguments again: that one resumes, and finds its own.
    again = subprocess.run([*argv, "--args=--since 20260510"], capture_output=True, text=True)
    assert "resuming" in again.stderr and again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "r.json").read_text())["first_bad"] == \
        "2.13.0.dev20260510+cpu"


def test_a_damaged_checkpoint_is_named_and_its_bisection_starts_afresh(index_server, cache_dir,
                                                                        tmp_path):
    """A checkpoint row whose state was cut short (a disk full mid-write, an edit by hand):
    `resume --list`, `resume` and the same `bisect` command each stopped with a raw
    JSONDecodeError traceback, and the history looked unusable as a whole."""
    argv, db, _ = _killed_after_one_probe(index_server, cache_dir, tmp_path)
    with sqlite3.connect(db) as conn:
        uid, state = conn.execute("SELECT uid, state FROM bisections").fetchone()
        conn.execute("UPDATE bisections SET state = ?", (state[:len(state) // 2],))
    listed = subprocess.run([BISECT_BOT, "resume", "--list", "--db", str(db)],
                            capture_output=True, text=True)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert f"checkpoint of bisection {uid}" in listed.stderr and "damaged" in listed.stderr
    resumed = subprocess.run([BISECT_BOT, "resume", uid, "--db", str(db)], capture_output=True,
                             text=True)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr, resumed.stderr
    assert "damaged" in resumed.stderr
    again = subprocess.run(argv, capture_output=True, text=True)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert "starts that bisection afresh" in again.stderr
    assert json.loads((tmp_path / "r.json").read_text())["first_bad"] == "2.13.0.dev20260521+cpu"


def test_the_run_folder_a_killed_bisection_left_is_removed_by_the_next(index_server, cache_dir,
                                                                        tmp_path):
    """SIGKILLed while a reproducer runs, the bot left its run folder (the reproducer's TMPDIR,
    where Inductor and Triton put their caches) in the temporary directory for good."""
    script, _ = counting_script(tmp_path, sleep=3.0)
    temp = tmp_path / "temp"
    temp.mkdir()
    argv = bisect_argv(script, index_server.variant_url("cpu"), cache_dir, tmp_path / "h.db",
                       tmp_path / "r.json")
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               env={**os.environ, "TMPDIR": str(temp)})
    try:
        while not list(temp.glob("tbb-run-*/repro.py")) and process.poll() is None:
            time.sleep(0.05)
    finally:
        _kill_tree(process)
    left = list(temp.glob("tbb-run-*"))
    assert left, "the kill was meant to land while a reproducer ran"
    done = subprocess.run(argv, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr
    assert not any(folder.exists() for folder in left)


def test_an_install_that_failed_before_a_kill_is_tried_again_by_the_resume(mirror, tmp_path):
    """The index's wheels were missing (404: a mirror still syncing) for a while, then the
    bot was killed: the checkpoint kept each failed install as a SKIP verdict, so the resume
    counted them among the probes done, never tried them again once they were there, and
    reported "could not be installed: HTTP 404" (an answer `ambiguous` where they hid the
    boundary). (A 503 stops the bisection itself now: an outage, exit 7.)"""
    from bot.demo.index_server import Fault, IndexServer

    script, _ = counting_script(tmp_path)
    with IndexServer(mirror.root) as server:
        argv = bisect_argv(script, server.variant_url("cpu"), tmp_path / "cache",
                           tmp_path / "h.db", tmp_path / "r.json")
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        assert process.stdout is not None
        try:
            for line in process.stdout:
                if line.startswith("[probe 2] "):
                    server.faults.append(Fault(".whl", status=404, times=10**6))
                if line.startswith("[probe 4/"):  # probe 3's failed install is checkpointed
                    break
        finally:
            _kill_tree(process)
            process.stdout.close()
        server.faults.clear()
        done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    resuming = [line for line in done.stderr.splitlines() if line.startswith("resuming")]
    assert resuming and resuming[0].endswith(": 2 probes already done"), resuming
    assert "\n[probe 3/~" in done.stderr and "[probe 1/" not in done.stderr  # numbered on
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["first_bad"] == "2.13.0.dev20260521+cpu"
    assert not [p for p in report["probes"] if "install failed" in p["reason"]], report["probes"]


def test_a_resume_whose_starting_folder_is_gone_takes_its_relative_paths_from_there(
        index_server, tmp_path):
    """`--cache-dir ../cache --json r.json`, started in a folder deleted since: the resume ran
    where it was run, made a fresh cache beside it (every build installed again) and wrote
    the report there, without a word."""
    started, elsewhere = tmp_path / "started", tmp_path / "x" / "y"
    started.mkdir()
    elsewhere.mkdir(parents=True)
    script, _ = counting_script(tmp_path, sleep=1.0)  # its runs.txt outlives `started`
    shutil.copy(script, started)
    db = tmp_path / "h.db"
    argv = bisect_argv(Path(script.name), index_server.variant_url("cpu"), Path("../cache"), db,
                       Path("r.json"))
    process = subprocess.Popen(argv, cwd=started, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        while not _stored_versions(db) and process.poll() is None:
            time.sleep(0.05)
    finally:
        _kill_tree(process)
    shutil.rmtree(started)
    done = subprocess.run([BISECT_BOT, "resume", "--db", str(db)], cwd=elsewhere,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"started in, {started}, is gone" in done.stderr
    assert not (tmp_path / "x" / "cache").exists() and (tmp_path / "cache" / "envs").is_dir()
    assert json.loads((started / "r.json").read_text())["first_bad"] == "2.13.0.dev20260521+cpu"
