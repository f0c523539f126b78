"""Which commits between two nightlies can be tested by overlaying their Python on the good one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase


class Kind(str, Enum):
    """What a changed repository path is to a nightly wheel."""

    PYTHON = "python"  # shipped in the wheel as it is in the repository: overlay it
    DATA = "data"  # package data shipped as it is (json, yaml, jinja templates): overlay it
    NO_EFFECT = "no-effect"  # not in the wheel and not used to build it (tests, CI, docs)
    COMPILED = "compiled"  # C++/CUDA sources and what drives their code generation
    GENERATED = "generated"  # the wheel's copy is made at build time, not taken from the repo
    BUILD = "build"  # may change how the wheel is built (or is not known not to)


OVERLAYABLE = frozenset({Kind.PYTHON, Kind.DATA})
BLOCKING = frozenset({Kind.COMPILED, Kind.GENERATED, Kind.BUILD})

# The packages setup.py puts in the wheel from their source folders (torch, functorch, torchgen).
SHIPPED_ROOTS = ("torch/", "functorch/", "torchgen/")
# Folders under the shipped roots that are not packages of the wheel.
UNSHIPPED = ("functorch/examples/", "functorch/notebooks/", "functorch/docs/",
             "functorch/benchmarks/", "functorch/dim/README")
# Written by the build (tools/generate_torch_version.py, tools/pyi/gen_pyi.py, torchgen): the
# wheel's copy differs from, or does not exist in, the repository.
# Most torch/_C/*.pyi stubs are checked in (and only type checkers read them); these are not.
GENERATED_PATTERNS = (
    "torch/version.py", "torch/_C/__init__.pyi", "torch/_C/_VariableFunctions.pyi",
    "torch/_C/_nn.pyi", "torch/_C/return_types.pyi", "torch/_C/_tensor.pyi", "torch/_VF.pyi",
    "torch/return_types.pyi", "torch/nn/functional.pyi", "torch/_C/*.pyi.in",
    "torch/utils/data/datapipes/datapipe.pyi",
    "torch/testing/_internal/generated/*", "torchgen/packaged/*", "torch/include/*",
    "torch/lib/*", "torch/bin/*", "torch/share/*",
)
# Compiled code and the inputs of its code generation, wherever they sit.
COMPILED_SUFFIXES = (".cpp", ".cc", ".c", ".cu", ".cuh", ".h", ".hpp", ".mm", ".metal",
                     ".cmake", ".in", ".S", ".hip", ".ptx")
COMPILED_NAMES = ("CMakeLists.txt", "native_functions.yaml", "derivatives.yaml", "tags.yaml")
COMPILED_PREFIXES = ("aten/", "c10/", "caffe2/", "torch/csrc/", "third_party/", "functorch/csrc/")
# How the wheel is built: codegen (tools/, torchgen/), CMake modules, the nightly wheel scripts,
# and what the wheel is made to depend on. torchgen ships in the wheel, but a change to it also
# changes the code it generates at build time, which an overlay of its Python cannot bring. The
# nightly's triton and CUDA library pins come from `.ci/docker/` (`triton_version.txt` and
# `ci_commit_pins/triton.txt` name the `pytorch-triton` wheel, pytorch's
# scripts/install_triton_wheel.sh) and `.github/scripts/generate_binary_build_matrix.py` (the
# wheel's `nvidia-*` requirements); an overlay keeps the last good nightly's, so a pin bump
# would "pass" and be cleared.
BUILD_NAMES = ("setup.py", "pyproject.toml", "build_variables.bzl", "version.txt",
               "requirements-build.txt")
BUILD_PREFIXES = ("tools/", "cmake/", ".ci/manywheel/", ".ci/wheel/", ".ci/docker/", "torchgen/",
                  ".github/scripts/generate_binary_build_matrix.py")
# Folders whose files, C++ included, are not compiled into the libraries the wheel ships:
# test/cpp, test/cpp_extensions and benchmarks/ build their own binaries (if any), docs/,
# android/ and ios/ are not built for a Linux wheel.
OUTSIDE_THE_WHEEL = ("test/", "docs/", "benchmarks/", "android/", "ios/")
# Paths that neither ship in the wheel nor take part in building it.
NO_EFFECT_PREFIXES = (".github/", "test/", "docs/", "benchmarks/", ".ci/", "android/", "ios/",
                      "scripts/", ".devcontainer/", ".vscode/", "mypy_plugins/")
NO_EFFECT_NAMES = (".gitignore", ".lintrunner.toml", ".flake8", "CODEOWNERS", ".clang-format",
                   ".clang-tidy", ".bazelrc", "BUILD.bazel", "WORKSPACE", ".editorconfig",
                   "mypy.ini", "mypy-strict.ini", ".gitattributes", ".git-blame-ignore-revs")
DATA_SUFFIXES = (".json", ".yaml", ".yml", ".jinja", ".txt", ".typed", ".js", ".html", ".css")

# The subject of a commit on pytorch/pytorch's `nightly` branch, written by
# .github/scripts/update-nightly (pytorch's nightly-branch workflow).
_PR_NUMBER = re.compile(r"\(#(\d+)\)\s*$")
PULL_URL = "https://github.com/pytorch/pytorch/pull/{number}"


def classify(path: str) -> Kind:
    """What a changed repository path is to the wheel (see the tables above for why)."""
    name = path.rsplit("/", 1)[-1]
    if path.startswith(OUTSIDE_THE_WHEEL):
        return Kind.NO_EFFECT  # C++ tests and benchmarks too: their own binaries, not libtorch
    if path.startswith(COMPILED_PREFIXES) or name in COMPILED_NAMES:
        return Kind.COMPILED
    if path.startswith(BUILD_PREFIXES) or name in BUILD_NAMES:
        return Kind.BUILD
    if any(fnmatchcase(path, pattern) for pattern in GENERATED_PATTERNS):
        return Kind.GENERATED
    if path.endswith(COMPILED_SUFFIXES):
        return Kind.COMPILED
    if path.startswith(SHIPPED_ROOTS) and not path.startswith(UNSHIPPED):
        if path.endswith(".py"):
            return Kind.PYTHON
        if path.endswith(".pyi") or name == "README.md":
            return Kind.NO_EFFECT  # type stubs and notes: no effect at run time
        return Kind.DATA if path.endswith(DATA_SUFFIXES) else Kind.BUILD
    if path.startswith(UNSHIPPED + NO_EFFECT_PREFIXES) or name in NO_EFFECT_NAMES:
        return Kind.NO_EFFECT
    if "/" not in path and path.endswith((".md", ".rst")):
        return Kind.NO_EFFECT
    return Kind.BUILD


def site_path(path: str) -> str | None:
    """Where an overlay-able repository path lives in site-packages (the same relative path)."""
    return path if classify(path) in OVERLAYABLE else None


@dataclass(frozen=True)
class FileChange:
    """One line of `git diff --name-status`: A, M, D, T, or R/C with the old path."""

    status: str
    path: str
    old_path: str | None = None

    def paths(self) -> tuple[str, ...]:
        return (self.path,) if self.old_path is None else (self.old_path, self.path)


def parse_name_status(text: str) -> tuple[FileChange, ...]:
    """`git diff --name-status -z` output: NUL-separated status, path (and new path for R/C)."""
    fields = text.split("\0")
    changes: list[FileChange] = []
    position = 0
    while position < len(fields) and fields[position]:
        status = fields[position][0]
        if status in "RC":
            old, new = fields[position + 1], fields[position + 2]
            changes.append(FileChange(status, new, old))
            position += 3
        else:
            changes.append(FileChange(status, fields[position + 1]))
            position += 2
    return tuple(changes)




@dataclass(frozen=True)
class Commit:
    """A main-branch commit as the report shows it."""

    sha: str
    subject: str
    author: str = ""
    date: str = ""

    @property
    def title(self) -> str:
        """The subject without its trailing `(#12345)`."""
        return _PR_NUMBER.sub("", self.subject).rstrip()

    @property
    def pr_number(self) -> int | None:
        """PyTorch's merge bot ends every subject with `(#12345)`."""
        match = _PR_NUMBER.search(self.subject)
        return int(match[1]) if match else None

    @property
    def pr_url(self) -> str | None:
        number = self.pr_number
        return PULL_URL.format(number=number) if number is not None else None


