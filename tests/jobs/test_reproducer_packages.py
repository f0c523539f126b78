"""What the reproducer imports is installed beside the build, from torch's index first and a
packages index (PyPI) for the rest; a module no environment has makes builds untestable, never
bad. The packages come from whoever wrote the issue, so they are installed as wheels only,
after the build has described itself, in environments of their own, and nothing imports torch
with them outside the sandbox. Real uv, real HTTP (a stand-in for PyPI on 127.0.0.1), real
sandboxed runs.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from bot.demo.wheels import build_wheel
from bot.jobs.cli import main
from tests.core.test_issue_text import form_body
from tests.fakes.mirror import IndexServer, build_mirror
from tests.jobs.github_helpers import (
    PYTHON,
    Jobs,
    comment_event,
    issue_body,
    labeled_event,
    sticky,
)
from tests.jobs.test_rounds import bisect_in_rounds, start

WINDOW = ["--good", "2026-05-19", "--bad", "2026-05-23"]  # 05-21 is the first bad
USES_IT = "import tbb_extra\nprint('tbb_extra', tbb_extra.VERSION)\n"


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """A stand-in for PyPI, with what torch's index lacks: `tbb_extra` 1.0 and 2.0, and
    `tbb_hook`, whose .pth file writes a mark wherever Python starts with it installed."""
    root = tmp_path_factory.mktemp("pypi")
    for version in ("1.0", "2.0"):
        build_wheel(root / "simple", "tbb_extra", version,
                    {"tbb_extra/__init__.py": f"VERSION = {version!r}\n"})
    mark = root / "hook-ran"
    hook = (f"import pathlib; pathlib.Path({str(mark)!r}).write_text('ran')\n")
    build_wheel(root / "simple", "tbb_hook", "1.0",
                {"tbb_hook/__init__.py": "", "tbb_hook.pth": hook})
    _sdist(root / "simple", "tbb_built", root / "built")
    # A data file over the environment's own pyvenv.cfg: its `home` names the folder the
    # sandbox would show as the interpreter's (here the bot's home).
    build_wheel(root / "simple", "tbb_rehome", "1.0", {
        "tbb_rehome/__init__.py": "",
        "tbb_rehome-1.0.data/data/pyvenv.cfg": f"home = {Path.home()}/bin\n"})
    with IndexServer(root) as server:
        server.mark = mark  # type: ignore[attr-defined]
        server.built = root / "built"  # type: ignore[attr-defined]
        yield server


def _sdist(folder: Path, name: str, mark: Path) -> None:
    """A source archive whose build backend is in the archive (`backend-path`): building it
    runs its code, which writes `mark`, with no build dependency to fetch first."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                          'backend-path = ["."]\n',
        "backend.py": f"import pathlib\npathlib.Path({str(mark)!r}).write_text('built')\n"
                      "def get_requires_for_build_wheel(config_settings=None):\n    return []\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    }
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"{name}-1.0.tar.gz", "w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-1.0/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _script(example_script: Path, head: str) -> Path:
    text = example_script.read_text()
    assert "\nimport torch\n" in text
    example_script.write_text(text.replace("\nimport torch\n", "\nimport torch\n" + head, 1))
    return example_script


def _bisect(tmp_path, capsys, index_server, cache, script, *extra):
    report = tmp_path / "report.json"
    code = main(["bisect", str(script), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache), "--no-default-packages", "--no-commit-tier",
                 "--json", str(report), *WINDOW, *extra])
    said = capsys.readouterr()
    return code, json.loads(report.read_text()), said.err + said.out


def _site_packages(cache: Path) -> dict[str, set[str]]:
    """Each environment of the cache, and the top-level names in its site-packages."""
    return {env.name: {p.name for p in next(env.glob("lib/python*/site-packages")).iterdir()}
            for env in (cache / "envs").glob("tbb-py*")}


