"""`bisect-bot suite check` and `sweep-plan` through the real command line."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from bot.jobs.cli import main
from bot.jobs.sweep_probe import load_suite

SUITES = Path(__file__).resolve().parents[2] / "repro_suites"


def test_the_stored_suites_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "check", str(SUITES)]) == 0
    out = capsys.readouterr().out
    assert " 0 error(s)" in out
    assert int(out.split()[0]) >= 14  # ten or more real-world cases plus the demo suite


def test_suite_check_names_file_and_line_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "mine"
    shutil.copytree(SUITES / "demo", suite)
    broken = suite / "broken.py"
    broken.write_text("# /// bisect-case\n# requires = \"cpu\"\n# retries = 3\n# ///\n")
    (suite / "_helper.py").write_text("not a case, not checked\n")
    assert main(["suite", "check", str(suite)]) == 1
    captured = capsys.readouterr()
    assert f"{broken}:3: unknown key 'retries'" in captured.err
    assert "4 valid case(s)" in captured.out


def test_suite_check_refuses_a_case_that_imports_the_suite_s_own_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case importing a `_common.py` beside it passed the check and was untested every
    night: the run has its file alone, and `_common` was looked for on the package index."""
    suite = tmp_path / "mine" / "inductor"
    suite.mkdir(parents=True)
    (suite / "_common.py").write_text("def make():\n    return 3\n")
    head = "# /// bisect-case\n# timeout = 30\n# ///\n"
    (suite / "shared.py").write_text(f"{head}import torch\nfrom _common import make\n")
    (suite / "relative.py").write_text(f"{head}import torch\nfrom . import helpers\n")
    (suite / "alone.py").write_text(f"{head}import torch, json\nprint(json.dumps(1))\n")
    assert main(["suite", "check", str(tmp_path / "mine")]) == 1
    captured = capsys.readouterr()
    assert (f"{suite / 'shared.py'}:1: it imports `_common` of the suite's own files: a case "
            "runs alone") in captured.err
    assert f"{suite / 'relative.py'}:1: it imports a module relatively" in captured.err
    assert "alone.py" not in captured.err and "1 valid case(s)" in captured.out


def test_sweep_plan_leaves_out_an_invalid_case_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(SUITES / "demo", tmp_path / "demo")
    (tmp_path / "demo" / "bad.py").write_text("import torch\n")
    assert main(["sweep-plan", str(tmp_path), "--shards", "8"]) == 0
    captured = capsys.readouterr()
    assert "bad.py:1: no `# /// bisect-case` metadata block" in captured.err
    assert len(json.loads(captured.out)["include"]) == 4  # the demo suite's 3 + 1 shards


def test_a_damaged_history_is_said_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.sqlite3"
    db.write_bytes(b"this is no database" * 100)
    assert main(["sweep-merge", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"history database {db}: file is not a database" in err
    assert "move it away" in err and "Traceback" not in err


def test_a_history_of_a_newer_schema_is_one_line_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A history a newer bot wrote (a revert of the bot, a local copy) ended in a traceback."""
    import sqlite3

    from bot.adapters.history import SCHEMA_VERSION

    db = tmp_path / "history.sqlite3"
    with sqlite3.connect(db) as made:
        made.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    assert main(["sweep-merge", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bisect-bot: error: history database") and err.count("\n") == 1
    assert f"schema {SCHEMA_VERSION + 5}, newer than this bot's {SCHEMA_VERSION}" in err
    assert "upgrade torch-bisect-bot" in err and "Traceback" not in err


def test_case_ids_keep_nested_folders_apart(tmp_path: Path) -> None:
    for suite in ("numerics", "crashes"):
        (tmp_path / suite / "cuda").mkdir(parents=True)
        (tmp_path / suite / "cuda" / "sdpa.py").write_text("# /// bisect-case\n# ///\nimport torch\n")
    (tmp_path / "numerics" / "top.py").write_text("# /// bisect-case\n# ///\nimport torch\n")
    cases, errors = load_suite(tmp_path)
    assert errors == []
    assert [c.case_id for c in cases] == ["crashes/cuda/sdpa", "numerics/cuda/sdpa",
                                          "numerics/top"]
    # a suite folder swept on its own names its cases as the whole tree does
    assert [c.case_id for c in load_suite(tmp_path / "numerics")[0]][-1] == "numerics/top"


def test_sweep_plan_prints_a_matrix_of_shards_by_runner_kind(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep-plan", str(SUITES), "--shards", "2", "--cuda-runner", "gpu-box"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    kinds = [(entry["kind"], entry["shard"], entry["runs_on"]) for entry in matrix["include"]]
    assert kinds == [("cpu", "1/2", "ubuntu-latest"), ("cpu", "2/2", "ubuntu-latest"),
                     ("cuda", "1/2", "gpu-box"), ("cuda", "2/2", "gpu-box")]
    assert all(entry["index"].startswith("https://download.pytorch.org/whl/nightly/")
               for entry in matrix["include"])


def test_sweep_plan_never_makes_more_shards_than_cases(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep-plan", str(SUITES / "demo"), "--shards", "8"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert [(e["kind"], e["shard"]) for e in matrix["include"]] == (
        [("cpu", f"{n}/3", ) for n in (1, 2, 3)] + [("cuda", "1/1")])


def test_sweep_plan_gives_every_shard_the_newest_nightly_all_their_indexes_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each shard resolved `latest` itself: a CUDA shard queued for its runner (or a late
    upload) swept another nightly than the CPU shards, and the collector said the shards of
    both nightlies sent no export."""
    import datetime as dt

    from bot.demo.index_server import IndexServer
    from bot.demo.mirror import build_mirror

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for variant, days in (("cpu", 5), ("cu130", 4)):  # the 5th's CUDA build is not out yet
        build_mirror(tmp_path / "mirror", start=dt.date(2026, 5, 1), days=days, missing=(),
                     variant=variant, python_tags=(tag,), bug_for=lambda _: None)
    with IndexServer(tmp_path / "mirror") as served:
        common = ["sweep-plan", str(SUITES / "demo"), "--shards", "2", "--python", python,
                  "--cpu-index", served.variant_url("cpu"),
                  "--cuda-index", served.variant_url("cu130")]
        assert main([*common, "--nightly", "latest"]) == 0
        matrix = json.loads(capsys.readouterr().out)
        assert {entry["nightly"] for entry in matrix["include"]} == {"2.13.0.dev20260504"}
        assert {entry["kind"] for entry in matrix["include"]} == {"cpu", "cuda"}
        assert main([*common, "--nightly", "2.13.0.dev20260502+cpu"]) == 0
        matrix = json.loads(capsys.readouterr().out)
        assert {entry["nightly"] for entry in matrix["include"]} == {"2.13.0.dev20260502"}
        assert main([*common, "--nightly", "2.13.0.dev20260505"]) == 2
        assert "--nightly 2.13.0.dev20260505: not on " + served.variant_url("cu130") \
            in capsys.readouterr().err
        # What a shard is given selects that nightly of its own variant.
        args = ["sweep", str(SUITES / "demo"), "--kind", "cpu", "--index",
                served.variant_url("cpu"), "--nightly", "2.13.0.dev20260504", "--db",
                str(tmp_path / "h.sqlite3"), "--cache-dir", str(tmp_path / "cache"),
                "--no-default-packages"]
        main(args)
        assert "on nightly 2.13.0.dev20260504+cpu" in capsys.readouterr().out
