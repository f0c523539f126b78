"""A case's metric against its threshold, and suite loading from files."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.suite import parse_case
from bot.core.verdicts import RunResult, Stage, Verdict, judge
from bot.jobs.sweep_probe import load_suite, probe_options


def judged(output: str, exit_code: int = 0):
    case = parse_case("# /// bisect-case\n# metric = \"diff\"\n# threshold = 0.01\n# ///\n",
                      "case.py", "numerics/case")
    return judge(RunResult(Stage.RUN, exit_code=exit_code, output=output),
                 probe_options(case).policy)


@pytest.mark.parametrize(("output", "verdict", "metric"), [
    ("METRIC diff=0.001\n", Verdict.GOOD, 0.001),
    ("METRIC diff=0.5\n", Verdict.BAD, 0.5),
    ("METRIC diff=0.5\nMETRIC diff=1e-4\n", Verdict.GOOD, 1e-4),  # the last one counts
    ("METRIC diff=nan\n", Verdict.BAD, None),  # NaN is never within a threshold
    ("METRIC other=0.001\n", Verdict.SKIP, None),
    ("nothing printed\n", Verdict.SKIP, None),
])
def test_metric_against_threshold(output: str, verdict: Verdict, metric: float | None) -> None:
    judgement = judged(output)
    assert judgement.verdict is verdict
    if metric is not None:
        assert judgement.metric == pytest.approx(metric)


def test_a_failing_run_stays_bad_whatever_its_metric() -> None:
    assert judged("boom\n", exit_code=1).verdict is Verdict.BAD


def test_load_suite_names_cases_by_folder_and_collects_errors(tmp_path: Path) -> None:
    (tmp_path / "numerics").mkdir()
    (tmp_path / "numerics" / "ok.py").write_text("# /// bisect-case\n# ///\nimport torch\n")
    (tmp_path / "numerics" / "bad.py").write_text("# /// bisect-case\n# repeat = 0\n# ///\n")
    # A script that does not compile, and one with nothing to run: both would fail every night.
    (tmp_path / "numerics" / "broken.py").write_text("# /// bisect-case\n# ///\nimport torch\n"
                                                     "def f(:\n")
    (tmp_path / "numerics" / "empty.py").write_text("# /// bisect-case\n# ///\n")
    cases, errors = load_suite(tmp_path)
    assert [c.case_id for c in cases] == ["numerics/ok"]
    folder = tmp_path / "numerics"
    assert errors == [
        f"{folder / 'bad.py'}:2: repeat must be an integer of at least 1",
        f"{folder / 'broken.py'}:4: the script does not compile: invalid syntax",
        f"{folder / 'empty.py'}:1: the script never imports torch: a case is a reproducer, "
        "run as `python case.py`",
    ]
