"""Commits between two nightlies, ranked by how well they match the triage and the reproducer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

REPO_URL = "https://github.com/pytorch/pytorch"

# A nightly's torch.version.git_version is a commit on the `nightly` branch whose subject reads
# "YYYY-MM-DD nightly release (<main sha>)" (.github/scripts of pytorch/pytorch).


# A clone URL of a github.com repository, as `--upstream` takes it.
_GITHUB_CLONE = re.compile(r"https://github\.com/([\w-]+)/([\w.-]+?)(?:\.git)?/?", re.IGNORECASE)


def github_repo(upstream: str) -> str | None:
    """The web address of the repository an upstream clone URL names on github.com, where its
    commits can be linked; None for anything else (a local path, another host)."""
    found = _GITHUB_CLONE.fullmatch(upstream)
    return f"https://github.com/{found[1]}/{found[2]}" if found else None


def compare_url(base: str, head: str, repo: str = REPO_URL) -> str:
    return f"{repo}/compare/{base}...{head}"


def commit_url(sha: str, repo: str = REPO_URL) -> str:
    return f"{repo}/commit/{sha}"


@dataclass(frozen=True)
class Commit:
    """One commit of the range, as much of it as ranking needs."""

    sha: str
    title: str
    author: str = ""
    url: str = ""
    files: tuple[str, ...] = ()
    reverts: str = ""  # the sha its message says it reverts ("This reverts commit <sha>.")
    diff_operators: tuple[str, ...] = ()  # the reproducer's operators its changed lines name


@dataclass(frozen=True)
class Clues:
    """What points at a commit: operators the reproducer calls and what the triage found."""

    operators: tuple[str, ...] = ()
    subsystem: str | None = None  # Dynamo, AOTAutograd, decompositions, Inductor
    precision: bool = False
    bisector_subsystem: str | None = None  # e.g. lowerings, post_grad_passes


@dataclass(frozen=True)
class Suspect:
    commit: Commit
    score: int
    reasons: tuple[str, ...] = field(default=())


# Where each subsystem lives in pytorch/pytorch, and the words its PR titles carry.
SUBSYSTEM_PATHS: dict[str, tuple[str, ...]] = {
    "Dynamo": ("torch/_dynamo/",),
    "AOTAutograd": ("torch/_functorch/", "torch/_subclasses/", "aten/src/ATen/native/"),
    "decompositions": ("torch/_decomp/", "torch/_refs/", "torch/_prims/",
                       "torch/_inductor/decomposition.py", "torch/_functorch/partitioners.py"),
    "Inductor": ("torch/_inductor/",),
}
# Whole words of a lowered title, where `_` ends a word (`torch._decomp` names `decomp`); the
# subsystems are those bot/core/triage.py names (its _SUBSYSTEM), and the words the PR titles
# and module labels of pytorch/pytorch use for them ("module: aotdispatch").
SUBSYSTEM_WORDS: dict[str, tuple[str, ...]] = {
    "Dynamo": ("dynamo", "torchdynamo"),
    "AOTAutograd": ("aot", "autograd", "functorch", "aotautograd", "aotdispatch", "aot_dispatch",
                    "functionalization", "functionalize"),
    "decompositions": ("decomp", "decomps", "decomposition", "decompositions", "partitioner",
                       "refs"),
    "Inductor": ("inductor", "torchinductor"),
}
# compiler_bisector subsystem names (torch/_inductor/compiler_bisector.py, BACKENDS) -> files.
BISECTOR_PATHS: dict[str, tuple[str, ...]] = {
    "pre_grad_passes": ("torch/_inductor/fx_passes/pre_grad.py",),
    "joint_graph_passes": ("torch/_inductor/fx_passes/joint_graph.py",),
    "post_grad_passes": ("torch/_inductor/fx_passes/post_grad.py",),
    "lowerings": ("torch/_inductor/lowering.py",),
    "decomposition": ("torch/_decomp/", "torch/_inductor/decomposition.py"),
    "cudagraphs": ("torch/_inductor/cudagraph",),
}
PRECISION_WORDS = ("precision", "bf16", "bfloat16", "fp16", "float16", "half", "upcast",
                   "downcast", "rounding", "accuracy", "numerics", "dtype")
_TEST_OR_DOC = re.compile(r"^(test/|docs/|benchmarks/|\.github/|\.ci/)")

# Names in `torch.X(` that are plumbing, not operators worth matching against commits.
_NOT_OPERATORS = frozenset({
    "compile", "manual_seed", "randn", "rand", "randint", "zeros", "ones", "empty", "tensor",
    "arange", "linspace", "full", "no_grad", "enable_grad", "device", "set_default_dtype",
    "allclose", "equal", "testing", "assert_close", "is_tensor", "from_numpy", "cuda", "set_grad",
    "use_deterministic_algorithms", "inference_mode", "autocast", "float32", "float64",
    "to", "backward", "item", "clone", "detach", "requires_grad_", "cpu", "numpy", "size",
    "float", "double", "half", "bfloat16", "contiguous", "view", "reshape", "print", "reset",
    # Methods of Python's containers and strings, and of every nn.Module or optimizer: a
    # reproducer calls them, and they name no operator.
    "append", "extend", "insert", "pop", "keys", "values", "items", "get", "update", "format",
    "join", "split", "strip", "startswith", "endswith", "replace", "lower", "upper", "copy",
    "write", "read", "close", "open", "eval", "train", "parameters", "named_parameters",
    "modules", "children", "state_dict", "load_state_dict", "zero_grad", "step", "forward",
    "register_buffer", "register_parameter", "add_module", "seed", "is_available",
})
# `torch.op(`, `F.op(`, and a method call after a name or a call (`x.exp(`, `x.exp().log(`).
_CALL = re.compile(
    r"(?:\btorch\.(?:nn\.functional\.|special\.|linalg\.|fft\.)?|\bF\.|(?<=[\w)\]])\.)"
    r"([a-z][a-z0-9_]{2,})\("
)


def operators_in(script: str) -> tuple[str, ...]:
    """Operator names the reproducer calls (`torch.cumulative_trapezoid(`, `x.cumsum(`)."""
    names = [m[1] for m in _CALL.finditer(script) if m[1] not in _NOT_OPERATORS]
    return tuple(dict.fromkeys(names))


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", text.lower()) is not None


# Operators whose names are everyday words of PR titles ("Add bf16 support to ...", "Support
# all dtypes", "[inductor] max-autotune ..."): a title names one of them only as code.
_WORDY_OPERATORS = frozenset({
    "add", "all", "any", "max", "min", "sort", "where", "index", "copy", "fill", "select",
    "split", "set", "pad", "round", "expand", "repeat", "stack", "take", "put", "narrow",
    "diff", "view", "clamp", "sub", "mean", "log",
})


def _title_names(title: str, op: str) -> bool:
    """Whether a commit title names the operator: as a word, or for a wordy one
    (`_WORDY_OPERATORS`) only as code: `max`, torch.max, aten.max.default, max(, max_."""
    if op not in _WORDY_OPERATORS:
        return _mentions(title, op)
    word = re.escape(op)
    return re.search(rf"`{word}_?`|(?<=\.){word}_?(?![\w-])|(?<![\w.-]){word}(?:\(|_(?![\w-]))",
                     title.lower()) is not None


def operators_in_diff(changed_lines: str, operators: Iterable[str]) -> tuple[str, ...]:
    """The operators that a commit's added or removed lines name as a word (`_` parts a word,
    as in a path: at::cumsum_out names cumsum), leaving out the wordy ones (a diff has `max`,
    `index` and `copy` in code of every kind)."""
    return tuple(op for op in operators
                 if op not in _WORDY_OPERATORS and _mentions(changed_lines, op))


def score(commit: Commit, clues: Clues) -> Suspect:
    """How strongly the clues point at one commit, with the reasons in words."""
    points = 0
    reasons: list[str] = []
    title, files = commit.title.lower(), commit.files
    for op in clues.operators:
        if _title_names(title, op):
            points, reasons = points + 5, [*reasons, f"title mentions `{op}`"]
        hits = [f for f in files if _mentions(f, op)]  # `exp` is not in torch/export/
        if hits:
            points, reasons = points + 3, [*reasons, f"touches {hits[0]}"]
        elif op in commit.diff_operators:  # its code, in a file not named after it
            points, reasons = points + 2, [*reasons, f"its diff touches `{op}`"]
    if clues.subsystem:
        under = [f for f in files if f.startswith(SUBSYSTEM_PATHS.get(clues.subsystem, ()))]
        if under:
            points, reasons = points + 2, [*reasons, f"{clues.subsystem} files ({len(under)})"]
        if any(_mentions(title, w) or f"[{w}]" in title
               for w in SUBSYSTEM_WORDS.get(clues.subsystem, ())):
            points, reasons = points + 1, [*reasons, f"{clues.subsystem} in the title"]
    if clues.bisector_subsystem:
        paths = BISECTOR_PATHS.get(clues.bisector_subsystem, ())
        if any(f.startswith(paths) for f in files):
            points, reasons = points + 3, [*reasons, f"touches {clues.bisector_subsystem}"]
    if clues.precision and any(_mentions(title, w) for w in PRECISION_WORDS):
        points, reasons = points + 2, [*reasons, "precision words in the title"]
    if files and all(_TEST_OR_DOC.match(f) for f in files):
        points, reasons = points - 2, [*reasons, "tests/docs only"]
    return Suspect(commit, points, tuple(reasons))


# git revert's message, which pytorchmergebot's reverts keep: `Revert "<title>"`, then
# "This reverts commit <sha>." in the body.
REVERTS_COMMIT = re.compile(r"^This reverts commit ([0-9a-f]{7,40})\b", re.MULTILINE)


def reverted_sha(message: str) -> str:
    found = REVERTS_COMMIT.search(message)
    return found[1] if found else ""


def undone_pairs(commits: Sequence[Commit]) -> dict[str, str]:
    """Commits that a later commit of the same window reverts, and those reverts: sha -> the
    sha of the other of the pair. Neither changes the bad end, so neither caused what it
    shows; a revert of a revert that a pair already took (a reland) stays a suspect."""
    paired: dict[str, str] = {}
    for index, commit in enumerate(commits):
        target = next((earlier for earlier in reversed(commits[:index])
                       if earlier.sha not in paired and (
                           (commit.reverts and earlier.sha.startswith(commit.reverts))
                           or commit.title == f'Revert "{earlier.title}"')), None)
        if target is not None:
            paired[target.sha], paired[commit.sha] = commit.sha, target.sha
    return paired


def rank(commits: Iterable[Commit], clues: Clues, top: int = 5) -> tuple[Suspect, ...]:
    """The `top` commits with a positive score, best first (ties: newest first); a commit
    reverted within the window, and its revert, are not ranked."""
    return ranking(commits, clues, top)[0]


def ranking(commits: Iterable[Commit], clues: Clues,
            top: int = 5) -> tuple[tuple[Suspect, ...], int]:
    """`rank`'s suspects, and how many commits left out score as much as the last of them:
    a cut inside a tie shows some of equally likely commits, which the reader must be told."""
    window = tuple(commits)
    undone = undone_pairs(window)
    scored = [score(c, clues) for c in window if c.sha not in undone]
    ordered = sorted(enumerate(scored), key=lambda pair: (-pair[1].score, -pair[0]))
    positive = [s for _, s in ordered if s.score > 0]
    shown = tuple(positive[:top])
    return shown, sum(s.score == shown[-1].score for s in positive[top:]) if shown else 0


def tie_line(tied: int) -> str:
    """The line under the suspects when the cut fell inside a tie."""
    return (f"_{tied} more commit{'s' if tied > 1 else ''} of the window score as much as the "
            "last one shown, so may be as likely: the compare link lists them._")


@dataclass(frozen=True)
class CommitRange:
    """Both ends of the regression as commits, on main when known, else on the nightly branch."""

    good_nightly: str | None
    bad_nightly: str | None
    good_main: str | None = None
    bad_main: str | None = None
    commits: tuple[Commit, ...] = ()
    suspects: tuple[Suspect, ...] = ()
    note: str = ""
    tied: int = 0  # commits not shown that score as much as the last suspect shown
    # Looking for the fix: the ends are the last failing and first fixed nightlies, and the
    # ranked commits are candidates for the fix.
    find_fix: bool = False

    @property
    def url(self) -> str | None:
        if self.good_main and self.bad_main:
            return compare_url(self.good_main, self.bad_main)
        if self.good_nightly and self.bad_nightly:
            return compare_url(self.good_nightly, self.bad_nightly)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "good_nightly": self.good_nightly, "bad_nightly": self.bad_nightly,
            "good_main": self.good_main, "bad_main": self.bad_main, "compare_url": self.url,
            "commit_count": len(self.commits), "note": self.note, "find_fix": self.find_fix,
            "tied": self.tied,
            "suspects": [{"sha": s.commit.sha, "title": s.commit.title, "url": s.commit.url,
                          "author": s.commit.author, "score": s.score,
                          "reasons": list(s.reasons)} for s in self.suspects],
        }


def _sha(sha: str | None) -> str:
    return f"[`{sha[:10]}`]({commit_url(sha)})" if sha else "unknown"


def table_text(text: str, limit: int = 120) -> str:
    """A commit title or reason in one table cell, as the reports show it: one line, no `|`,
    no @-mention."""
    return text.replace("|", "\\|").replace("\n", " ").replace("@", "@\u200d")[:limit]


def render_range_markdown(commits: CommitRange) -> str:
    """The report's commit section: both ends, the compare link and the top suspects."""
    lines = ["### Commits", ""]
    on_main = bool(commits.good_main and commits.bad_main)
    good = commits.good_main if on_main else commits.good_nightly
    bad = commits.bad_main if on_main else commits.bad_nightly
    branch = "main" if on_main else "nightly branch"
    ends = ("last bad", "first good") if commits.find_fix else ("last good", "first bad")
    lines.append(f"- {ends[0]}: {_sha(good)}, {ends[1]}: {_sha(bad)} ({branch})")
    if commits.url:
        many = len(commits.commits)
        count = f" ({many} commit{'s' if many != 1 else ''})" if many else ""
        lines.append(f"- compare: {commits.url}{count}")
    if commits.note:
        lines.append(f"- _{table_text(commits.note, 300)}_")  # may hold two notes
    if commits.suspects:
        kind = "fix candidate" if commits.find_fix else "suspect"
        lines += ["", f"| {kind} | title | why |", "|---|---|---|"]
        lines += [f"| [`{s.commit.sha[:10]}`]({s.commit.url or commit_url(s.commit.sha)}) "
                  f"| {table_text(s.commit.title)} | {table_text('; '.join(s.reasons))} |"
                  for s in commits.suspects]
        if commits.tied:
            lines += ["", tie_line(commits.tied)]
    return "\n".join(lines)


def clues_from(operators: Sequence[str], subsystem: str | None, precision: bool | None,
               bisector_subsystem: str | None) -> Clues:
    return Clues(tuple(operators), subsystem, bool(precision), bisector_subsystem)
