"""End to end: `bisect-bot bisect` over a git-backed local mirror names the planted commit."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import cast

import pytest
from packaging.version import Version

from bot.adapters.runner import Runner
from bot.adapters.sources import GitSources
from bot.core.bisection import Bisection
from bot.core.builds import Build, WheelLink, nightly_date
from bot.core.commit_report import render_commit_section
from bot.core.results import BisectResult, ProbeRecord
from bot.core.verdicts import Verdict
from bot.demo.git_mirror import GitMirror, _git, _nightly_commit, build_git_mirror
from bot.demo.index_server import IndexServer
from bot.jobs import cli
from bot.jobs.commit_tier import CommitTierJob
from bot.jobs.demo import example_path
from bot.jobs.engine import Provisioner


def _bisect(tmp_path: Path, mirror: GitMirror, *extra: str) -> tuple[int, dict, str]:
    script = example_path(tmp_path)
    with IndexServer(mirror.root) as server:
        code = cli.main([
            "bisect", str(script), "--index", server.variant_url(mirror.variant),
            "--upstream", mirror.url, "--cache-dir", str(tmp_path / "cache"),
            "--no-default-packages", "--timeout", "60", "--work-dir", str(tmp_path / "work"),
            "--json", str(tmp_path / "report.json"), "--markdown", str(tmp_path / "report.md"),
            *extra,
        ])
    return code, json.loads((tmp_path / "report.json").read_text()), (
        tmp_path / "report.md").read_text()


def test_names_the_planted_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mirror = build_git_mirror(tmp_path / "mirror", culprit=(3, 2), cpp=(3, 3))
    code, report, markdown = _bisect(tmp_path, mirror)
    # The terminal shows the culprit as plain text: no Markdown link syntax there.
    printed = capsys.readouterr()
    terminal = printed.out
    assert f"Culprit commit: {mirror.culprit[:12]} " in terminal and "](" not in terminal
    # The first clone is minutes of pytorch/pytorch: said, not silent; later ones fetch.
    assert f"commit tier: cloning {mirror.url} into " in printed.err, printed.err[-2000:]
    assert "commit tier: updating" not in printed.err
    assert code == 0 and report["first_bad"] == mirror.first_bad
    tier = report["commit_tier"]
    assert tier["status"] == "found"
    assert tier["culprit"]["sha"] == mirror.culprit
    assert tier["culprit"]["pr"] == 150015
    assert tier["culprit"]["author"] == "Carol Culprit"
    assert tier["good_commit"] == mirror.main_of[mirror.versions[2]]
    assert tier["bad_commit"] == mirror.main_of[mirror.versions[3]]
    testable = [c["testable"] for c in tier["commits"]]
    assert testable == [True, True, True, False]  # the C++ commit comes after the culprit
    # The nightly tier stays above the commit section; the culprit has title, PR link, author.
    assert markdown.index("Regression found") < markdown.index("### Culprit commit")
    # A file:// upstream (a local checkout, not on github.com): links go to pytorch/pytorch,
    # which has every main commit a nightly is cut from.
    assert "https://github.com/pytorch/pytorch/pull/150015" in markdown
    assert tier["culprit"]["url"] == "https://github.com/pytorch/pytorch/pull/150015"
    assert (f"Culprit commit: [`{mirror.culprit[:12]}`](https://github.com/pytorch/pytorch/"
            f"commit/{mirror.culprit})") in markdown
    assert "Keep cumsum accumulators in bf16" in markdown and "Carol Culprit" in markdown
    # One list of commits: the tier's, not also the triage's nightly-branch range.
    assert "### Commits\n" not in markdown and "(nightly branch)" not in markdown
    # Nor the nightly-branch compare link (GitHub lists only the nightly release commits there).
    nightly_git = [p["info"]["git_version"] for p in report["probe_records"]
                   if p["version"] in mirror.versions[2:4] and p["info"].get("git_version")]
    assert nightly_git and not any(f"/compare/{sha}" in markdown for sha in nightly_git)
    # The overlays (hard links of the last good environment) went with the tier: kept, they
    # would hold that environment's files on disk after the cache evicts it.
    assert [c["verdict"] for c in tier["commits"]][1:3] == ["good", "bad"]  # overlays ran
    assert list((tmp_path / "cache" / "overlays").iterdir()) == []


def test_narrows_to_the_stretch_after_a_cpp_change_and_says_why(tmp_path: Path) -> None:
    mirror = build_git_mirror(tmp_path / "mirror", culprit=(3, 2), cpp=(3, 1))
    code, report, markdown = _bisect(tmp_path, mirror)
    assert code == 0
    tier = report["commit_tier"]
    assert tier["status"] == "ambiguous" and tier["culprit"] is None
    shas = [c["sha"] for c in tier["range"]]
    assert shas[0] == mirror.cpp_commit and mirror.culprit in shas
    assert "Narrowed to 3 commits" in markdown
    assert "compiled change: aten/src/ATen/native/Foo.cpp" in markdown
    assert f"since {mirror.cpp_commit[:12]}" in markdown


@pytest.mark.parametrize("flag", ["--no-commit-tier", "--fix"])
def test_opt_out_and_fix_mode_skip_the_commit_tier(tmp_path: Path, flag: str) -> None:
    mirror = build_git_mirror(tmp_path / "mirror", days=3, culprit=(1, 1), cpp=None)
    _, report, markdown = _bisect(tmp_path, mirror, flag)
    assert "commit_tier" not in report and "Culprit commit" not in markdown
    assert not (tmp_path / "cache" / "sources").exists()


def test_an_unreachable_upstream_is_reported_not_fatal(tmp_path: Path) -> None:
    mirror = build_git_mirror(tmp_path / "mirror", days=3, culprit=(1, 1), cpp=None)
    code, report, markdown = _bisect(tmp_path, mirror, "--upstream",
                                     f"file://{tmp_path / 'nowhere'}")
    assert code == 0 and report["first_bad"] == mirror.first_bad
    assert report["commit_tier"]["status"] == "skipped"
    assert "Commit tier not run: the upstream repository could not be read" in markdown


def _found(versions: tuple[str, str], git_versions: tuple[str, str],
           python: str | None = None) -> BisectResult:
    builds = tuple(Build(v, nightly_date(Version(v)), "cpu", WheelLink(f"torch-{v}.whl", "http://x"),
                         python=python) for v in versions)
    state = Bisection(2, good_index=0).record(0, Verdict.GOOD).record(1, Verdict.BAD)
    probes = tuple(ProbeRecord(i, v, verdict, "", 1.0, info={"git_version": sha})
                   for i, (v, sha, verdict) in enumerate(zip(
                       versions, git_versions, (Verdict.GOOD, Verdict.BAD), strict=True)))
    return BisectResult(builds, state, probes, "exit 1")


@pytest.mark.parametrize(("result", "why"), [
    (_found(("2.12.0", "2.13.0"), ("a" * 40, "b" * 40)), "2.12.0, 2.13.0 is not a nightly build"),
    (_found(("2.13.0.dev20260520+cpu", "2.13.0.dev20260521+cpu"), ("a" * 40, "Unknown")),
     "git_version 'Unknown', not a commit id"),
    (_found(("2.13.0.dev20260520+cpu", "2.13.0.dev20260521+cpu"), ("a" * 40, "b" * 40),
            python="/usr/bin/python3"), "(--builds-from-python), not nightlies"),
])
def test_builds_that_are_not_nightlies_are_said_so_before_any_clone(
        tmp_path: Path, result: BisectResult, why: str) -> None:
    """A release, a build without a commit id or a local interpreter cannot be mapped to main
    commits: the tier says so without cloning pytorch/pytorch first (minutes on a runner)."""
    sources = GitSources(tmp_path / "cache", f"file://{tmp_path / 'upstream'}")
    job = CommitTierJob(sources, cast(Provisioner, None), Runner(), tmp_path / "repro.py",
                        tmp_path / "cache")
    tier = job.run(result)
    assert why in tier.skipped and tier.result is None
    assert not (tmp_path / "cache" / "sources").exists()


def test_the_commit_tier_runs_in_the_gpus_it_was_given(tmp_path: Path) -> None:
    """`--gpus 0,1`: the commit tier's probes get one worker's GPU each, as the nightly
    tier's do; they used to run with every GPU of the machine visible."""
    mirror = build_git_mirror(tmp_path / "mirror", culprit=(3, 2), cpp=(3, 3))
    example = example_path(tmp_path, "cumsum_repro.py")
    guarded = tmp_path / "guarded.py"
    guarded.write_text("import os\nassert os.environ.get('CUDA_VISIBLE_DEVICES') in ('0', '1'), "
                       "'ran outside its --gpus'\n" + example.read_text())
    with IndexServer(mirror.root) as server:
        code = cli.main([
            "bisect", str(guarded), "--index", server.variant_url(mirror.variant),
            "--upstream", mirror.url, "--cache-dir", str(tmp_path / "cache"),
            "--no-default-packages", "--timeout", "60", "--work-dir", str(tmp_path / "work"),
            "--gpus", "0,1", "--json", str(tmp_path / "report.json")])
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 0 and report["first_bad"] == mirror.first_bad
    assert report["commit_tier"]["status"] == "found"
    assert report["commit_tier"]["culprit"]["sha"] == mirror.culprit
    # The triage's runs were in a worker's GPU too: none failed on the guard.
    triaged = [p for p in report["probe_records"] if p["variant_env"]]
    assert triaged and not any("ran outside its --gpus" in p["result"]["output"]
                               for p in triaged)


