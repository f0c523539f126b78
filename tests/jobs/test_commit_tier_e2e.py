"""End to end: `bisect-bot bisect` over a git-backed local mirror names the planted commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.demo.git_mirror import GitMirror, build_git_mirror
from bot.demo.index_server import IndexServer
from bot.jobs import cli
from bot.jobs.demo import example_path


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


def test_names_the_planted_commit(tmp_path: Path) -> None:
    mirror = build_git_mirror(tmp_path / "mirror", culprit=(3, 2), cpp=(3, 3))
    code, report, markdown = _bisect(tmp_path, mirror)
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
    assert "https://github.com/pytorch/pytorch/pull/150015" in markdown
    assert "Keep cumsum accumulators in bf16" in markdown and "Carol Culprit" in markdown
    # One list of commits: the tier's, not also the triage's nightly-branch range.
    assert "### Commits\n" not in markdown and "(nightly branch)" not in markdown
    overlays = [p for p in (tmp_path / "cache" / "overlays").glob("tbb-*@*") if p.is_dir()]
    assert overlays and all((p / ".tbb-env.json").exists() for p in overlays)


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
