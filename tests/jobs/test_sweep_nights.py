"""Nights of the scheduled sweep as `.github/workflows/sweep.yml` runs them: a history the plan
job starts, two shards that `sweep --export` on copies of it, and `sweep-merge --keep-days`
that folds the exports in and files through the real GitHub client, here against the fake
GitHub and a local nightly mirror whose builds report commits of the fake's pytorch/pytorch.
What people and GitHub do between nights: a rename, 502s, a lost history artifact, a person's
title and lock, a secondary rate limit."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bot.demo.index_server import IndexServer
from bot.demo.mirror import build_mirror
from bot.jobs.cli import main
from tests.fakes.github_server import FakeGitHub

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
CASES = ("alpha", "beta", "gamma")


def case(folder: Path, name: str, first: int, fixed: int) -> None:
    """A case that fails on the builds of May `first` to `fixed` - 1; it calls cumsum."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(
        "# /// bisect-case\n# timeout = 30\n# ///\nimport torch\n\n"
        "day = int(torch.__version__.split('.dev')[1][:8])\n"
        f"if 202605{first:02d} <= day < 202605{fixed:02d}:\n"
        f"    raise RuntimeError('{name} broke: cumsum output mismatch')\n"
        "if False:\n    torch.cumsum(torch.ones(3), 0)\nprint('ok')\n")


def seed(repo: Any, days: list[dt.date]) -> dict[dt.date, str]:
    """main, with the culprit landing for the 4th and its revert for the 7th, and a nightly
    commit a day naming main's head: the nightly shas the mirror's builds report."""
    nightly = {}
    for day in days:
        if day.day == 4:
            repo.add_commit("[inductor] Rewrite the cumsum scan lowering",
                            files=("torch/_inductor/lowering.py",))
            repo.add_commit("Fix a docs typo", files=("docs/index.rst",))
        elif day.day == 7:
            repo.add_commit('Revert "[inductor] Rewrite the cumsum scan lowering"',
                            files=("torch/_inductor/lowering.py",))
        else:
            repo.add_commit(f"[dynamo] Unrelated change {day}",
                            files=("torch/_dynamo/eval_frame.py",))
        subject = f"{day.isoformat()} nightly release ({repo.branches['main']})"
        nightly[day] = repo.add_commit(subject, branch="nightly").sha
    return nightly


