"""`bisect-bot bisect` and `bisect-bot demo` end to end: real uv, real HTTP, real subprocesses."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bot.core.bisection import Bisection
from bot.core.builds import Build, WheelLink
from bot.core.report import rerun_command
from bot.core.results import BisectResult
from bot.core.verdicts import Verdict
from bot.jobs.cli import build_parser, main
from tests.fakes.uv import hide_uv, old_uv

BISECT_BOT = shutil.which("bisect-bot", path=str(Path(sys.executable).parent))


def bisect(args, capsys):
    code = main(["bisect", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bisects_to_the_planted_nightly(index_server, mirror, cache_dir, example_script,
                                        tmp_path, capsys):
    report = tmp_path / "report.json"
    markdown = tmp_path / "report.md"
    code, out, _ = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(cache_dir), "--no-default-packages",
                           "--good", "2026-05-02", "--json", str(report),
                           "--markdown", str(markdown)], capsys)
    assert code == 0
    data = json.loads(report.read_text())
    assert data["status"] == "found"
    assert data["first_bad"] == mirror.first_bad == "2.13.0.dev20260521+cpu"
    assert data["last_good"] == "2.13.0.dev20260520+cpu"
    assert {p["verdict"] for p in data["probes"]} == {"good", "bad"}
    assert all(set(p) >= {"version", "verdict", "reason", "seconds"} for p in data["probes"])
    assert "Regression found" in out and "2.13.0.dev20260521+cpu" in markdown.read_text()


def test_not_reproduced_when_the_newest_build_passes(index_server, cache_dir, tmp_path, capsys):
    script = tmp_path / "passes.py"
    script.write_text("import torch\nprint(torch.__version__)\n")
    report = tmp_path / "r.json"
    code, out, _ = bisect([str(script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(cache_dir), "--no-default-packages",
                           "--json", str(report)], capsys)
    assert code == 4 and json.loads(report.read_text())["status"] == "not-reproduced"
    # It only prints: whatever numbers it printed, it could not have failed.
    assert "This reproducer never checks a result" in out
    script.write_text("import torch\nassert torch.__version__\n")
    code, out, _ = bisect([str(script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(cache_dir), "--no-default-packages"], capsys)
    assert code == 4 and "Not reproduced" in out and "never checks" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "missing.py: no such file"),
        (["{folder}"], "that is a folder; give a .py file"),
        (["{script}", "--index", "http://127.0.0.1:9/whl/nightly/cpu"], "cannot read"),
        (["{script}", "--index", "{index}", "--python", "3.2"], "no torch builds for Python 3.2"),
        # what the page has instead, so the fix (--variant, --python) is in the message
        (["{script}", "--index", "{index}", "--variant", "cu126"],
         "(cu126) on {index}: it lists torch wheels of cpu for cp310, cp311, cp312, cp313 on "
         "Linux"),
        (["{script}", "--index", "{index}", "--good", "2026-05-25", "--bad", "2026-05-03"],
         "newer than bad"),
        # more than a year before the oldest listed nightly: said before walking that year
        (["{script}", "--index", "{index}", "--good", "2025-01-01"],
         "further back than the bot looks for unlisted ones: give a good end from 2025-04-30 on"),
        (["{script}", "--index", "{index}", "--python", "three"], "expected X.Y"),
        (["{script}", "--variant", "cu13O"], "--variant cu13O: not a variant of PyTorch's"),
        (["{script}", "--index", "{index}", "--good", "2026-06-15"],
         "good=2026-06-15: no nightly of that day on the index; taking the nearest older one"),
        # the end as typed: it said "bad=2099-01-01", the command's spelling, a date not typed
        (["{script}", "--index", "{index}", "--bad", "2.13.0.dev20990101+cpu"],
         "error: --bad 2.13.0.dev20990101+cpu: no build on or after its date, 2099-01-01; the "
         "builds run from"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(args, message, index_server, example_script, capsys):
    filled = [a.format(script=example_script, index=index_server.variant_url("cpu"),
                       folder=example_script.parent) for a in args]
    code, _, err = bisect(filled, capsys)
    assert code == 2
    assert message.format(index=index_server.variant_url("cpu")) in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--good", "yesterday"], "--good yesterday: give a version like 2.12.0"),
        (["--bad", "2026-02-30"], "--bad 2026-02-30: that date does not exist"),
        (["--good", "20260501"], "--good 20260501: write dates as YYYY-MM-DD"),
        (["--python", "three"], "expected X.Y"),
    ],
)
def test_a_malformed_option_is_refused_before_the_index_is_read(args, message, index_server,
                                                                 example_script, capsys):
    index_server.requests.clear()
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           *args], capsys)
    assert (code, index_server.requests) == (2, [])
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "d: (\\S+)", "--threshold", "nan"], "--threshold nan: give a finite"),
        (["--timeout", "inf"], "--timeout inf: give a finite number"),
        (["--cache-budget-gb", "-1"], "--cache-budget-gb must be positive"),
        (["--metric", "Greatest", "--threshold", "0.1"], "put the number in a (group)"),
        (["--json", "{folder}"], "that is a folder; give a file name"),
        (["--markdown", "{file}/r.md"], "is a file, not a folder"),
        (["--db", "{folder}"], "that is a folder; give a file name"),
        (["--cache-dir", "{file}"], "that is a file, not a folder"),
        (["--work-dir", "{file}/sub"], "is a file, not a folder"),
        (["--json", "{script}"], "--json {script}: that is the reproducer given"),
        (["--markdown", "{script}"], "--markdown {script}: that is the reproducer given"),
        (["--json", "{folder}/r", "--markdown", "{folder}/r"], "--markdown {folder}/r: that is "
         "--json"),
        (["--db", "{folder}/r", "--json", "{folder}/r"], "--db {folder}/r: that is --json"),
        (["--markdown", "/proc/nope/r.md"], "--markdown /proc/nope/r.md: cannot write it"),
        (["--json", "/proc/self/r.json"], "--json /proc/self/r.json: cannot write it"),
    ],
)
def test_what_the_bisection_could_not_write_is_refused_before_it_starts(
        args, message, index_server, example_script, tmp_path, capsys):
    """Before, each of these ran every probe and then stopped with a traceback, or judged
    with a threshold no number passes."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    index_server.requests.clear()
    places = {"folder": tmp_path / "folder", "file": tmp_path / "file", "script": example_script}
    filled = [a.format(**places) for a in args]
    script = example_script.read_text()
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           *filled], capsys)
    assert (code, index_server.requests) == (2, [])
    assert message.format(**places) in err and len(err.strip().splitlines()) == 1, err
    assert example_script.read_text() == script and not (tmp_path / "folder" / "r").exists()


