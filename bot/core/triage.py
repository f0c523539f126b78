"""Triage of one failing build: variant runs -> why it broke (precision, subsystem, pass)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from bot.core.bisection import Status
from bot.core.bisector_result import (
    BisectorFinding,
    bisector_progress,
    config_change,
    parse_bisector_output,
)
from bot.core.results import BisectResult, ProbeRecord
from bot.core.safe_markdown import cell, code_span, plain
from bot.core.verdicts import Verdict, failed_otherwise

VARIANT_VAR = "TBB_TRIAGE"  # names the variant in each triage record's variant_env
FORCE_BACKEND_VAR = "TBB_FORCE_BACKEND"  # read by the shim (bot/jobs/triage_shim)
NO_COMPILE = "none"  # forced "backend" under which torch.compile returns the function as is
# The backends whose ladder run passed, comma-separated, for the bisector's run only: the shim
# answers compiler_bisector's step for such a backend without running the reproducer again.
LADDER_PASSED_VAR = "TBB_LADDER_PASSED"
# torch/_inductor/config.py: emulate_precision_casts reads this variable at import time.
EMULATE_PRECISION_VAR = "TORCHINDUCTOR_EMULATE_PRECISION_CASTS"
# Read by the shim: torch.compile gets dynamic=False and Dynamo's automatic dynamic shapes go
# off, so no compile, first or recompile, treats a size as symbolic.
STATIC_SHAPES_VAR = "TBB_STATIC_SHAPES"


class Variant(str, Enum):
    """One triage run; the value is the word used in JSON and in the report."""

    BASELINE = "baseline"
    EMULATE_PRECISION = "emulate-precision-casts"
    STATIC_SHAPES = "static-shapes"
    NO_COMPILE = "no-compile"
    EAGER = "eager"
    AOT_EAGER = "aot_eager"
    DECOMP = "aot_eager_decomp_partition"
    INDUCTOR = "inductor"
    BISECTOR = "compiler-bisector"


# The backend ladder of torch/_dynamo/backends, each rung adding one subsystem; the first rung
# that fails names it. "no-compile" is rung zero: the reproducer without Dynamo.
LADDER = (Variant.NO_COMPILE, Variant.EAGER, Variant.AOT_EAGER, Variant.DECOMP, Variant.INDUCTOR)
SHIMMED = (Variant.STATIC_SHAPES, *LADDER, Variant.BISECTOR)  # need the shim on PYTHONPATH
DYNAMIC_SHAPES_LABELS = ("module: dynamic shapes", "oncall: pt2")

_SUBSYSTEM: dict[Variant, tuple[str, str, tuple[str, ...]]] = {
    Variant.EAGER: ("Dynamo", "Dynamo (graph capture)", ("module: dynamo", "oncall: pt2")),
    Variant.AOT_EAGER: ("AOTAutograd", "AOTAutograd / the dispatcher",
                        ("module: aotdispatch", "oncall: pt2")),
    Variant.DECOMP: ("decompositions", "decompositions / the partitioner",
                     ("module: decompositions", "oncall: pt2")),
    Variant.INDUCTOR: ("Inductor", "Inductor", ("module: inductor", "oncall: pt2")),
}


def variant_env(variant: Variant) -> dict[str, str]:
    """The variables a variant adds (the job adds PYTHONPATH for the shim)."""
    env = {VARIANT_VAR: variant.value}
    if variant is Variant.EMULATE_PRECISION:
        env[EMULATE_PRECISION_VAR] = "1"
    elif variant is Variant.STATIC_SHAPES:
        env[STATIC_SHAPES_VAR] = "1"  # the reproducer's own backend: nothing is forced
    elif variant is Variant.NO_COMPILE:
        env[FORCE_BACKEND_VAR] = NO_COMPILE
    elif variant in LADDER:
        env[FORCE_BACKEND_VAR] = variant.value
    return env


def ladder_passed(records: Sequence[ProbeRecord]) -> tuple[str, ...]:
    """The backends (torch.compile's names, as compiler_bisector's BACKENDS has them) whose run
    of the ladder passed. A GOOD run exited 0, which is all a step of the bisector asks, and
    it ran as that step would: the same reproducer and variables, the shim forcing the same
    backend, so running it again tells nothing new."""
    forced = (r.variant_env.get(FORCE_BACKEND_VAR) for r in records
              if variant_of(r) in LADDER and r.verdict is Verdict.GOOD)
    return tuple(dict.fromkeys(b for b in forced if b and b != NO_COMPILE))


def variant_of(record: ProbeRecord) -> Variant | None:
    value = record.variant_env.get(VARIANT_VAR)
    return Variant(value) if value in {v.value for v in Variant} else None


@dataclass(frozen=True)
class Finding:
    """One conclusion in words; `kind` is a stable key (precision, subsystem, not-compiler...)."""

    kind: str
    text: str


@dataclass(frozen=True)
class Triage:
    """The conclusions of a triage, the labels it suggests and the runs it rests on."""

    version: str
    findings: tuple[Finding, ...]
    labels: tuple[str, ...]  # suggestions only: the bot never applies them
    subsystem: str | None = None  # Dynamo, AOTAutograd, decompositions, Inductor
    precision: bool | None = None  # None: not tested or not a numerical failure
    runs: tuple[tuple[str, str, str], ...] = ()  # (variant, verdict, reason)
    bisector: BisectorFinding | None = None

    @classmethod
    def from_dict(cls, data: object) -> Triage:
        """The triage as `to_dict` wrote it (the run job's outcome.json, which the report job
        reads): ValueError for anything else."""
        def text(value: object) -> str:
            if not isinstance(value, str):
                raise ValueError(f"expected text, found {type(value).__name__}")
            return value

        def text_or_none(value: object) -> str | None:
            return None if value is None else text(value)

        if not isinstance(data, dict):
            raise ValueError("the triage is not an object")
        try:
            found = data.get("bisector")
            if found is not None and not isinstance(found, dict):
                raise ValueError("the compiler bisector's finding is not an object")
            number = found.get("bisect_number") if found else None
            precision = data.get("precision")
            return cls(
                version=text(data["version"]),
                findings=tuple(Finding(text(f["kind"]), text(f["text"]))
                               for f in data.get("findings") or ()),
                labels=tuple(text(label) for label in data.get("labels") or ()),
                subsystem=text_or_none(data.get("subsystem")),
                precision=precision if isinstance(precision, bool) else None,
                runs=tuple((text(r["variant"]), text(r["verdict"]), text(r["reason"]))
                           for r in data.get("runs") or ()),
                bisector=None if not found else BisectorFinding(
                    text_or_none(found.get("backend")), text_or_none(found.get("subsystem")),
                    number if isinstance(number, int) else None,
                    text_or_none(found.get("debug_info"))),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a damaged triage ({exc!r})") from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "findings": [{"kind": f.kind, "text": f.text} for f in self.findings],
            "labels": list(self.labels),
            "subsystem": self.subsystem,
            "precision": self.precision,
            "runs": [{"variant": v, "verdict": d, "reason": r} for v, d, r in self.runs],
            "bisector": None if self.bisector is None else vars(self.bisector),
        }


def triage_target(result: BisectResult) -> int | None:
    """The build to triage: the first bad one, else the newest failing one; None if none fails."""
    outcome = result.outcome
    if outcome is None:
        return None
    if outcome.status is Status.FOUND:
        return outcome.before if result.bisection.find_fix else outcome.after
    if outcome.status is Status.NOT_A_REGRESSION and not result.bisection.find_fix:
        failing = [p.index for p in result.probes
                   if p.verdict is Verdict.BAD and not p.variant_env]
        return max(failing) if failing else None
    return None


# The words of a value mismatch (torch.testing's "not close", or "not equal" when its tolerances
# are zero, allclose, a reproducer's own "max abs diff"), a metric above its threshold, or a
# bare `assert torch.allclose(...)`'s AssertionError. Not
# "shape/size mismatch" nor an assertion with a message of its own (Inductor's
# `assert_size_stride` is a crash that emulating eager's rounding may also make go away).
_NUMERIC = re.compile(r"not close|(?:Tensor-likes|Scalars) are not equal|Mismatched elements"
                      r"|Greatest (absolute|relative) difference"
                      r"|allclose|max abs diff|values? differ|^metric > ",
                      re.IGNORECASE)
# A bare AssertionError compares values when its assert line does (`assert torch.allclose(a, b)`,
# `assert (a - b).abs().max() < 1e-3`), not when it counts graphs or checks a shape.
_BARE_ASSERT = re.compile(r"AssertionError\s*")
_VALUE_CHECK = re.compile(r"allclose|isclose|assert_close|close|equal|diff|abs\(|\.max\(|\btol\b"
                          r"|atol|rtol|isnan|isinf|\bnan\b", re.IGNORECASE)


def _assert_line(output: str) -> str | None:
    """The source line of the last traceback's failing frame, as Python prints it (indented,
    after its `File "...", line N` line), or None when the output does not show it."""
    lines = output.splitlines()
    ends = [i for i, line in enumerate(lines) if _BARE_ASSERT.fullmatch(line.strip())]
    for i in range(ends[-1] - 1 if ends else -1, -1, -1):
        text = lines[i].strip()
        if not text or set(text) <= set("^~ "):
            continue  # Python 3.11+ underlines the failing expression
        return None if text.startswith("File ") else text
    return None


def _numeric(signature: str | None, output: str = "") -> bool:
    # Only a numerical mismatch can be rounding; a crash, an exception or a timeout cannot.
    if not signature:
        return False
    if _BARE_ASSERT.fullmatch(str(signature)):
        line = _assert_line(output)
        return line is None or _VALUE_CHECK.search(line) is not None
    return _NUMERIC.search(str(signature)) is not None


def _ladder_finding(verdicts: Mapping[Variant, Verdict],
                    reasons: Mapping[Variant, str] | None = None
                    ) -> tuple[Finding | None, Variant | None]:
    """The first rung of the backend ladder that fails, and what that says."""
    tried = [v for v in LADDER if v in verdicts]
    first_bad = next((v for v in tried if verdicts[v] is Verdict.BAD), None)
    if first_bad is None:
        failures = {v: failed_otherwise((reasons or {}).get(v, "")) for v in tried}
        otherwise = [f"{v.value}: {failure[:160]}" for v, failure in failures.items() if failure]
        if tried and all(verdicts[v] is not Verdict.BAD for v in tried) and (
                otherwise or all(verdicts[v] is Verdict.GOOD for v in tried)):
            text = ("no forced backend shows the failure: it depends on something forcing the "
                    "backend removes (mode=, options=, or a backend the reproducer names itself)")
            if otherwise:
                text += "; failing otherwise under " + "; ".join(otherwise)
            return Finding("inconclusive", text), None
        return None, None
    eager_error = (failed_otherwise((reasons or {}).get(Variant.NO_COMPILE, ""))
                   if verdicts.get(Variant.NO_COMPILE) is Verdict.SKIP else None)
    if eager_error:
        # Dynamo runs the code on fake tensors first, so a reproducer broken in eager (a shape
        # error) fails under every backend as a TorchRuntimeError: that names no compiler stage.
        return Finding("not-compiler", "fails without torch.compile too, with another error "
                       f"({eager_error[:160]}): the reproducer breaks in eager, and the compiled "
                       "runs likely meet the same fault in Dynamo's words; not a compiler bug "
                       "unless that error comes from torch.compile being absent"), None
    unsure = [v.value for v in tried[: tried.index(first_bad)] if verdicts[v] is not Verdict.GOOD]
    caveat = f" (untestable below it: {', '.join(unsure)})" if unsure else ""
    if first_bad is Variant.NO_COMPILE:
        return Finding("not-compiler", "fails without torch.compile too (eager only): not a "
                       f"compiler bug; look at the reproducer or the eager kernel{caveat}"), None
    name, words, _ = _SUBSYSTEM[first_bad]
    later = LADDER[LADDER.index(first_bad) + 1:]
    passes_later = [v.value for v in later if verdicts.get(v) is Verdict.GOOD]
    if first_bad is Variant.INDUCTOR:
        text = ("fails only with inductor (the eager, aot_eager and aot_eager_decomp_partition "
                f"backends pass): {words}{caveat}")
    else:
        text = f"fails from {first_bad.value} on: {words}{caveat}"
    if passes_later:
        text += f"; yet passes with {', '.join(passes_later)} (inconsistent, check by hand)"
    return Finding("subsystem", text), first_bad


# What the triage shim prints when a run calls its torch.compile (bot/jobs/triage_shim).
STEERED_MARK = "[torch-bisect-bot] the forced torch.compile was called"
_UNSTEERED = ("no run of the backend ladder called torch.compile, so forcing a backend "
              "changed nothing: the failure comes before any compile (then it is not a "
              "compiler bug), or the script compiles another way (torch._dynamo.optimize, "
              "torch.export), which the ladder cannot steer; it says nothing here")


def _never_steered(by_variant: Mapping[Variant, ProbeRecord]) -> bool:
    """Whether the ladder's runs are known (their output kept) and none went through the
    forced torch.compile."""
    runs = [by_variant[v] for v in LADDER if v in by_variant]
    outputs = [r.result.output for r in runs if r.result is not None]
    return bool(outputs) and len(outputs) == len(runs) and not any(
        STEERED_MARK in output for output in outputs)


# torch.testing.assert_close's report: "Greatest relative difference: 4.39e-06 at index (20,)".
_RELATIVE = re.compile(r"Greatest relative difference: (?P<value>[0-9.]+(?:e[-+]?\d+)?)")
# Far below what rounding to bf16 or fp16 leaves (2**-8, 2**-11), and what reordering a float32
# sum of thousands of terms can: a difference this small is no sign of a wrong result.
FLOAT32_SIZED = 1e-4


def _greatest_relative(output: str) -> float | None:
    found = _RELATIVE.findall(output)
    return float(found[-1]) if found else None


def _precision_finding(verdicts: Mapping[Variant, Verdict], signature: str | None,
                       first_bad: Variant | None, output: str = ""
                       ) -> tuple[Finding | None, bool | None]:
    emulated = verdicts.get(Variant.EMULATE_PRECISION)
    if emulated is None or not _numeric(signature, output) or verdicts.get(Variant.NO_COMPILE) is (
            Verdict.BAD):
        return None, None
    if emulated is Verdict.GOOD and first_bad not in (None, Variant.INDUCTOR):
        # The variable changes only Inductor, and a backend without Inductor fails already.
        return Finding("inconsistent", "emulating eager's rounding in Inductor "
                       f"({EMULATE_PRECISION_VAR}=1) made it pass, yet {first_bad.value}, "
                       "which does not use Inductor, fails: the runs disagree, so the failure "
                       "may be flaky (a bisection with more runs a build tells)"), None
    if emulated is Verdict.GOOD:
        return Finding("precision", "precision difference: the mismatch disappears when "
                       f"Inductor emulates eager's rounding ({EMULATE_PRECISION_VAR}=1), so "
                       "Inductor rounds otherwise than eager here. That alone is expected in "
                       "bf16/fp16; it is a bug when compiled is further from a float64 "
                       "reference than eager is"), True
    if emulated is Verdict.BAD and (relative := _greatest_relative(output)) is not None and (
            relative <= FLOAT32_SIZED):
        return Finding("float32-sized", "the failure persists when Inductor emulates eager's "
                       f"rounding ({EMULATE_PRECISION_VAR}=1), yet its greatest relative "
                       f"difference, {relative:.2g}, is the size of float32 rounding, which the "
                       "emulation does not cover (Inductor may sum in another order): compare "
                       "both with a float64 reference before calling it wrong"), None
    if emulated is Verdict.BAD:
        return Finding("not-precision", "not rounding: the failure persists when Inductor "
                       f"emulates eager's rounding ({EMULATE_PRECISION_VAR}=1)"), False
    return None, None


def _bisector_finding(finding: BisectorFinding | None,
                      unfinished: ProbeRecord | None = None) -> Finding | None:
    if finding is None and unfinished is not None and unfinished.result is not None:
        progress = bisector_progress(unfinished.result.output)
        return Finding("bisector", f"compiler_bisector did not finish ({unfinished.reason}); "
                       + (f"it had found: {progress}" if progress
                          else "it had found nothing yet"))
    if finding is None:
        return None
    if finding.backend is None:
        return Finding("bisector", "compiler_bisector found no failing backend")
    change = config_change(finding)
    if change is not None:
        return Finding("bisector", f"compiler_bisector: setting {change.setting} made it pass "
                       f"(a config change, not a pass): {change.meaning}")
    parts = [f"backend {finding.backend}"]
    if finding.subsystem:
        parts.append(f"subsystem {finding.subsystem}")
    if finding.bisect_number:
        parts.append(f"application #{finding.bisect_number}")
    if finding.debug_info and finding.debug_info != finding.subsystem:
        parts.append(f"({finding.debug_info[:200]})")
    return Finding("bisector", "compiler_bisector names " + ", ".join(parts))


def _static_shapes_finding(by_variant: Mapping[Variant, ProbeRecord],
                            ladder: Finding | None) -> Finding | None:
    """What the run with static shapes says: only its pass says anything (a failing baseline
    that passes with sizes fixed needs dynamic shapes); a failure there names nothing, as
    static shapes are not what the reproducer tests. Not when the failure is no compiler's,
    nor when the run never went through torch.compile (its pass is then chance, a flake)."""
    static = by_variant.get(Variant.STATIC_SHAPES)
    if static is None or static.verdict is not Verdict.GOOD:
        return None
    no_compile = by_variant.get(Variant.NO_COMPILE)
    if (no_compile is not None and no_compile.verdict is Verdict.BAD) or (
            ladder is not None and ladder.kind in ("not-compiler", "unsteered")):
        return None
    if static.result is not None and STEERED_MARK not in static.result.output:
        return None
    return Finding("dynamic-shapes", "passes with static shapes (torch.compile(dynamic=False), "
                   "automatic_dynamic_shapes off): the failure needs dynamic shapes")


# A script that may reach the compiler without torch.compile: the ladder cannot steer it.
_COMPILER = re.compile(r"\b(?:compile|_dynamo|_inductor|export|_export|aot_compile)\b")


# The ways to compile other than torch.compile, which the shim does not see being called.
_OTHER_ROUTE = re.compile(r"\boptimize\b|_dynamo\.export|\bexport\b|aot_compile|aoti_"
                          r"|compile_fx|_inductor\.compile\b")


def uses_the_compiler(script: str) -> bool:
    """Whether a script names the compiler at all (torch.compile, torch._dynamo.optimize,
    torch.export, ...): one that names none is eager-only, however its runs went."""
    return _COMPILER.search(script) is not None


def conclude(version: str, records: Sequence[ProbeRecord], signature: str | None,
             script: str | None = None) -> Triage:
    """Conclusions from the triage records of one build (the last record of a variant wins);
    `script`, the reproducer's text, tells an eager-only one from one the ladder cannot
    steer."""
    by_variant = {v: r for r in records if (v := variant_of(r)) is not None}
    verdicts = {v: r.verdict for v, r in by_variant.items()}
    runs = tuple((v.value, by_variant[v].verdict.value, by_variant[v].reason)
                 for v in Variant if v in by_variant)
    baseline = verdicts.get(Variant.BASELINE, Verdict.BAD)
    if baseline is Verdict.SKIP:
        text = (f"the reproducer could not be tested on this build "
                f"({by_variant[Variant.BASELINE].reason}): nothing to triage")
        return Triage(version, (Finding("untestable", text),), (), runs=runs)
    if baseline is not Verdict.BAD:
        text = "the reproducer does not fail on this build (good): nothing to triage"
        return Triage(version, (Finding("passes", text),), (), runs=runs)
    bisector_record = by_variant.get(Variant.BISECTOR)
    bisector = (parse_bisector_output(bisector_record.result.output)
                if bisector_record and bisector_record.result else None)
    ladder, first_bad = _ladder_finding(verdicts, {v: r.reason for v, r in by_variant.items()})
    if ladder is not None and _never_steered(by_variant) and (
            script is None or uses_the_compiler(script)):
        if script is not None and ladder.kind == "not-compiler" and not _OTHER_ROUTE.search(
                script):
            # It compiles only through torch.compile, which no run reached: the failure, the
            # same without torch.compile, comes before any compile.
            ladder = Finding("not-compiler", "fails before torch.compile is ever called, and "
                             "the same without it: not a compiler bug; look at the reproducer "
                             "or the eager kernel")
        else:
            # Forcing the backend goes through torch.compile: a script that compiles another
            # way (torch._dynamo.optimize, torch.export) ran the same on every rung.
            ladder, first_bad = Finding("unsteered", _UNSTEERED), None
    base = by_variant.get(Variant.BASELINE)
    output = base.result.output if base is not None and base.result is not None else ""
    precision, is_precision = (None, None) if ladder is not None and ladder.kind == (
        "not-compiler") else _precision_finding(verdicts, signature, first_bad, output)
    dynamic = _static_shapes_finding(by_variant, ladder)
    findings = [f for f in (precision, ladder, dynamic,
                            _bisector_finding(bisector, bisector_record)) if f is not None]
    labels: list[str] = []
    if first_bad is not None:
        labels += _SUBSYSTEM[first_bad][2]
    elif is_precision:
        labels += ("module: inductor", "oncall: pt2")
    if dynamic is not None:
        labels += DYNAMIC_SHAPES_LABELS
    change = config_change(bisector) if bisector is not None else None
    if is_precision is False and first_bad is not None and not (change and change.expected):
        # A wrong value that is not rounding, from a compiler stage: PyTorch's label for
        # results that are silently wrong; not when the bisector found Inductor's own random
        # numbers or rounding behind it, which differ from eager's by design.
        labels.append("module: correctness (silent)")
    return Triage(
        version=version, findings=tuple(findings), labels=tuple(dict.fromkeys(labels)),
        subsystem=_SUBSYSTEM[first_bad][0] if first_bad else None, precision=is_precision,
        runs=runs, bisector=bisector,
    )


def render_triage_markdown(triage: Triage) -> str:
    """The report's triage section: conclusions, suggested labels, the runs behind them.
    Every text is the runs' (a failure's message is the reproducer's to choose): made
    plain, so it pings, links and opens nothing."""
    lines = [f"### Triage of {code_span(triage.version)}", ""]
    lines += [f"- {plain(f.text[:400])}" for f in triage.findings] or ["- no conclusion"]
    if triage.labels:
        labels = ", ".join(code_span(label) for label in triage.labels)
        lines += ["", f"Suggested labels (not applied): {labels}"]
    lines += ["", "<details><summary>Triage runs</summary>", "",
              "| variant | verdict | reason |", "|---|---|---|"]
    lines += [f"| {cell(v)} | {cell(d)} | {cell(r, 90)} |" for v, d, r in triage.runs]
    lines += ["", "</details>"]
    return "\n".join(lines)


def render_triage_terminal(triage: Triage) -> str:
    lines = [f"Triage of {triage.version}:"]
    lines += [f"  {v:28} {d:5} {r[:70]}" for v, d, r in triage.runs]
    lines += [f"  => {f.text}" for f in triage.findings] or ["  => no conclusion"]
    if triage.labels:
        lines.append(f"  suggested labels (not applied): {', '.join(triage.labels)}")
    return "\n".join(lines)