def test_the_reproducer_s_import_comes_from_the_packages_index_into_envs_of_their_own(
        index_server, packages, mirror, example_script, tmp_path, capsys):
    cache = tmp_path / "cache"
    plain = example_script.read_text()
    code, data, _ = _bisect(tmp_path, capsys, index_server, cache, example_script, "--no-triage")
    assert code == 0 and data["first_bad"] == mirror.first_bad
    before = _site_packages(cache)
    assert before and not any("tbb_extra" in names for names in before.values())

    script = _script(example_script, USES_IT)
    code, data, err = _bisect(tmp_path, capsys, index_server, cache, script, "--no-triage",
                              "--packages-index", packages.variant_url("simple"))
    assert code == 0, err
    assert ("the reproducer imports tbb_extra: installing it into every environment from "
            f"torch's index, else {packages.variant_url('simple')}") in err
    assert data["first_bad"] == mirror.first_bad
    assert all("tbb_extra 2.0" in r["result"]["output"] for r in data["probe_records"])
    assert all(r["info"]["issue_packages"] == ["tbb_extra"] for r in data["probe_records"])
    assert any("tbb-extra" in path for path in packages.requests)
    # The environments made without the package are still there, unchanged; the package's
    # environments are others, beside them.
    after = _site_packages(cache)
    assert {name: after[name] for name in before} == before
    assert all("tbb_extra" in after[name] for name in set(after) - set(before))
    assert len(set(after) - set(before)) == len(data["probe_records"])
    assert plain != script.read_text()


def test_a_module_no_environment_has_makes_builds_untestable_not_bad(
        index_server, example_script, cache_dir, tmp_path, capsys):
    # Torch's index alone has no tbb_extra: the install says so, and nothing is judged.
    script = _script(example_script, USES_IT)
    code, data, err = _bisect(tmp_path, capsys, index_server, cache_dir, script, "--no-triage",
                              "--packages-index", "")
    assert data["status"] == "cannot-test", err
    assert all(p["verdict"] == "skip" and "tbb_extra, which the reproducer needs beside torch, "
               "did not install from torch's index" in p["reason"] for p in data["probes"])

    # Imported in a way no reading of the script finds: the run says what is missing.
    script.write_text(script.read_text().replace(
        "import tbb_extra\n", "import importlib\ntbb_extra = importlib.import_module('tbb_' "
        "+ 'extra')\n"))
    code, data, err = _bisect(tmp_path, capsys, index_server, cache_dir, script, "--no-triage")
    assert data["status"] == "cannot-test", err
    assert all(p["verdict"] == "skip" and p["reason"] == "module not installed here: tbb_extra"
               for p in data["probes"])
    assert ("The reproducer imports tbb_extra, which the environments did not have" in err
            and "--with PACKAGE locally" in err)  # the hint, in plain text


def test_no_package_of_the_issue_runs_outside_the_sandbox(
        index_server, packages, mirror, example_script, tmp_path, capsys):
    """tbb_hook's .pth runs in every Python that starts with it installed: describing the
    build, or asking it for its compiler bisector, must not."""
    script = _script(example_script, "import tbb_hook\n")
    cache = tmp_path / "cache"
    code, data, err = _bisect(tmp_path, capsys, index_server, cache, script,
                              "--packages-index", packages.variant_url("simple"))
    assert code == 0 and data["first_bad"] == mirror.first_bad, err
    assert data["triage"]["records"], "the triage ran"
    assert not packages.mark.exists()
    # The hook works: the environment's Python, started outside the sandbox, runs it.
    env = next(e for e in (cache / "envs").glob("tbb-py*") if "tbb_hook.pth" in
               {p.name for p in next(e.glob("lib/python*/site-packages")).iterdir()})
    subprocess.run([env / "bin" / "python", "-c", "pass"], check=True)
    assert packages.mark.read_text() == "ran"
    packages.mark.unlink()


def test_a_package_that_rewrites_the_environment_s_config_is_refused(
        index_server, packages, example_script, cache_dir, tmp_path, capsys):
    script = _script(example_script, "import tbb_rehome\n")
    code, data, err = _bisect(tmp_path, capsys, index_server, cache_dir, script, "--no-triage",
                              "--packages-index", packages.variant_url("simple"))
    assert data["status"] == "cannot-test", err
    assert all("a package the reproducer imports overwrote the environment's pyvenv.cfg "
               "(tbb_rehome): not installed" in p["reason"] for p in data["probes"])
    assert not list((cache_dir / "envs").glob("tbb-py*/lib/python*/site-packages/tbb_rehome"))


def test_no_package_is_built_from_source(index_server, packages, example_script, cache_dir,
                                         tmp_path, capsys):
    """Building a source archive runs its code, with the network, outside the sandbox."""
    script = _script(example_script, "import tbb_built\n")
    code, data, err = _bisect(tmp_path, capsys, index_server, cache_dir, script, "--no-triage",
                              "--packages-index", packages.variant_url("simple"))
    assert data["status"] == "cannot-test", err
    assert any("/tbb-built/" in path for path in packages.requests)  # it was offered
    assert all("tbb_built, which the reproducer needs beside torch, did not install" in p["reason"]
               for p in data["probes"])
    assert not packages.built.exists()


