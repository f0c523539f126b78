"""The speed benchmark's smallest path runs end to end and every bot configuration finds the bug."""

from __future__ import annotations

import json

from benchmarks import bisect_speed


def test_tiny_benchmark_finds_the_planted_build(tmp_path, capsys) -> None:
    figures = tmp_path / "figures.json"
    code = bisect_speed.main(["--quick", "--tiny", "--configs", "bcd", "--seed", "3",
                              "--cache", str(tmp_path / "cache"), "--json", str(figures)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(figures.read_text())
    planted = int(out.split("regression planted at build ")[1].split()[0])
    assert {f["first_bad"] for f in data["results"].values()} == {planted}
    assert data["results"]["c"]["rounds"] < data["results"]["b"]["rounds"]
    assert "c/b" in out and "target" in out
