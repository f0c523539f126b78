"""`--gpus 0,1`: one worker per GPU, and each run of a round sees only its own GPU."""

from __future__ import annotations

import argparse
import json

import pytest

from bot.jobs.cli import main
from bot.jobs.local import gpu_list

# Sleeps long enough that the two probes of a round overlap, then says what it saw.
REPRO = """\
import json, os, time, torch
began = time.time()
time.sleep(1.0)
print("SEEN " + json.dumps({"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "version": torch.__version__, "began": began, "ended": time.time()}))
raise SystemExit(torch.__version__ >= "2.13.0.dev20260521")
"""


def test_gpu_list_parses_and_rejects() -> None:
    assert gpu_list("0,1") == ("0", "1")
    for bad in ("0,,1", "1,1", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            gpu_list(bad)


def _seen(probe: dict) -> dict:
    line = next(ln for ln in probe["result"]["output"].splitlines() if ln.startswith("SEEN "))
    return json.loads(line[len("SEEN "):])


def test_concurrent_probes_of_a_round_see_different_gpus(index_server, cache_dir, tmp_path,
                                                        capsys) -> None:
    script = tmp_path / "gpu_repro.py"
    script.write_text(REPRO)
    report = tmp_path / "report.json"
    code = main(["bisect", str(script), "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--good", "2026-05-02",
                 "--gpus", "0,1", "--json", str(report)])
    capsys.readouterr()
    assert code == 0
    data = json.loads(report.read_text())
    assert data["first_bad"] == "2.13.0.dev20260521+cpu"
    seen = [_seen(p) for p in data["probe_records"] if not p["variant_env"]]
    assert {s["gpu"] for s in seen} == {"0", "1"}
    overlapping = [(a, b) for i, a in enumerate(seen) for b in seen[i + 1:]
                   if a["began"] < b["ended"] and b["began"] < a["ended"]]
    assert overlapping, "no two probes ran at the same time"
    assert all(a["gpu"] != b["gpu"] for a, b in overlapping)