def test_a_report_that_cannot_be_written_at_the_end_keeps_the_other(tmp_path):
    """A report whose place went away during the bisection (a disk filled, a folder
    removed) used to end the run with a traceback before the other report was written."""
    import argparse

    from bot.jobs.local import write_reports

    result = BisectResult((Build("2.13.0", None, "cpu", WheelLink("t.whl", "http://x/t.whl")),),
                          Bisection(1), ())
    args = argparse.Namespace(json=Path("/proc/self/r.json"), markdown=tmp_path / "r.md")
    failed = write_reports(args, result)
    assert list(failed) == [Path("/proc/self/r.json")]
    assert "Builds tested" in (tmp_path / "r.md").read_text()


def test_a_python_uv_cannot_find_is_refused_before_any_install(index_server, example_script,
                                                               tmp_path, monkeypatch, capsys):
    """Every install failed with "pyenv: python3.12: command not found" deep in its reason,
    and the answer was `cannot-test`."""
    other = "3.13" if sys.version_info[:2] != (3, 13) else "3.12"
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # this Python alone
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "none"))
    index_server.requests.clear()
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--python", other], capsys)
    assert (code, index_server.requests) == (2, [])
    assert f"--python {other}: uv finds no Python {other} on this machine" in err
    assert not (tmp_path / "cache").exists()


def test_why_uv_finds_no_python_is_said(index_server, example_script, tmp_path, monkeypatch,
                                        capsys):
    """A pyenv shim first on the PATH for a version pyenv has not selected makes uv stop its
    search with an error, not "no interpreter": the bot said only "install it", which does
    not help when the Python is installed (this VM's 3.12 and 3.13 are behind such shims)."""
    other = "3.13" if sys.version_info[:2] != (3, 13) else "3.12"
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / f"python{other}"
    shim.write_text(f"#!/bin/sh\necho 'pyenv: python{other}: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{Path(sys.executable).parent}")
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "none"))
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--python", other], capsys)
    assert code == 2, err
    assert "uv said: error: Failed to inspect Python interpreter" in err, err
    assert str(shim) in err, err


def test_uv_is_asked_for_the_python_once_per_bisection(index_server, example_script, tmp_path,
                                                      monkeypatch, capsys):
    """The options' check, the sandbox's preflight and the syntax check each ran `uv python
    find`, which takes over a second where the PATH has pyenv's shims."""
    from bot.adapters import environments

    real = environments.require_uv()
    log, logging_uv = tmp_path / "uv.log", tmp_path / "uv"
    logging_uv.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    logging_uv.chmod(0o755)
    monkeypatch.setattr(environments, "_find_uv", lambda: str(logging_uv))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    code, out, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                             "--cache-dir", str(tmp_path / "cache"), "--python", version],
                            capsys)
    assert code == 0, err
    finds = [line for line in log.read_text().splitlines() if line.startswith("python find")]
    assert finds == [f"python find --no-project {version}"], finds


