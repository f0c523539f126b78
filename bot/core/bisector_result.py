"""What torch's compiler_bisector printed, and what a config-change result of it means."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class BisectorFinding:
    """What `python -m torch._inductor.compiler_bisector run` printed as its result."""

    backend: str | None  # None: "no issue found"
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None


# torch/_inductor/compiler_bisector.py, command_line_usage(), the `run` command, prints
#   print(f"\nBisection complete: {result}")       result: the BisectionResult dataclass, or
#   print("\nBisection complete: no issue found")
# and BisectionResult's fields are backend, subsystem, bisect_number, debug_info (its repr).
_COMPLETE = re.compile(r"^Bisection complete: (?P<rest>.*)$", re.MULTILINE)
_RESULT = re.compile(
    r"BisectionResult\(backend='(?P<backend>[^']*)'"
    r"(?:, subsystem=(?:'(?P<subsystem>[^']*)'|None))?"
    r"(?:, bisect_number=(?P<number>\d+|None))?"
    r"(?:, debug_info=(?P<debug>.*))?\)\s*$"
)


def parse_bisector_output(output: str) -> BisectorFinding | None:
    """The bisector's result from its output; None when it never finished."""
    found = list(_COMPLETE.finditer(output))
    if not found:
        return None
    rest = found[-1]["rest"].strip()
    if rest.startswith("no issue found"):
        return BisectorFinding(backend=None)
    match = _RESULT.match(rest)
    if match is None:
        return None
    number = match["number"]
    debug = match["debug"]
    if debug is not None:
        debug = None if debug == "None" else debug.strip("'\"")
    return BisectorFinding(
        backend=match["backend"], subsystem=match["subsystem"],
        bisect_number=int(number) if number and number != "None" else None, debug_info=debug,
    )


# compiler_bisector's progress lines (torch 2.13, do_bisect and process_subsystem), the last
# of which says how far it got when it never finished (a timeout).
_PROGRESS = re.compile(r"^(?:The issue is in the \S+ system\.|Disabling \S+ fixed the issue\."
                       r"|Setting config .* fixed the issue|Bisecting .*\(Range: .*\))",
                       re.MULTILINE)


def bisector_progress(output: str) -> str | None:
    """How far an unfinished compiler_bisector got, in its own words; None if nowhere."""
    found = [m[0].rstrip(".") for m in _PROGRESS.finditer(output)]
    return "; ".join(dict.fromkeys(found[:1] + found[-2:]))[:300] if found else None


@dataclass(frozen=True)
class ConfigChange:
    """A compiler_bisector result that is a config setting which made the failure go away,
    rather than one application of a pass, in words a triager can act on."""

    setting: str  # the config and the value that made it pass
    meaning: str
    expected: bool  # True: the difference alone is no bug, so no `module: correctness (silent)`


# torch/_inductor/compiler_bisector.py (torch 2.13), BACKENDS: its ConfigChange entries, named
# f"{config_name}_{config_field}"; the backend applies the value (torch.compile's Inductor
# options, or functorch_config.patch in aot_eager_decomp_partition).
CONFIG_CHANGES: dict[str, ConfigChange] = {
    "inductor_fallback_random": ConfigChange(
        "torch._inductor.config.fallback_random = True",
        "Inductor generates random numbers its own way, so rand, randn, dropout and the like "
        "differ from eager's even with the same seed. Expected, not a bug: compare random "
        "results with fallback_random=True, or compare statistics, not values",
        expected=True),
    "inductor_emulate_precision_casts": ConfigChange(
        "torch._inductor.config.emulate_precision_casts = True",
        "Inductor skips eager's intermediate casts to bf16/fp16, so it rounds otherwise. A "
        "precision difference, expected in low precision; a bug only when compiled is further "
        "from a float64 reference than eager is",
        expected=True),
    "inductor_layout_optimization": ConfigChange(
        "torch._inductor.config.layout_optimization = False",
        "Inductor's switch of convolutions to channels-last is involved. A wrong value is an "
        "Inductor bug; a check of strides or memory format may only see the changed layout",
        expected=False),
    "inductor_comprehensive_padding": ConfigChange(
        "torch._inductor.config.comprehensive_padding = False",
        "Inductor pads tensor strides for aligned memory access. A wrong value is an Inductor "
        "bug (code assuming unpadded strides); a check of strides, or code reading the storage "
        "directly, may only see the padding",
        expected=False),
    "aot_eager_decomp_partition_cse": ConfigChange(
        "torch._functorch.config.cse = False",
        "AOTAutograd's common-subexpression elimination, run on the joint graph before "
        "partitioning, merged computations that had to stay apart. Likely an AOTAutograd bug",
        expected=False),
}


def config_change(finding: BisectorFinding) -> ConfigChange | None:
    """The config change a bisector result names, or None when it names a pass. For a
    ConfigChange, do_bisect returns BisectionResult(backend, name, 0, name): no application
    number, and the name again as its debug info. A change this table lacks (a newer torch)
    is still told apart from a pass, in the bisector's own words."""
    name = finding.subsystem
    if name is None or finding.bisect_number != 0 or finding.debug_info != name:
        return None
    return CONFIG_CHANGES.get(name) or ConfigChange(
        name, "its value and meaning are in BACKENDS of torch/_inductor/compiler_bisector.py",
        expected=False)
