"""Probing for sweeps: suite files, the history as the engine's memo, metrics, GPU detection."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from bot.adapters.history import History
from bot.core.errors import UserError
from bot.core.report import bisect_flags
from bot.core.results import ProbeRecord
from bot.core.suite import Case, imported_modules, imports_torch, parse_case
from bot.core.verdicts import Policy, Stage, Verdict
from bot.jobs.engine import ProbeOptions

# A case with `metric = "max_abs_diff"` prints `METRIC max_abs_diff=0.0123`; the last one counts.
METRIC_LINE = (r"^METRIC\s+{name}\s*=\s*"
               r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\s*$")


def load_suite(root: Path) -> tuple[list[Case], list[str]]:
    """Every `*.py` under `root` (not `_*.py`), as cases named by their path under `root`
    (`suite/name`; a file directly in `root` takes `root`'s name as its suite); and the errors
    found."""
    if not root.is_dir():
        raise UserError(f"{root}: not a folder of reproducers")
    cases, errors = [], []
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith("_"):
            continue
        case_id = _case_id(path, root)
        try:
            case = parse_case(path.read_text(encoding="utf-8"), str(path), case_id)
            if not imports_torch(case.text):
                raise UserError(f"{path}:1: the script never imports torch: a case is a "
                                "reproducer, run as `python case.py`")
            local = _suite_modules(case.text, path.parent, root)
            if local:
                raise UserError(f"{path}:1: it imports {', '.join(local)} of the suite's own "
                                "files: a case runs alone (its file is copied to an empty "
                                "folder, and a name not found there is installed from the "
                                "package index), so put what it uses into it")
            cases.append(case)
        except UserError as exc:
            errors.append(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{path}:1: cannot read: {exc}")
    ids = [case.case_id for case in cases]
    errors += [f"{c.path}:1: case id {c.case_id} is used twice" for c in cases
               if ids.count(c.case_id) > 1]
    errors += [f"{c.path}:1: renamed_from names {old}, a case of the suite: a case renamed "
               "from it takes its issues, so it must be gone" for c in cases
               for old in c.meta.renamed_from if old in ids]
    return cases, errors


def suite_files(root: Path) -> dict[str, str]:
    """Case id -> sha256 of the text of every file `load_suite` reads as a case, valid or not
    (an invalid one is still the suite's: it is only left out until it is mended)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith("_"):
            continue
        try:  # as Case.script_hash
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        found[_case_id(path, root)] = hashlib.sha256(text.encode()).hexdigest()
    return found


def _case_id(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return "/".join(parts if len(parts) > 1 else (root.resolve().name, *parts))


def _suite_modules(text: str, *folders: Path) -> list[str]:
    """What the script imports from files beside it (a `_common.py`, a package folder), or
    relatively: none of it is there when the case runs."""
    found = []
    for name in sorted(imported_modules(text)):
        if name == ".":
            found.append("a module relatively (from . import ...)")
        elif any((folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()
                 for folder in folders):
            found.append(f"`{name}`")
    return found


def probe_options(case: Case) -> ProbeOptions:
    """The case's metadata as the core's judging policy: its metric line becomes the regex."""
    meta = case.meta
    metric = METRIC_LINE.format(name=re.escape(meta.metric)) if meta.metric else None
    # A stored case ran on the nightlies it passed: a torch API gone from a build is the
    # regression, not a build too old for the script (a sweep never steps back past its window).
    policy = Policy(on_timeout=meta.hang, match=meta.match, metric=metric,
                    threshold=meta.threshold, missing_api=Verdict.BAD)
    return ProbeOptions(timeout_s=meta.timeout, repeat=meta.repeat, policy=policy,
                        env=dict(meta.env), processes=meta.nproc_per_node)


def rerun_flags(case: Case, python: str, no_default_packages: bool = False) -> list[str]:
    """The `bisect-bot bisect` flags that judge a case's runs as the sweep does: its options,
    as a bisection records them, through the report's one reading of them."""
    meta, policy = case.meta, probe_options(case).policy
    return bisect_flags({
        "python": python, "timeout": meta.timeout, "repeat": meta.repeat, "match": meta.match,
        "metric": policy.metric, "threshold": meta.threshold, "on_timeout": meta.hang.value,
        "missing_api": policy.missing_api.value, "processes": meta.nproc_per_node,
        "env": dict(meta.env), "no_default_packages": no_default_packages})


@dataclass
class HistoryMemo:
    """The engine's memo for one case: keyed by (sha256 of the script, build, options)."""

    history: History
    case: Case
    options_hash: str
    sweep_id: str | None = None
    computed: int = 0  # probes that really ran the reproducer
    reused: int = 0  # probes answered from the history
    uninstalled: int = 0  # probes whose build did not install or import: nothing ran

    def get(self, build_version: str) -> ProbeRecord | None:
        known = self.history.lookup(self.case.script_hash, build_version, self.options_hash)
        self.reused += known is not None
        if known is not None:  # perhaps another case's, with the same text: this one's too
            self.history.claim(self.case.case_id, self.case.script_hash, build_version,
                               self.options_hash, self.sweep_id)
        return known

    def put(self, record: ProbeRecord) -> None:
        self.count(record)
        self.store(record)

    def count(self, record: ProbeRecord) -> None:
        """A probe made: counted when it ran, whether or not it is ever stored (a run held
        back until its bisection ends is not, when the sweep stops first)."""
        if record.stopped_at(Stage.INSTALL, Stage.IMPORT):
            self.uninstalled += 1
        else:
            self.computed += 1

    def store(self, record: ProbeRecord) -> None:
        """Keeps a run counted already (`count`) as the memo's."""
        self.history.store(self.case.case_id, self.case.script_hash, self.options_hash, record,
                           self.sweep_id)