def test_a_python_the_sandbox_cannot_start_is_said_before_any_install(
        index_server, example_script, tmp_path, monkeypatch, capsys):
    """`--python` (or the issue's Python) can name an interpreter other than the bot's: uv
    finds it and makes the environments from it. The preflight started the bot's own, so an
    interpreter a run cannot start (a root bot's throwaway uid may not run a Python installed
    with umask 077) was every probe's SKIP, then "Cannot test"."""
    if os.geteuid() != 0:
        pytest.skip("only a root bot runs the reproducer as a user other than its own")
    base = Path("/usr/bin/python3").resolve()  # the system's (pyenv's copies report their home)
    closed = tmp_path / "closed" / "bin"
    closed.mkdir(parents=True)
    python = closed / base.name
    shutil.copy(base, python)
    python.chmod(0o700)  # the bot (root) runs it; the run's user may not
    version = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("PATH", f"{closed}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.chdir(tmp_path)
    from bot.adapters.environments import find_python
    assert find_python(version) == str(python)  # what uv makes the environments from
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                           "--python", version], capsys)
    assert code == 2, err
    assert f"cannot start {python}" in err and "Permission denied" in err, err
    assert not list(tmp_path.glob("cache/envs/tbb-py*"))


def test_no_uv_is_one_line_saying_what_to_do_before_any_install(index_server, example_script,
                                                                tmp_path, monkeypatch, capsys):
    """With no uv the bisection ended in a traceback (ProvisionError from finding uv)."""
    hide_uv(monkeypatch, tmp_path / "bin")
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                           "--db", str(tmp_path / "db.sqlite")], capsys)
    assert code == 2
    assert err.startswith("bisect-bot: error: uv is not installed") and "pip install 'uv>=" in err
    assert not list(tmp_path.glob("cache/envs/tbb-py*"))


def test_a_uv_older_than_the_flags_used_is_refused_before_any_install(
        index_server, example_script, tmp_path, monkeypatch, capsys):
    """pyproject allowed uv>=0.4, but `uv pip install --index` came in 0.4.23: with an older
    uv every build was SKIP ("unexpected argument '--index'") and the answer cannot-test."""
    old_uv(monkeypatch, tmp_path / "bin", "0.4.22")
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                           "--db", str(tmp_path / "db.sqlite")], capsys)
    assert code == 2
    assert "uv 0.4.22 at " in err and "is older than 0.4.23" in err
    assert "pip install -U 'uv>=0.4.23'" in err
    assert not list(tmp_path.glob("cache/envs/tbb-py*"))


def test_the_uv_the_package_requires_is_the_one_the_bot_checks_for():
    from bot.adapters.environments import MIN_UV_TEXT

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"uv>={MIN_UV_TEXT}",' in pyproject


def test_a_relative_cache_folder_works_from_the_sandbox(index_server, mirror, example_script,
                                                       tmp_path, monkeypatch, capsys):
    """The namespace sandbox runs each probe in a folder of its own, where a relative path to
    the environment's interpreter led nowhere: every build was "cannot test"."""
    monkeypatch.chdir(tmp_path)
    code, out, _ = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", "cache", "--db", "h.sqlite3", "--json", "r.json",
                           "--no-default-packages", "--good", "2026-05-18", "--bad",
                           "2026-05-22", "--no-commit-tier", "--no-triage"], capsys)
    assert code == 0, out
    assert json.loads((tmp_path / "r.json").read_text())["first_bad"] == mirror.first_bad


def test_help_documents_every_flag():
    done = subprocess.run([BISECT_BOT, "bisect", "--help"], capture_output=True, text=True,
                          check=True)
    for flag in ("--index", "--good", "--bad", "--variant", "--python", "--timeout", "--json",
                 "--markdown", "--repeat", "--match", "--fix", "--workers"):
        assert flag in done.stdout


README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _statuses(text: str) -> set[str]:
    """The exit statuses a text names: "0 found", "2 is bad usage", "130 an interruption"."""
    return set(re.findall(r"(?<![\w.-])(\d{1,3}) (?=[a-z])", " ".join(text.split())))