def test_nightlies_built_from_one_main_commit_are_said_so(tmp_path: Path) -> None:
    """Two nightlies cut from the same main commit (viable/strict did not move): no commit of
    pytorch/pytorch can be the cause, and the tier says so rather than "no commits"."""
    mirror = build_git_mirror(tmp_path / "mirror", days=2, culprit=(1, 1), cpp=None)
    head = mirror.main_of[mirror.versions[-1]]
    nightly = _git(mirror.repo, "rev-parse", "nightly")
    again = _nightly_commit(mirror.repo, head, nightly, dt.date(2026, 5, 20))
    _git(mirror.repo, "update-ref", "refs/heads/nightly", again)
    sources = GitSources(tmp_path / "cache", mirror.url)
    job = CommitTierJob(sources, cast(Provisioner, None), Runner(), tmp_path / "repro.py",
                        tmp_path / "cache")
    tier = job.run(_found(("2.13.0.dev20260519+cpu", "2.13.0.dev20260520+cpu"),
                          (nightly, again)))
    assert tier.result is None and tier.good_main == tier.bad_main == head
    assert f"both nightlies were built from the same main commit {head[:12]}" in tier.skipped
    section = render_commit_section(tier)
    assert "not in pytorch/pytorch's sources" in section and "/compare/" not in section