@dataclass(frozen=True)
class CommitChanges:
    """A commit, what it changed itself, and what changed since the last good nightly's commit."""

    commit: Commit
    own: tuple[FileChange, ...]
    since_base: tuple[FileChange, ...]


@dataclass(frozen=True)
class Candidate:
    """A commit of the range, whether an overlay can stand for it, and why not."""

    commit: Commit
    testable: bool
    reason: str
    overlay: tuple[FileChange, ...] = ()  # the overlay-able changes since the base commit
    cause: str | None = None  # sha of the commit in range that brought the first blocker


def blockers(changes: Sequence[FileChange]) -> tuple[tuple[str, Kind], ...]:
    """The paths (old and new) that an overlay cannot stand for, with their kinds."""
    found = [(path, classify(path)) for change in changes for path in change.paths()]
    return tuple((path, kind) for path, kind in found if kind in BLOCKING)


def _overlay_changes(changes: Sequence[FileChange]) -> tuple[FileChange, ...]:
    return tuple(c for c in changes if any(classify(p) in OVERLAYABLE for p in c.paths()))


def plan_candidates(history: Sequence[CommitChanges]) -> tuple[Candidate, ...]:
    """For each commit, oldest first: testable by overlay, or not and why."""
    introduced: dict[str, str] = {}  # blocking path -> first commit in range that touched it
    planned: list[Candidate] = []
    for entry in history:
        for path, _ in blockers(entry.own):
            introduced.setdefault(path, entry.commit.sha)
        blocking = blockers(entry.since_base)
        if not blocking:
            kept = _overlay_changes(entry.since_base)
            reason = f"overlay of {len(kept)} file(s)" if kept else "no shipped file changed"
            planned.append(Candidate(entry.commit, True, reason, kept))
            continue
        path, kind = blocking[0]
        more = f" and {len(blocking) - 1} more" if len(blocking) > 1 else ""
        cause = introduced.get(path)
        where = "" if cause in (None, entry.commit.sha) else f" (since {cause[:12]})"
        reason = f"{kind.value} change: {path}{more}{where}"
        planned.append(Candidate(entry.commit, False, reason, cause=cause))
    return tuple(planned)


def candidate_version(base_version: str, sha: str) -> str:
    """The label of an overlay build: the good nightly's version and the commit it stands for."""
    return f"{base_version}@{sha[:12]}"
