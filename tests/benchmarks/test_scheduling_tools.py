"""The tools behind docs/performance.md's scheduling figures: each one runs and can tell
a better policy from a worse one."""

from __future__ import annotations

import json

import bot.core.bisection as core
from benchmarks import bisect_speed, install_throughput, prefetch_hits, schedule_model


def test_the_regression_can_be_planted_at_given_builds(tmp_path, capsys) -> None:
    figures = tmp_path / "figures.json"
    code = bisect_speed.main(["--tiny", "--configs", "b", "--at", "5,2", "--cache",
                              str(tmp_path / "cache"), "--json", str(figures)])
    assert code == 0, capsys.readouterr().out
    data = json.loads(figures.read_text())
    assert data["positions"] == [5, 2]
    assert [run["b"]["first_bad"] for run in data["by_position"]] == [5, 2]


def test_the_model_finds_every_regression_and_values_prefetch_and_workers() -> None:
    """`Model.run` asserts the answer; prefetch and more workers must each pay in the model,
    and the core's slack is left as it was."""
    before = core.READY_SLACK
    bot = schedule_model.ORDERS["bot"]
    one = schedule_model.Model(16, 1, 5, 2.0, bot, 3).run()
    three = schedule_model.Model(16, 3, 5, 2.0, bot, 3).run()
    no_prefetch = schedule_model.Model(16, 1, 5, 2.0, bot, 3, threads=0).run()
    assert three < one < no_prefetch
    assert schedule_model.Model(16, 3, 11, 2.0, bot, 2).run() > 0
    assert before == core.READY_SLACK


def test_derived_installs_and_a_faster_first_round_each_pay_in_the_model() -> None:
    """Derivations are faster than uv's installs once an environment is made; a shorter
    round 1 and installs that take no time lower (c) further, and the floor is the runs."""
    bot = schedule_model.ORDERS["bot"]

    def c(**options: object) -> float:
        return schedule_model.Model(32, 3, 20, 2.0, bot, 3, **options).run()

    uv_only, derived = c(), c(derive=True)
    assert derived < uv_only
    assert c(derive=True, first_s=1.0) < c(derive=True, first_s=3.0)
    floor = c(derive=True, first_s=1.0, fixed_s=0.0, derived_rate=((1, 1e4), (12, 1e5)))
    assert floor < c(derive=True, first_s=1.0)
    assert floor >= 1.0 + 3 * 2.0  # round 1's installs, then at least three rounds of runs


def test_the_install_rate_follows_the_measured_points() -> None:
    rates = [schedule_model.rate(n) for n in range(1, 16)]
    assert rates == sorted(rates)
    for count, measured in schedule_model.RATE:
        assert schedule_model.rate(count) == measured


def test_moving_splits_to_made_builds_hits_more_often() -> None:
    import random

    def hits(use_made: bool) -> int:
        rng = random.Random(1)
        return sum(prefetch_hits.after_round_one(64, 3, bad, 6, rng, use_made)[1]
                   for bad in range(1, 64))

    assert hits(True) > hits(False)


def test_the_model_and_hit_counts_print_their_tables(capsys) -> None:
    assert prefetch_hits.main(["--builds", "16", "--trials", "1", "--made", "2"]) == 0
    assert schedule_model.main(["--builds", "12", "--orders", "bot", "--slacks", "3",
                                "--threads", "2"]) == 0
    assert schedule_model.main(["--builds", "12", "--orders", "bot", "--slacks", "3",
                                "--threads", "2", "--instant", "--first-seconds", "2.6"]) == 0
    out = capsys.readouterr().out
    assert "made ahead" in out and "(b) 1 worker:" in out and "c/b" in out


def test_install_throughput_installs_builds_at_once(tmp_path, capsys) -> None:
    code = install_throughput.main(["--payload-mb", "1", "--at-once", "2", "--threads", "0,1",
                                    "--cache", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["default"], ["1"])]
    assert [row[:2] for row in rows] == [["default", "2"], ["1", "2"]]
    assert all(float(row[-1]) > 0 for row in rows)