def test_bisect_help_lists_every_exit_status_the_readme_lists(capsys):
    """The README named 1 (a crash), which `bisect --help` did not."""
    said = README[README.index("The exit status tells"):README.index("The JSON report names")]
    assert _statuses(said) == {"0", "1", "2", "3", "4", "5", "6", "7", "130"}
    for command in ("bisect", "resume"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        epilog = capsys.readouterr().out.split("exit status:", 1)[1]
        assert _statuses(epilog) == _statuses(said), epilog


def test_triage_help_lists_the_exit_statuses_the_readme_lists(capsys):
    """The README says `triage` exits 0, 4 or 6; `triage --help` said nothing of them."""
    from bot.jobs.triage_job import TRIAGE_EXIT

    said = README[README.index("runs the triage alone"):README.index("Then the **commit tier**")]
    assert _statuses(said) == {"0", "4", "6"}, said
    with pytest.raises(SystemExit):
        main(["triage", "--help"])
    epilog = capsys.readouterr().out.split("exit status:", 1)[1]
    assert _statuses(said) | {str(code) for code in TRIAGE_EXIT.values()} <= _statuses(epilog)


def test_the_readme_lists_every_option_of_a_command():
    """`args` (the reproducer's argv) was accepted in a command but missing from the list."""
    from bot.core.commands import _OPTIONS

    listed = README[README.index("options: `good`"):README.index("`hang=bad` counts")]
    assert set(re.findall(r"`(\w+)`", listed)) == set(_OPTIONS) | {"fix"}, listed


def test_demo_finds_the_planted_regression(tmp_path):
    """Everything it writes is under --out: its history (the resume checkpoints) went to
    ~/.cache. A home elsewhere than the bot's Python (pyenv's under /root, 0700) is what an
    audit ran it with: as root every probe was SKIP, "Permission denied"."""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([BISECT_BOT, "demo", "--out", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HOME": str(home), "XDG_CACHE_HOME": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "first bad nightly: 2.13.0.dev20260521+cpu" in done.stdout
    assert "matches the planted regression" in done.stdout
    assert (tmp_path / "demo" / "report.md").exists()
    assert (tmp_path / "demo" / "history.sqlite3").exists()
    assert not (home / ".cache" / "torch-bisect-bot").exists()


def test_extract_prints_the_reproducer_of_an_issue(capsys):
    issue = Path(__file__).resolve().parents[2] / "examples" / "example_issue.md"
    assert main(["extract", str(issue)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"script", "needs_cuda", "reported_version", "imports"}
    assert "torch.compile(running_sum)" in data["script"]
    assert data["reported_version"] == "2.13.0.dev20260531+cpu" and data["needs_cuda"] is False


def test_extract_of_an_issue_without_code_says_what_to_add(tmp_path, capsys):
    issue = tmp_path / "issue.md"
    issue.write_text("### 🐛 Describe the bug\n\ncompile is slow since last week\n")
    assert main(["extract", str(issue)]) == 2
    err = capsys.readouterr().err
    assert "reproducer" in err and "Traceback" not in err


def test_an_issue_body_is_a_target_and_its_version_is_the_bad_end(index_server, cache_dir,
                                                                  tmp_path, capsys):
    issue = tmp_path / "issue.md"
    body = (Path(__file__).resolve().parents[2] / "examples" / "example_issue.md").read_text()
    issue.write_text(body.replace("2.13.0.dev20260531+cpu", "2.13.0.dev20260525+cpu"))
    report = tmp_path / "r.json"
    code, out, err = bisect([str(issue), "--index", index_server.variant_url("cpu"),
                             "--cache-dir", str(cache_dir), "--no-default-packages",
                             "--good", "2026-05-15", "--json", str(report),
                             "--work-dir", str(tmp_path / "work")], capsys)
    data = json.loads(report.read_text())
    assert code == 0 and data["first_bad"] == "2.13.0.dev20260521+cpu"
    assert max(p["version"] for p in data["probes"]) == "2.13.0.dev20260525+cpu"
    assert (tmp_path / "work" / "repro.py").exists()
    # The user is told where the reproducer taken from the issue is, to rerun it.
    assert f"with {tmp_path / 'work' / 'repro.py'}" in out + err


def test_a_work_folder_s_own_files_are_not_written_over(index_server, cache_dir, tmp_path,
                                                         example_script, capsys):
    """`--work-dir` holding the user's own repro.py (or a script of the same name): the
    reproducer taken from the issue, or the copy that runs, used to replace it silently."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "repro.py").write_text("# my own reproducer\n")
    (work / example_script.name).write_text("# my own copy\n")
    issue = Path(__file__).resolve().parents[2] / "examples" / "example_issue.md"
    common = ["--index", index_server.variant_url("cpu"), "--cache-dir", str(cache_dir),
              "--no-default-packages", "--no-triage", "--no-commit-tier", "--good",
              "2026-05-20", "--bad", "2026-05-21", "--work-dir", str(work)]
    code, out, err = bisect([str(issue), *common], capsys)
    assert code == 0 and f"{work / 'repro.py'} holds another script; writing this one to " \
        f"{work / 'repro-2.py'}" in err
    assert "torch.compile" in (work / "repro-2.py").read_text()
    code, out, err = bisect([str(example_script), *common], capsys)
    assert code == 0 and str(work / f"{example_script.stem}-2.py") in err
    assert (work / "repro.py").read_text() == "# my own reproducer\n"
    assert (work / example_script.name).read_text() == "# my own copy\n"
    code, _, err = bisect([str(issue), *common], capsys)  # the same again: the same file
    assert code == 0 and f"writing this one to {work / 'repro-2.py'}" in err
    assert not (work / "repro-3.py").exists()


def test_an_issue_s_nightly_the_index_does_not_list_is_said_not_taken(index_server, cache_dir,
                                                                     tmp_path, capsys):
    """The README says an end from the issue that names no build is dropped with a word why;
    the failing nightly it reports was dropped without one."""
    issue = tmp_path / "issue.md"
    body = (Path(__file__).resolve().parents[2] / "examples" / "example_issue.md").read_text()
    issue.write_text(body.replace("2.13.0.dev20260531+cpu", "2.13.0.dev20260615+cpu"))
    code, _, err = bisect([str(issue), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(cache_dir), "--no-default-packages", "--no-triage",
                           "--no-commit-tier", "--good", "2026-05-20"], capsys)
    assert code == 0
    assert ("the issue reports 2.13.0.dev20260615+cpu, which the index does not list (its "
            "builds run from 2.13.0.dev20260501+cpu to 2.13.0.dev20260531+cpu): it is not "
            "taken as the bad end") in err


@pytest.mark.parametrize("extra", [["--python", "3.2"], ["--good", "2025-01-01"]])
def test_an_issue_that_cannot_start_a_bisection_leaves_no_folder(extra, index_server, tmp_path,
                                                                 monkeypatch, capsys):
    """The folder made for an issue's reproducer goes with the command, whatever its end."""
    issue = tmp_path / "issue.md"
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "example_issue.md", issue)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    code, _, err = bisect([str(issue), "--index", index_server.variant_url("cpu"), *extra],
                          capsys)
    assert code == 2 and "Traceback" not in err
    assert list(scratch.iterdir()) == []


def test_a_finished_bisection_of_an_issue_leaves_no_folder(index_server, mirror, cache_dir,
                                                          tmp_path, monkeypatch, capsys):
    """Each bisection of an issue left its /tmp/tbb-issue-* folder behind; the checkpoints
    hold the script, so `resume` does not need it."""
    issue = tmp_path / "issue.md"
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "example_issue.md", issue)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    code, out, _ = bisect([str(issue), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(cache_dir), "--no-default-packages",
                           "--good", "2026-05-18", "--no-triage", "--no-commit-tier",
                           "--db", str(tmp_path / "h.sqlite3")], capsys)
    assert code == 0 and f"first bad nightly {mirror.first_bad}" in out
    assert [p.name for p in scratch.iterdir() if p.name.startswith("tbb-issue-")] == []


def test_the_rerun_command_is_a_command_that_bisects_the_same_way():
    """What a comment says to run locally parses as `bisect-bot bisect` and keeps every option
    that changes a verdict; a bisection of an issue names the issue, not a file one lacks."""
    builds = tuple(Build(f"2.13.0.dev202605{d:02d}+cu130", dt.date(2026, 5, d), "cu130",
                         WheelLink(f"torch-{d}.whl", f"https://x/torch-{d}.whl"))
                   for d in range(1, 5))
    bisection = Bisection(4, 0).record(3, Verdict.BAD).record(0, Verdict.GOOD)
    bisection = bisection.record(1, Verdict.GOOD).record(2, Verdict.BAD)
    options = {"repo": "pytorch/pytorch", "issue": 123456, "python": "3.12", "repeat": 3,
               "timeout": 600, "match": None, "metric": r"max diff: (\S+)", "threshold": 0.01,
               "processes": "2", "packages_index": "", "no_default_packages": True}
    result = BisectResult(builds, bisection, (), index_url="https://x/whl/nightly/cu130",
                          options=options)
    words = shlex.split(rerun_command(result))
    assert words[:2] == ["bisect-bot", "bisect"]
    args = build_parser().parse_args(words[1:])
    assert (args.target, args.good, args.bad) == (
        "pytorch/pytorch#123456", "2.13.0.dev20260502+cu130", "2.13.0.dev20260503+cu130")
    assert (args.python, args.repeat, args.metric, args.threshold, args.timeout) == (
        "3.12", 3, r"max diff: (\S+)", 0.01, 600.0)
    assert args.index == "https://x/whl/nightly/cu130" and not args.fix
    assert (args.processes, args.packages_index, args.no_default_packages) == ("2", "", True)
    local = BisectResult(builds, Bisection(4, 0, find_fix=True), (), script_name="repro.py",
                         options={"repeat": 1, "timeout": 120.0})
    # the window given stays, where no answer has narrowed it; looking for a fix, the older
    # end is the failing build, --bad
    assert rerun_command(local) == ("bisect-bot bisect repro.py --bad 2.13.0.dev20260501+cu130 "
                                    "--good 2.13.0.dev20260504+cu130 --timeout 120 --fix")
    assert "--bad" not in rerun_command(replace(local, bisection=Bisection(4, None, True)))


def test_an_issue_on_github_is_a_target_and_its_report_reruns_it(index_server, cache_dir, mirror,
                                                                  github_server, github_repo,
                                                                  tmp_path, monkeypatch, capsys):
    """`bisect-bot bisect owner/repo#N` reads the body through the GitHub adapter (the fake,
    checked against GitHub's description), and the rerun command names the issue again."""
    body = (Path(__file__).resolve().parents[2] / "examples" / "example_issue.md").read_text()
    issue = github_repo.add_issue("compiled cumsum is off", body)
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    markdown = tmp_path / "r.md"
    code, _, err = bisect([f"pytorch/pytorch#{issue.number}", "--index",
                           index_server.variant_url("cpu"), "--cache-dir", str(cache_dir),
                           "--no-default-packages", "--good", "2026-05-15", "--no-triage",
                           "--no-commit-tier", "--work-dir", str(tmp_path / "work"),
                           "--markdown", str(markdown)], capsys)
    assert code == 0, err[-2000:]
    text = markdown.read_text()
    assert f"first bad nightly `{mirror.first_bad}`" in text
    assert f"bisect-bot bisect pytorch/pytorch#{issue.number} --index " in text


def test_resume_with_no_history_says_so_and_makes_none(tmp_path, capsys):
    db = tmp_path / "none.sqlite3"
    assert main(["resume", "--list", "--db", str(db)]) == 2
    assert "there is no history there yet" in capsys.readouterr().err and not db.exists()


def test_resume_list_with_nothing_to_resume_says_so(tmp_path, capsys):
    """A history with no unfinished bisection: `--list` printed nothing at all, which reads
    the same as a command that did not run; it says where it looked, and still exits 0."""
    from bot.adapters.history import History

    db = tmp_path / "h.sqlite3"
    History(db).close()
    assert main(["resume", "--list", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == f"no unfinished bisections in {db}\n"


def test_a_script_is_read_in_the_encoding_its_coding_line_names(tmp_path):
    """Python runs a script in the encoding its `# -*- coding: ... -*-` line names (PEP 263);
    the bot read every script as UTF-8 and refused such a one."""
    from bot.core.errors import UserError
    from bot.jobs.targets import load_target

    declared = tmp_path / "latin.py"
    declared.write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nx = torch.ones(2, "
                         b"device='cuda')\nprint('caf\xe9')\n")
    assert load_target(str(declared)).needs_cuda  # read, and read right
    undeclared = tmp_path / "bytes.py"
    undeclared.write_bytes(b"import torch\nprint('caf\xe9')\n")
    with pytest.raises(UserError, match="cannot read it as a Python script in its declared "
                                        "encoding"):
        load_target(str(undeclared))


def test_editing_the_script_during_a_bisection_changes_no_probe(index_server, mirror, cache_dir,
                                                                tmp_path, capsys):
    """Every probe runs the text the bisection started with: here the first run itself
    rewrites the user's file to pass everywhere, as an editor would while the bot works."""
    script = tmp_path / "edited.py"
    script.write_text(
        "import pathlib, torch\n"
        f"pathlib.Path({str(script)!r}).write_text('print(1)\\n')\n"
        "day = int(torch.__version__.split('dev')[1][6:8])\n"
        "assert day < 21, 'regressed'\n")
    report = tmp_path / "r.json"
    code, _, _ = bisect([str(script), "--index", index_server.variant_url("cpu"), "--cache-dir",
                         str(cache_dir), "--no-default-packages", "--sandbox", "none",
                         "--good", "2026-05-02", "--no-triage", "--no-commit-tier",
                         "--json", str(report)], capsys)
    assert code == 0 and script.read_text() == "print(1)\n"  # edited after the first probe
    data = json.loads(report.read_text())
    assert (data["status"], data["first_bad"]) == ("found", mirror.first_bad)


def test_the_rerun_command_of_an_issue_body_names_the_body_from_anywhere(
        index_server, mirror, cache_dir, tmp_path, capsys, monkeypatch):
    issue = tmp_path / "issue.md"
    issue.write_text("It broke.\n\n```python\nimport torch\n"
                     "day = int(torch.__version__.split('dev')[1][6:8])\n"
                     "assert day < 21, 'regressed'\n```\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    common = ["--index", index_server.variant_url("cpu"), "--cache-dir", str(cache_dir),
              "--no-default-packages", "--no-triage", "--no-commit-tier"]
    code, out, _ = bisect(["issue.md", "--good", "2026-05-02", "--markdown", "r.md", *common],
                          capsys)
    assert code == 0
    rerun = next(line for line in (tmp_path / "r.md").read_text().splitlines()
                 if line.startswith("bisect-bot bisect"))
    assert shlex.split(rerun)[2] == str(issue)  # not the temporary repro.py
    monkeypatch.chdir(elsewhere)
    code, out, _ = bisect([*shlex.split(rerun)[2:], *common[2:]], capsys)
    assert code == 0 and f"first bad nightly {mirror.first_bad}" in out


def test_an_interrupted_triage_keeps_the_bisection_s_answer(index_server, mirror, cache_dir,
                                                           example_script, tmp_path, capsys,
                                                           monkeypatch):
    from bot.jobs import local

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(local, "after_bisect", interrupted)
    report = tmp_path / "r.json"
    code, out, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                             "--cache-dir", str(cache_dir), "--no-default-packages",
                             "--good", "2026-05-02", "--json", str(report)], capsys)
    assert code == 130 and f"first bad nightly {mirror.first_bad}" in out
    assert json.loads(report.read_text())["first_bad"] == mirror.first_bad
    assert "interrupted during the triage" in err and "resume" not in err


def test_a_damaged_history_is_one_line_with_what_to_do(index_server, example_script, tmp_path,
                                                      capsys):
    db = tmp_path / "history.sqlite3"
    db.write_bytes(b"not a database " * 100)
    code, _, err = bisect([str(example_script), "--index", index_server.variant_url("cpu"),
                           "--db", str(db)], capsys)
    assert code == 2 and "Traceback" not in err
    assert f"history database {db}: file is not a database; it is damaged: move it away" in err


def test_probes_side_by_side_keep_their_environments_when_the_budget_is_full(
        index_server, mirror, example_script, tmp_path, capsys):
    """With a cache budget of fewer environments than probes running at once, one worker's
    install deleted the environment the other's reproducer was running in: builds became
    "different failure" SKIPs and the answer `cannot-test`."""
    script = tmp_path / "repro.py"
    script.write_text("import pathlib, time\nimport torch\ntime.sleep(1)\n"
                      "files = sorted(pathlib.Path(torch.__file__).parent.rglob('*.py'))\n"
                      "assert files and all(f.exists() for f in files), 'torch deleted'\n"
                      + example_script.read_text())
    report = tmp_path / "r.json"
    code, out, _ = bisect([str(script), "--index", index_server.variant_url("cpu"),
                           "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                           "--no-commit-tier", "--good", "2026-05-02", "--workers", "2",
                           "--cache-budget-gb", "0.000001", "--json", str(report)], capsys)
    data = json.loads(report.read_text())
    assert "torch deleted" not in out
    assert (code, data["status"], data["first_bad"]) == (0, "found", mirror.first_bad)


FIXED_LATER = """import torch

values = [((i * 37) % 101) / 101.0 for i in range(256)]
expected = [sum(values[: i + 1]) for i in range(len(values))]
try:
    torch.testing.assert_close(torch.compile(lambda v: v)(expected), expected)
    # On the mirror the builds before 2026-05-21 compute this exactly: the "bug" here.
    raise SystemExit("still broken")
except AssertionError:
    print("fixed")
"""


def test_looking_for_the_fix_the_bad_build_is_the_older_end(index_server, mirror, tmp_path,
                                                            cache_dir, capsys):
    """`--fix --bad <a build that fails>` was refused ("good is newer than bad ... look for
    the fix (--fix)", with --fix given) or searched up to that build; --good was the failing
    end, and the report's rerun command said so."""
    script = tmp_path / "fixed_later.py"
    script.write_text(FIXED_LATER)
    report = tmp_path / "r.json"
    common = [str(script), "--index", index_server.variant_url("cpu"), "--cache-dir",
              str(cache_dir), "--no-default-packages", "--no-triage", "--no-commit-tier",
              "--fix", "--db", str(tmp_path / "h.db")]
    code, out, err = bisect([*common, "--bad", "2026-05-10", "--json", str(report),
                             "--markdown", str(tmp_path / "r.md")], capsys)
    data = json.loads(report.read_text())
    assert (code, data["status"], data["mode"]) == (0, "found", "find-fix"), out + err
    assert (data["last_bad"], data["first_good"], data["last_good"]) == (
        "2.13.0.dev20260520+cpu", mirror.first_bad, None)
    assert "--bad 2.13.0.dev20260520+cpu --good 2.13.0.dev20260521+cpu" in (
        tmp_path / "r.md").read_text()
    code, _, err = bisect([*common, "--bad", "2026-05-25", "--good", "2026-05-10"], capsys)
    assert code == 2 and "bad (2.13.0.dev20260525+cpu) is newer than good " \
        "(2.13.0.dev20260510+cpu): looking for the fix, the failing build is the older end" in err


@pytest.mark.parametrize(("script", "where"), [
    ("import torch\ndef f(:\n    pass\n", " at line 2 (def f(:): SyntaxError: invalid syntax"),
    ("import torch\nif torch:\nprint(1)\n", " at line 3 (print(1)): IndentationError: "),
    ("x = 1\0\n", ": SyntaxError: source code string cannot contain null bytes"),
])
def test_a_reproducer_its_python_cannot_compile_is_cannot_test_with_nothing_installed(
        index_server, tmp_path, capsys, script, where):
    """It used to install and run the three newest builds before saying the script fails on
    its own; each install of a real nightly is gigabytes."""
    repro = tmp_path / "repro.py"
    repro.write_bytes(script.encode())
    cache, report = tmp_path / "cache", tmp_path / "r.json"
    code = main(["bisect", str(repro), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache), "--no-default-packages", "--db",
                 str(tmp_path / "db.sqlite"), "--json", str(report)])
    said = capsys.readouterr().out
    data = json.loads(report.read_text())
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert code == 6 and data["status"] == "cannot-test" and data["probe_records"] == []
    assert data["cannot_test"].startswith(f"the reproducer is not valid Python {python}{where}")
    assert f"Cannot test: the reproducer is not valid Python {python}" in said
    assert not list(cache.glob("envs/*"))


@pytest.mark.parametrize("content", ["", "\n\n  \n", "# just a note\n# import torch\n\n",
                                     "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"])
def test_an_empty_script_is_refused_before_anything_is_installed(index_server, tmp_path, capsys,
                                                                 content):
    """It installed and ran the newest nightly, which passed: "Not reproduced"."""
    empty = tmp_path / "empty.py"
    empty.write_text(content)
    cache = tmp_path / "cache"
    for command in (["bisect"], ["round", "start"]):
        code = main([*command, str(empty), "--index", index_server.variant_url("cpu"),
                     "--cache-dir" if command == ["bisect"] else "--work-dir", str(cache),
                     "--no-default-packages", "--db" if command == ["bisect"] else "--state",
                     str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and f"{empty}: the script is empty (nothing but comments and blank " \
            "lines)" in err
    assert not cache.exists() and not (tmp_path / "out").exists()


def test_a_reproducer_on_standard_input_is_said_to_be_unsupported(capsys):
    code, _, err = bisect(["-", "--index", "http://127.0.0.1:9/cpu"], capsys)
    assert code == 2 and "-: the reproducer is not read from standard input; save it to a " \
        "file" in err and "no such file" not in err


@pytest.mark.parametrize("suffix", [
    "?notification_referrer_id=NT_kwDOA&notifications_query=is%3Aunread",
    "?notification_referrer_id=NT_kwDOA#issuecomment-{comment}",
    "#issuecomment-{comment}",
    "/",
])
@pytest.mark.parametrize("kind", ["issues", "pull"])
def test_an_issue_or_pull_request_url_from_a_notification_is_read(
        github_server, github_repo, monkeypatch, capsys, suffix, kind):
    """A notification's link carries a query string; it was taken for a file name, and said
    to be one mangled (`https:/github.com/...: no such file`). A pull request is an issue to
    GitHub's issues API (GET /repos/{owner}/{repo}/issues/{number})."""
    body = (Path(__file__).resolve().parents[2] / "examples" / "example_issue.md").read_text()
    issue = github_repo.add_issue("compiled cumsum is off", body)
    comment = github_repo.add_comment(issue.number, "Reduced:\n\n```python\nimport torch\n"
                                      "assert torch.ones(1).sum() == 2\n```\n")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    url = (f"https://github.com/pytorch/pytorch/{kind}/{issue.number}"
           + suffix.format(comment=comment.id))
    assert main(["extract", url]) == 0, capsys.readouterr().err
    script = json.loads(capsys.readouterr().out)["script"]
    assert ("assert torch.ones(1).sum() == 2" in script) == ("issuecomment" in suffix)


def test_a_url_that_is_not_an_issue_s_is_said_as_given(capsys):
    url = "https://github.com/pytorch/pytorch/pull/5/files"
    code, _, err = bisect([url, "--index", "http://127.0.0.1:9/cpu"], capsys)
    assert code == 2 and f"{url}: not an issue's URL; give one as " \
        "https://github.com/OWNER/REPO/issues/N (or /pull/N)" in err
