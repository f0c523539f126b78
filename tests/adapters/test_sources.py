"""GitSources against real git: a partial clone over file://, cached and fetched again."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.adapters.sources import GitSources, SourceError
from bot.core.overlay import FileChange


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@x", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], subject: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "uploadpack.allowFilter", "true")
    _commit(repo, {"torch/a.py": "A = 1\n", "aten/x.cpp": "int x;\n"}, "Initial (#1)")
    _commit(repo, {"torch/a.py": "A = 2\n", "test/t.py": "pass\n"}, "Change a (#2)")
    _commit(repo, {"torch/b.py": "B = 1\n"}, "Add b (#3)")
    _git(repo, "branch", "nightly", "HEAD")
    return repo


def _missing_objects(sources: GitSources) -> int:
    out = sources.git("--git-dir", str(sources.path), "rev-list", "--objects", "--all",
                      "--missing=print")
    return sum(1 for line in out.decode().splitlines() if line.startswith("?"))


def test_partial_clone_lists_commits_and_changes_without_blobs(upstream: Path,
                                                                tmp_path: Path) -> None:
    sources = GitSources(tmp_path / "cache", f"file://{upstream}")
    sources.update()
    missing = _missing_objects(sources)
    assert missing >= 4  # blobs stay on the server until asked for
    first = _git(upstream, "rev-list", "--max-parents=0", "HEAD")
    shas = sources.commits_between(first, "main")
    assert [sources.commit(s).subject for s in shas] == ["Change a (#2)", "Add b (#3)"]
    assert set(sources.changes(first, shas[-1])) == {
        FileChange("M", "torch/a.py"), FileChange("A", "torch/b.py"), FileChange("A", "test/t.py")}
    assert sources.own_changes(shas[-1]) == (FileChange("A", "torch/b.py"),)
    assert _missing_objects(sources) == missing  # listing changes fetched no blob
    files = sources.read_files(first, shas[-1], ["torch/a.py", "torch/b.py"])
    assert files == {"torch/a.py": b"A = 2\n", "torch/b.py": b"B = 1\n"}
    # The two new blobs, and the old side of the modified file (git diff prefetches both sides);
    # the blobs of test/t.py and aten/x.cpp are never fetched.
    assert _missing_objects(sources) == missing - 3


def test_without_allow_filter_the_clone_is_full_but_still_works(upstream: Path,
                                                                  tmp_path: Path) -> None:
    _git(upstream, "config", "uploadpack.allowFilter", "false")
    sources = GitSources(tmp_path / "cache", f"file://{upstream}")
    sources.update()  # git warns "filtering not recognized by server" and clones everything
    assert _missing_objects(sources) == 0
    old = _git(upstream, "rev-parse", "main~1")
    assert sources.read_files(old, "main", ["torch/b.py"]) == {"torch/b.py": b"B = 1\n"}


def test_the_clone_is_cached_and_fetch_brings_new_commits(upstream: Path, tmp_path: Path) -> None:
    sources = GitSources(tmp_path / "cache", f"file://{upstream}")
    sources.update()
    marker = sources.path / "tbb-test-marker"
    marker.write_text("kept")
    old = _git(upstream, "rev-parse", "main")
    new = _commit(upstream, {"torch/a.py": "A = 3\n"}, "2026-05-21 nightly release (abc1234)")
    _git(upstream, "branch", "-f", "nightly", new)
    sources.update()
    assert marker.exists()  # the same clone, not a new one
    assert sources.subject(new) == "2026-05-21 nightly release (abc1234)"
    assert sources.read_files(old, new, ["torch/a.py"]) == {"torch/a.py": b"A = 3\n"}


def test_bad_input_and_bad_remotes_raise(tmp_path: Path) -> None:
    sources = GitSources(tmp_path / "cache", f"file://{tmp_path / 'nowhere'}")
    with pytest.raises(SourceError):
        sources.update()
    assert not sources.path.exists()  # a failed clone leaves nothing half-made
    with pytest.raises(SourceError, match="not a commit id"):
        sources.subject("main; rm -rf /")


def test_a_merge_s_own_changes_are_what_it_brings_to_main(upstream: Path, tmp_path: Path) -> None:
    """A merge that brings a C++ change must carry it, or the change is blamed on nobody and
    the Python commit after it seems to bring it."""
    _git(upstream, "checkout", "-q", "-b", "side", "HEAD~1")
    _commit(upstream, {"aten/x.cpp": "int y;\n"}, "Faster x (#4)")
    _git(upstream, "checkout", "-q", "main")
    _git(upstream, "merge", "-q", "--no-ff", "side", "-m", "Merge side (#5)")
    merge = _git(upstream, "rev-parse", "HEAD")
    sources = GitSources(tmp_path / "cache", f"file://{upstream}")
    sources.update()
    assert sources.own_changes(merge) == (FileChange("M", "aten/x.cpp"),)


def test_the_clone_holds_main_and_nightly_only(upstream: Path, tmp_path: Path) -> None:
    """pytorch/pytorch has tens of thousands of other branches (`gh/<user>/<n>/head` stacks):
    the clone must not fetch them."""
    _git(upstream, "branch", "gh/someone/1/head", "main~1")
    _git(upstream, "branch", "feature", "main~1")
    sources = GitSources(tmp_path / "cache", f"file://{upstream}")
    sources.update()
    refs = sources.git("--git-dir", str(sources.path), "for-each-ref", "--format=%(refname)")
    assert sorted(refs.decode().split()) == ["refs/heads/main", "refs/heads/nightly"]