def test_rounds_of_runners_install_the_reproducer_s_imports(
        index_server, packages, mirror, example_script, cache_dir, tmp_path, capsys):
    script = _script(example_script, USES_IT)
    state = start(tmp_path, index_server, script, *WINDOW,
                  "--packages-index", packages.variant_url("simple"))
    options = json.loads(state.read_text())["options"]
    assert options["imports"] == ["tbb_extra"]
    _, final = bisect_in_rounds(state, 2, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad
    assert all("tbb_extra 2.0" in r["result"]["output"] for r in final["probe_records"])


def test_a_command_s_with_pins_a_package_and_the_report_says_how_to_rerun_it(
        tmp_path, github_server, github_repo, monkeypatch, index_server, packages, mirror,
        example_script, cache_dir, capsys):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    with jobs.config.open("a") as config:
        config.write(f"packages_index: {packages.variant_url('simple')}\n")
    script = _script(example_script, USES_IT).read_text()
    issue = github_repo.add_issue("compiled cumsum drifts", issue_body(script))
    github_repo.set_role("alice", "triage")
    assert jobs.plan("issue_comment", comment_event(
        issue.number, "/bisect good=2026-05-19 bad=2026-05-23 with=tbb_extra==1.0"))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["reproducer"]["imports"] == ["tbb_extra"]
    assert plan["settings"]["packages"] == ["tbb_extra==1.0"]
    assert "| installed beside torch | `tbb_extra==1.0` (`with=`) |" in sticky(issue)

    outcome = jobs.outcome(cache_dir, "--no-triage")
    assert outcome["first_bad"] == mirror.first_bad
    assert all("tbb_extra 1.0" in r["result"]["output"] for r in outcome["probe_records"])
    jobs.report()
    assert "--with tbb_extra==1.0" in sticky(issue)

    # The same plan in rounds of runners: every probe job installs the same.
    state = tmp_path / "state.json"
    assert main(["round", "from-plan", str(tmp_path / "plan.json"), "--state", str(state),
                 "--outcome", str(tmp_path / "rounds-outcome.json"),
                 "--no-default-packages"]) == 0
    _, final = bisect_in_rounds(state, 8, cache_dir, tmp_path, capsys)
    assert final["first_bad"] == mirror.first_bad
    assert all("tbb_extra 1.0" in r["result"]["output"] for r in final["probe_records"])


@pytest.fixture(scope="module")
def with_torchvision(tmp_path_factory):
    """Nightlies whose index also has torchvision, each pinning the torch of its own day (and
    one, 05-23, with no torch nightly of its day), as download.pytorch.org publishes them."""
    root = tmp_path_factory.mktemp("with-torchvision")
    tag = f"cp{PYTHON.replace('.', '')}"
    built = build_mirror(root, start=dt.date(2026, 5, 18), days=5, missing=(), python_tags=(tag,))
    for day in (*built.versions, "2.13.0.dev20260523+cpu"):
        stamp = day.split(".dev")[1]
        version = f"0.28.0.dev{stamp}"
        build_wheel(root / "cpu", "torchvision", version,
                    {"torchvision/__init__.py": f"__version__ = {version!r}\n"},
                    requires=(f"torch=={day.split('+')[0]}",))
    with IndexServer(root) as server:
        yield server, built


def test_torchvision_comes_as_the_nightly_of_each_build_s_own_day(
        with_torchvision, example_script, tmp_path, capsys):
    server, built = with_torchvision
    script = _script(example_script,
                     "import torchvision\nprint('torchvision', torchvision.__version__)\n")
    code, data, err = _bisect(tmp_path, capsys, server, tmp_path / "cache", script,
                              "--no-triage", "--packages-index", "", "--bad", "2026-05-22")
    assert code == 0, err
    assert "torchvision: the nightly that each build's version pins" in err
    assert data["first_bad"] == built.first_bad == "2.13.0.dev20260521+cpu"
    for record in data["probe_records"]:
        day = record["info"]["torch"].split(".dev")[1].split("+")[0]
        assert f"torchvision 0.28.0.dev{day}+cpu" in record["result"]["output"], record


def test_a_sweep_case_runs_with_what_it_imports(index_server, packages, tmp_path, capsys):
    demo = Path(__file__).resolve().parents[2] / "repro_suites" / "demo" / "cumsum_compile.py"
    suite = tmp_path / "suites" / "pkgs"
    suite.mkdir(parents=True)
    (suite / "plain.py").write_text(demo.read_text())
    (suite / "uses_extra.py").write_text(demo.read_text())
    _script(suite / "uses_extra.py", USES_IT)
    export = tmp_path / "sweep.json"
    assert main(["sweep", str(tmp_path / "suites"), "--index", index_server.variant_url("cpu"),
                 "--nightly", "2.13.0.dev20260519+cpu", "--db", str(tmp_path / "h.sqlite3"),
                 "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                 "--packages-index", packages.variant_url("simple"),
                 "--export", str(export)]) == 0
    runs = {run["case_id"]: run for run in json.loads(export.read_text())["runs"]}
    assert {case: run["verdict"] for case, run in runs.items()} == {
        "pkgs/uses_extra": "good", "pkgs/plain": "good"}
    assert "tbb_extra 2.0" in runs["pkgs/uses_extra"]["output_tail"]
    envs = [e for e in (tmp_path / "cache" / "envs").glob("tbb-py*")]
    assert len(envs) == 2  # the plain case's environment has no tbb_extra, the other its own


def test_the_triage_alone_installs_what_the_reproducer_imports(
        index_server, packages, mirror, example_script, tmp_path):
    script = _script(example_script, USES_IT)
    report = tmp_path / "triage.json"
    assert main(["triage", str(script), "--build", mirror.first_bad, "--index",
                 index_server.variant_url("cpu"), "--cache-dir", str(tmp_path / "cache"),
                 "--no-default-packages", "--packages-index", packages.variant_url("simple"),
                 "--json", str(report)]) == 0
    records = json.loads(report.read_text())["records"]
    assert len(records) > 1 and all("tbb_extra 2.0" in r["result"]["output"] for r in records)


def test_the_issue_form_s_packages_replace_the_guess(
        tmp_path, github_server, github_repo, monkeypatch, index_server, packages, mirror,
        example_script, capsys):
    script = _script(example_script, USES_IT).read_text()
    body = form_body({"good": "2026-05-19", "bad": "2026-05-23", "variant": "cpu",
                      "packages": "tbb_extra==1.0"}, script=script)
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    with jobs.config.open("a") as config:
        config.write(f"packages_index: {packages.variant_url('simple')}\n")
    issue = github_repo.add_issue("[bisect] cumsum", body, labels=("bisect",))
    assert jobs.plan("issues", labeled_event(issue.number))
    assert json.loads((tmp_path / "plan.json").read_text())["settings"]["packages"] == [
        "tbb_extra==1.0"]
    # the same issue on the command line: the form's answer, installed as the issue's
    (tmp_path / "issue.md").write_text(body)
    code, data, err = _bisect(tmp_path, capsys, index_server, tmp_path / "cache",
                              tmp_path / "issue.md", "--no-triage", "--packages-index",
                              packages.variant_url("simple"))
    assert code == 0 and data["first_bad"] == mirror.first_bad, err
    assert "the issue form names tbb_extra==1.0: installing it" in err
    assert all("tbb_extra 1.0" in r["result"]["output"] for r in data["probe_records"])
    assert all(r["info"]["issue_packages"] == ["tbb_extra==1.0"] for r in data["probe_records"])


def test_a_packages_index_that_stops_answering_stops_the_bisection_not_skips_the_builds(
        index_server, packages, example_script, tmp_path, capsys):
    """The index of the reproducer's packages answering 503 while uv installs them: each
    build was SKIP ("did not install"), the answer `cannot-test` or ambiguous, for an
    outage of a minute. It stops the bisection unfinished and resumable, as torch's index
    does."""
    from bot.demo.index_server import Fault

    script = _script(example_script, USES_IT)
    packages.faults.append(Fault("tbb-extra", status=503, times=10**6))
    try:
        code = main(["bisect", str(script), "--index", index_server.variant_url("cpu"),
                     "--cache-dir", str(tmp_path / "cache"), "--no-default-packages",
                     "--no-commit-tier", "--no-triage", "--db", str(tmp_path / "h.db"),
                     "--json", str(tmp_path / "r.json"), *WINDOW,
                     "--packages-index", packages.variant_url("simple")])
    finally:
        packages.faults.clear()
    err = capsys.readouterr().err
    assert code == 7, err
    # Named as an outage of torch's index is: "the index <URL>", not the bare URL.
    assert f"the index {packages.variant_url('simple')} did not answer" in err
    assert "The bisection stops unfinished" in err and "did not install from" not in err