class Nights:
    def __init__(self, tmp: Path, index_url: str, mirror: Any, suite: Path,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp, self.index_url, self.mirror, self.suite = tmp, index_url, mirror, suite
        self.capsys = capsys
        self.db = tmp / "history" / "history.sqlite3"
        self.db.parent.mkdir()
        self.kept: dict[str, Path] = {}  # each night's uploaded history
        self.said = ""

    def cli(self, *argv: str) -> int:
        code = main(list(argv))
        self.said += self.capsys.readouterr().out
        return code

    def night(self, label: str, day: int, history_from: str | None = None,
              sweep_args: tuple[str, ...] = ()) -> int:
        """The exit status of the collect job's merge; `sweep_args`: the shards' own."""
        if history_from is not None:  # the artifact of the night before was lost
            shutil.copy(self.kept[history_from], self.db)
        assert self.cli("sweep-merge", "--db", str(self.db)) == 0  # the plan job
        exports = []
        for shard in ("1/2", "2/2"):
            copy = self.tmp / f"{label}-{shard[0]}.sqlite3"
            shutil.copy(self.db, copy)
            exports.append(self.tmp / f"export-{label}-{shard[0]}.json")
            assert self.cli("sweep", str(self.suite), "--kind", "cpu", "--shard", shard,
                            "--index", self.index_url, "--nightly",
                            self.mirror.version_on(dt.date(2026, 5, day)), "--db", str(copy),
                            "--export", str(exports[-1]), "--cache-dir",
                            str(self.tmp / "cache"), "--no-default-packages",
                            *sweep_args) == 0
        time.sleep(1.1)  # times are kept to the second: the runs are older than the merge
        code = self.cli("sweep-merge", *map(str, exports), "--db", str(self.db),
                        "--github-repo", "pytorch/pytorch", "--keep-days", "0",
                        "--suite", str(self.suite))
        self.kept[label] = self.tmp / f"after-{label}.sqlite3"
        shutil.copy(self.db, self.kept[label])
        return code


def nine_nights(tmp: Path, github_server: FakeGitHub, github_repo: Any,
                monkeypatch: pytest.MonkeyPatch) -> tuple[list[dt.date], Any]:
    """The jobs' GitHub settings, and a mirror of May 1st to 9th whose builds report the
    nightly commits `seed` makes on the fake's pytorch/pytorch."""
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    days = [dt.date(2026, 5, d) for d in range(1, 10)]
    nightly = seed(github_repo, days)
    mirror = build_mirror(tmp / "mirror", start=days[0], days=len(days), missing=(),
                          python_tags=(TAG,), bug_for=lambda _: None,
                          git_version_for=nightly.__getitem__)
    return days, mirror


def test_nights_of_the_scheduled_sweep(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    suite = tmp_path / "repro_suites"
    for name in CASES:
        case(suite / "inductor", name, 4, 7)
    case(suite / "inductor", "zeta", 1, 1)  # always passes
    version = {d.day: mirror.version_on(d) for d in days}

    def bot_issues() -> list[Any]:
        return [i for i in github_repo.issues.values() if i.author.endswith("[bot]")]

    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n1", 3) == 0 and bot_issues() == []

        # The 5th (the 4th was missed): the three cases broke between the 3rd and the 4th.
        assert nights.night("n2", 5) == 0
        [issue] = bot_issues()
        assert issue.title == (f"[sweep] 3 cases regressed in nightly {version[4]} "
                               "(inductor/alpha and 2 more)")
        body = issue.body
        assert f"- last good nightly: `{version[3]}`" in body
        assert "still failing: 3 of the 3 cases" in body and body.count("/compare/") == 1
        suspect = next(line for line in body.splitlines() if line.startswith("| [`"))
        assert "[inductor] Rewrite the cumsum scan lowering" in suspect
        assert "title mentions `cumsum`" in suspect and "Fix a docs typo" not in body
        for name in CASES:
            assert f"case=inductor/{name} first_bad={version[4]} -->" in body

        # The 6th: still failing; gamma renamed; GitHub answers 502 to every edit a while.
        (suite / "inductor" / "gamma.py").rename(suite / "inductor" / "gamma_renamed.py")
        for _ in range(6):
            github_server.inject(502, {"message": "Server Error"}, method="PATCH")
        assert nights.night("n3", 6) == 1  # the edit failed: owed, not lost
        assert "inductor/gamma_renamed" not in issue.body
        github_server.faults.clear()

        # The 7th, the revert. The 6th's history artifact was lost: the 5th's is used. A
        # person retitled and locked the issue meanwhile.
        issue.title, issue.locked = "cumsum lowering broke 3 inductor cases", True
        assert nights.night("n4", 7, history_from="n2") == 0  # a lock fails nothing
        assert bot_issues() == [issue] and issue.comments == []  # locked: left unsaid
        assert issue.title == "cumsum lowering broke 3 inductor cases"
        assert "still failing: 0 of the 3 cases" in issue.body
        for name in ("alpha", "beta"):
            assert f"passes again in `{version[7]}`" in next(
                line for line in issue.body.splitlines()
                if line.startswith(f"| `inductor/{name}`"))

        # The 8th: all pass; GitHub limits the first write for a second; nothing is owed.
        issue.locked = False
        github_server.inject_secondary_rate_limit(retry_after=1)
        assert nights.night("n5", 8) == 0
        assert bot_issues() == [issue] and issue.comments == []
    assert github_server.rejected == []


def test_a_missed_night_swept_later_is_no_fix_of_the_regression_filed_meanwhile(
    tmp_path: Path, github_server: FakeGitHub, github_repo: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A triager sweeps a night the schedule missed (`nightly=` of the workflow) after the
    regression was filed: the case passes there because that nightly predates it. It was
    taken for the fix: a false 'appears fixed' comment, and the issue no longer followed."""
    days, mirror = nine_nights(tmp_path, github_server, github_repo, monkeypatch)
    suite = tmp_path / "repro_suites"
    case(suite / "inductor", "alpha", 4, 7)
    version = {d.day: mirror.version_on(d) for d in days}
    with IndexServer(mirror.root) as served:
        nights = Nights(tmp_path, served.variant_url("cpu"), mirror, suite, capsys)
        assert nights.night("n1", 1) == 0 and nights.night("n2", 5) == 0
        [issue] = [i for i in github_repo.issues.values() if i.author.endswith("[bot]")]
        assert f"first_bad={version[4]} -->" in issue.body

        assert nights.night("late", 3) == 0  # the missed night: passes, predating the break
        assert issue.comments == [] and issue.state == "open"
        assert "| `inductor/alpha` | good | - | passing |" in nights.said
        assert "appears fixed" not in nights.said

        assert nights.night("n3", 6) == 0  # still followed: seen failing on the 6th
        assert f"still failing in {version[6]}" in nights.said
        assert issue.comments == []
        assert nights.night("n4", 8) == 0  # the fix, said once
        [fixed] = issue.comments
        assert f"appears fixed in nightly {version[8]}" in fixed.body
