"""The run-time survey runs every stored case through the bot's Runner, CUDA ones only with CUDA."""

from __future__ import annotations

import sys

from benchmarks import reproducer_times


def _cases(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.startswith("compile_")]


def test_without_cuda_only_the_cpu_cases_run_and_each_is_timed(capsys) -> None:
    # The test interpreter has no torch: has_cuda is false and every case fails at its import,
    # which the survey reports as that case's exit code rather than hiding it.
    code = reproducer_times.main(["--python", sys.executable])
    out = capsys.readouterr().out
    assert code == 0, out
    ran = _cases(out)
    assert ran and not any("cuda" in name for name in ran)
    assert all(line.split()[1] == "1" for line in out.splitlines() if line.startswith("compile_"))
    assert f"{len(ran)} runs (cuda: False): median" in out


def test_an_interpreter_with_cuda_also_runs_the_cuda_cases(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def is_available():\n        return True\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code = reproducer_times.main(["--python", sys.executable, "--repeat", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    ran = _cases(out)
    cuda = [name for name in ran if name.endswith("_cuda")]
    assert cuda and len(ran) == 2 * len(set(ran))
    assert "(cuda: True)" in out
