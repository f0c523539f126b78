"""Triage conclusions from variant runs: precision, the backend ladder, compiler_bisector."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

import bot.core.suspects
import bot.core.triage
from bot.core.bisection import Bisection
from bot.core.bisector_result import BisectorFinding, parse_bisector_output
from bot.core.builds import Build, WheelLink
from bot.core.results import BisectResult, ProbeRecord
from bot.core.triage import (
    LADDER,
    STEERED_MARK,
    Triage,
    Variant,
    conclude,
    ladder_passed,
    render_triage_markdown,
    render_triage_terminal,
    triage_target,
    variant_env,
)
from bot.core.verdicts import RunResult, Stage, Verdict

MISMATCH = "AssertionError: Tensor-likes are not close!"
WORD = {"G": Verdict.GOOD, "B": Verdict.BAD, "S": Verdict.SKIP}
ORDER = (Variant.BASELINE, Variant.EMULATE_PRECISION, *LADDER)


def records(pattern: str, bisector_output: str | None = None) -> list[ProbeRecord]:
    """`pattern`: one letter per variant in ORDER (baseline, precision, no-compile ... inductor);
    `.` leaves the variant out."""
    made = [ProbeRecord(index=3, version="v", verdict=WORD[letter], reason=letter,
                        seconds=0.0, variant_env=variant_env(variant))
            for variant, letter in zip(ORDER, pattern, strict=True) if letter != "."]
    if bisector_output is not None:
        made.append(ProbeRecord(index=3, version="v", verdict=Verdict.GOOD, reason="",
                                seconds=1.0, variant_env=variant_env(Variant.BISECTOR),
                                result=RunResult(Stage.RUN, exit_code=0,
                                                 output=bisector_output)))
    return made


#  pattern: baseline, precision, no-compile, eager, aot_eager, decomp, inductor
@pytest.mark.parametrize(("pattern", "kinds", "subsystem", "labels"), [
    ("BGGGGGB", ["precision", "subsystem"], "Inductor", ["module: inductor", "oncall: pt2"]),
    ("BBGGGGB", ["not-precision", "subsystem"], "Inductor",
     ["module: inductor", "oncall: pt2", "module: correctness (silent)"]),
    ("BBGGGBB", ["not-precision", "subsystem"], "decompositions",
     ["module: decompositions", "oncall: pt2", "module: correctness (silent)"]),
    ("BBGGBBB", ["not-precision", "subsystem"], "AOTAutograd",
     ["module: aotdispatch", "oncall: pt2", "module: correctness (silent)"]),
    ("BBGBBBB", ["not-precision", "subsystem"], "Dynamo",
     ["module: dynamo", "oncall: pt2", "module: correctness (silent)"]),
    ("BBBBBBB", ["not-compiler"], None, []),
    ("BGBBBBB", ["not-compiler"], None, []),  # eager fails too: emulation cannot be the answer
    ("BGGGGGG", ["precision", "inconclusive"], None, ["module: inductor", "oncall: pt2"]),
    ("BG.....", ["precision"], None, ["module: inductor", "oncall: pt2"]),
    ("BS.....", [], None, []),
    ("B.GGGGB", ["subsystem"], "Inductor", ["module: inductor", "oncall: pt2"]),
    ("GGGGGGG", ["passes"], None, []),
    ("SGGGGGB", ["untestable"], None, []),  # could not be tested: not "does not fail"
])
def test_conclusions(pattern: str, kinds: list[str], subsystem: str | None,
                     labels: list[str]) -> None:
    triage = conclude("v", records(pattern), MISMATCH)
    assert [f.kind for f in triage.findings] == kinds
    assert triage.subsystem == subsystem
    assert list(triage.labels) == labels


@pytest.mark.parametrize(("pattern", "words"), [
    ("BBGGGBB", "fails from aot_eager_decomp_partition on: decompositions"),
    ("BBGGGGB", "fails only with inductor (the eager, aot_eager and aot_eager_decomp_partition backends pass): Inductor"),
    ("BGGGGGB", "precision difference: the mismatch disappears"),
    ("BBBBBBB", "not a compiler bug"),
    ("BBGGSBB", "untestable below it: aot_eager"),
    ("BBGGGBG", "inconsistent"),
    ("BGGBBBB", "made it pass, yet eager, which does not use Inductor, fails"),
])
def test_conclusions_in_words(pattern: str, words: str) -> None:
    assert words in " | ".join(f.text for f in conclude("v", records(pattern), MISMATCH).findings)


@pytest.mark.parametrize("signature", [
    "crash (SIGSEGV)", "timeout", "exit 3", "RuntimeError: compiled kernel failed", None,
    "AssertionError: expected size 2==4, stride 1==1 at dim=0",  # Inductor's assert_size_stride
    "RuntimeError: shape mismatch: value tensor of shape [4] cannot be broadcast"])
def test_only_a_numerical_mismatch_can_be_precision(signature: str | None) -> None:
    triage = conclude("v", records("BGGGGGB"), signature)
    assert triage.precision is None and "precision" not in [f.kind for f in triage.findings]


@pytest.mark.parametrize("signature", [
    MISMATCH, "metric > 0.1", "AssertionError", "AssertionError: max abs diff 0.5",
    "ValueError: Mismatched elements: 3 / 8",
    # torch.testing.assert_close(..., rtol=0, atol=0), as a bitwise check of bf16 reads
    # (seen on torch 2.13: TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 makes it pass)
    "AssertionError: Tensor-likes are not equal!", "AssertionError: Scalars are not equal!"])
def test_a_value_mismatch_or_a_metric_can_be_precision(signature: str) -> None:
    assert conclude("v", records("BGGGGGB"), signature).precision is True


def _bare_assert(line: str) -> list[ProbeRecord]:
    """A triage whose baseline fails with a bare AssertionError on `line`; the runs with
    eager's rounding emulated fail too (so a numerical failure is called "not rounding")."""
    made = records("BBGBBBB")
    output = ('Traceback (most recent call last):\n  File "/tmp/repro.py", line 9, in <module>\n'
              f"    {line}\n{'    ' + '^' * len(line)}\nAssertionError\n")
    made[0] = replace(made[0], result=RunResult(Stage.RUN, exit_code=1, output=output))
    return made


@pytest.mark.parametrize(("line", "numeric"), [
    ("assert len(graphs) == 1", False),  # counts graphs: a Dynamo check, not a value
    ("assert out.shape == ref.shape", False),
    ("assert torch.allclose(out, ref, atol=1e-4)", True),
    ("assert (out - ref).abs().max() < 1e-3", True),
    ("assert torch.equal(out, ref)", True),
])
def test_a_bare_assertion_error_is_numerical_only_when_its_line_compares_values(
        line: str, numeric: bool) -> None:
    triage = conclude("v", _bare_assert(line), "AssertionError")
    assert (triage.precision is False) is numeric
    assert ("module: correctness (silent)" in triage.labels) is numeric
    assert ("not-precision" in [f.kind for f in triage.findings]) is numeric


@pytest.mark.parametrize("reason", [
    "different failure: ValueError: my_backend broke",
    "the output does not match --match 'not close'; different failure: ValueError: my_backend "
    "broke"])
def test_a_failure_no_forced_backend_shows_is_said_with_what_they_did(reason: str) -> None:
    made = records("BBGGGGS")
    made[-1] = ProbeRecord(index=3, version="v", verdict=Verdict.SKIP, seconds=0.0,
                           reason=reason,
                           variant_env=variant_env(Variant.INDUCTOR))
    [finding] = [f for f in conclude("v", made, MISMATCH).findings if f.kind == "inconclusive"]
    assert "no forced backend shows the failure" in finding.text
    assert "failing otherwise under inductor: ValueError: my_backend broke" in finding.text


# The output format of `python -m torch._inductor.compiler_bisector run <cmd>`: its last line is
# print(f"\nBisection complete: {result}") with `result` a BisectionResult dataclass, or
# "Bisection complete: no issue found" (torch/_inductor/compiler_bisector.py, torch 2.13).
@pytest.mark.parametrize(("output", "expected"), [
    ("Moving to the next system: inductor\nSetting config inductor field emulate_precision_casts "
     "to True fixed the issue\n\nBisection complete: BisectionResult(backend='inductor', "
     "subsystem='inductor_emulate_precision_casts', bisect_number=0, "
     "debug_info='inductor_emulate_precision_casts')\n",
     BisectorFinding("inductor", "inductor_emulate_precision_casts", 0,
                     "inductor_emulate_precision_casts")),
    ("Binary search completed for inductor - lowerings. The bisect number is 42.\n"
     "Bisection complete: BisectionResult(backend='inductor', subsystem='lowerings', "
     "bisect_number=42, debug_info='aten.cumsum.default')",
     BisectorFinding("inductor", "lowerings", 42, "aten.cumsum.default")),
    ("The issue is in the aot_eager system.\n\nBisection complete: "
     "BisectionResult(backend='aot_eager', subsystem=None, bisect_number=None, debug_info=None)",
     BisectorFinding("aot_eager")),
    ("All systems have been checked.\n\nBisection complete: no issue found\n",
     BisectorFinding(None)),
    ("Traceback (most recent call last):\nRuntimeError: boom\n", None),
    ("", None),
])
def test_parse_bisector_output(output: str, expected: BisectorFinding | None) -> None:
    assert parse_bisector_output(output) == expected


def test_bisector_finding_is_a_conclusion() -> None:
    output = ("Bisection complete: BisectionResult(backend='inductor', subsystem='lowerings', "
              "bisect_number=7, debug_info='aten.cumsum.default')")
    triage = conclude("v", records("BBGGGGB", output), MISMATCH)
    assert triage.bisector == BisectorFinding("inductor", "lowerings", 7, "aten.cumsum.default")
    assert triage.findings[-1].text == ("compiler_bisector names backend inductor, subsystem "
                                        "lowerings, application #7, (aten.cumsum.default)")



def bisector_config_output(backend: str, field: str, value: str) -> str:
    """What torch 2.13's compiler_bisector prints when setting a config (a ConfigChange in its
    BACKENDS) made the failure go away: process_subsystem's line, then do_bisect's
    BisectionResult(backend, name, 0, name)."""
    name = f"{backend}_{field}"
    return (f"The issue is in the {backend} system. Moving to the first subsystem: "
            f"BisectSubsystem(name='pre_grad_passes')\n"
            f"Setting config {backend} field {field} to {value} fixed the issue\n\n"
            f"Bisection complete: BisectionResult(backend='{backend}', subsystem='{name}', "
            f"bisect_number=0, debug_info='{name}')\n")


def test_random_numbers_of_inductor_are_no_silent_correctness_bug() -> None:
    """A reproducer comparing dropout's output of eager and compiled fails only under Inductor,
    emulated rounding does not help, and the bisector finds fallback_random: Inductor's RNG
    differs from eager's by design. The triage showed 'subsystem inductor_fallback_random'
    and suggested module: correctness (silent)."""
    output = bisector_config_output("inductor", "fallback_random", "True")
    triage = conclude("v", records("BBGGGGB", output), MISMATCH)
    assert triage.bisector == BisectorFinding("inductor", "inductor_fallback_random", 0,
                                              "inductor_fallback_random")
    assert "module: correctness (silent)" not in triage.labels
    assert triage.labels == ("module: inductor", "oncall: pt2")
    text = triage.findings[-1].text
    assert text.startswith("compiler_bisector: setting torch._inductor.config.fallback_random = "
                           "True made it pass (a config change, not a pass)")
    assert "Expected, not a bug" in text


def test_emulated_rounding_named_by_the_bisector_is_a_precision_difference() -> None:
    """Our emulation run still failed (say, flaky), but the bisector's own run with
    emulate_precision_casts passed: a precision difference, not silently wrong."""
    output = bisector_config_output("inductor", "emulate_precision_casts", "True")
    triage = conclude("v", records("BBGGGGB", output), MISMATCH)
    assert "module: correctness (silent)" not in triage.labels
    text = triage.findings[-1].text
    assert "emulate_precision_casts = True made it pass" in text
    assert "further from a float64 reference than eager is" in text


@pytest.mark.parametrize(("backend", "field", "value", "words"), [
    ("inductor", "layout_optimization", "False", "channels-last"),
    ("inductor", "comprehensive_padding", "False", "pads tensor strides"),
    ("aot_eager_decomp_partition", "cse", "False", "common-subexpression elimination"),
    ("inductor", "some_newer_switch", "True", "BACKENDS of torch/_inductor/compiler_bisector"),
])
def test_other_config_changes_are_explained_and_stay_bugs(backend: str, field: str, value: str,
                                                           words: str) -> None:
    output = bisector_config_output(backend, field, value)
    pattern = "BBGGGGB" if backend == "inductor" else "BBGGGBB"  # the first backend to fail
    triage = conclude("v", records(pattern, output), MISMATCH)
    text = triage.findings[-1].text
    assert "(a config change, not a pass)" in text and words in text
    assert f"subsystem {backend}_{field}" not in text
    assert "module: correctness (silent)" in triage.labels
    assert len(text) <= 400  # what the report's Markdown shows of a finding

def test_variant_env_names_the_variant_and_forces_the_backend() -> None:
    assert variant_env(Variant.EMULATE_PRECISION) == {
        "TBB_TRIAGE": "emulate-precision-casts", "TORCHINDUCTOR_EMULATE_PRECISION_CASTS": "1"}
    assert variant_env(Variant.NO_COMPILE)["TBB_FORCE_BACKEND"] == "none"
    assert variant_env(Variant.DECOMP)["TBB_FORCE_BACKEND"] == "aot_eager_decomp_partition"
    assert "TBB_FORCE_BACKEND" not in variant_env(Variant.BISECTOR)  # it uses its own variable
    # static shapes keep the reproducer's backend: only the shim's switch for shapes
    assert variant_env(Variant.STATIC_SHAPES) == {"TBB_TRIAGE": "static-shapes",
                                                  "TBB_STATIC_SHAPES": "1"}


@pytest.mark.parametrize(("pattern", "passed"), [
    ("BGGGGGB", ("eager", "aot_eager", "aot_eager_decomp_partition")),
    ("BGGGSBG", ("eager", "inductor")),  # skipped and failed runs are not passes
    ("BGG.G.B", ("aot_eager",)),  # no-compile passing is no backend of the bisector's
    ("BG.....", ()),
])
def test_ladder_passed_names_the_backends_the_bisector_need_not_run(
        pattern: str, passed: tuple[str, ...]) -> None:
    assert ladder_passed(records(pattern, "Bisection complete: no issue found")) == passed


def test_rendered_section() -> None:
    triage = conclude("2.13.0.dev20260521+cpu", records("BGGGGGB"), MISMATCH)
    text = render_triage_markdown(triage)
    assert text.startswith("### Triage of `2.13.0.dev20260521+cpu`\n\n- precision difference")
    assert "Suggested labels (not applied): `module: inductor`, `oncall: pt2`" in text
    assert "| aot_eager_decomp_partition | good | G |" in text
    assert "=> fails only with inductor (the eager, aot_eager and aot_eager_decomp_partition backends pass): Inductor" in render_triage_terminal(triage)


def result_with(status_pattern: str, fix: bool = False) -> BisectResult:
    builds = tuple(Build(f"2.13.0.dev202605{i + 10:02d}+cpu", None, "cpu",
                         WheelLink(f"torch-{i}.whl", f"http://x/torch-{i}.whl"))
                   for i in range(len(status_pattern)))
    bisection = Bisection(len(builds), 0, fix)
    probes = []
    for index, letter in enumerate(status_pattern):
        if letter != ".":
            bisection = bisection.record(index, WORD[letter])
            probes.append(ProbeRecord(index, builds[index].version, WORD[letter], "", 0.0))
    return BisectResult(builds, bisection, tuple(probes))


@pytest.mark.parametrize(("pattern", "fix", "expected"), [
    ("GGGBBB", False, 3),
    ("GG.GBB", False, 4),
    ("BBBGGG", True, 2),  # find-the-fix: the last failing build
    ("GGGGGG", False, None),  # not reproduced: nothing fails
])
def test_triage_target(pattern: str, fix: bool, expected: int | None) -> None:
    result = result_with(pattern, fix)
    assert result.outcome is not None
    assert triage_target(result) == expected


@pytest.mark.parametrize("module", [bot.core.triage, bot.core.suspects])
def test_core_modules_stay_pure(module: object) -> None:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not imported & {"os", "subprocess", "requests", "time", "socket", "github", "pathlib"}


def _with_output(made: list[ProbeRecord], output: str) -> list[ProbeRecord]:
    return [replace(r, result=RunResult(Stage.RUN, exit_code=1 if r.verdict is Verdict.BAD
                                        else 0, output=output)) for r in made]


def test_a_ladder_that_never_went_through_torch_compile_says_nothing() -> None:
    """A script that compiles with torch._dynamo.optimize runs the same on every rung: its
    failure with no compile is no proof that eager is at fault."""
    unsteered = conclude("v", _with_output(records("BBBBBBB"), "Traceback...\n"), MISMATCH)
    assert [f.kind for f in unsteered.findings] == ["unsteered"] and unsteered.labels == ()
    assert "torch._dynamo.optimize" in unsteered.findings[0].text
    steered = conclude("v", _with_output(records("BBBBBBB"), f"{STEERED_MARK}\n"), MISMATCH)
    assert [f.kind for f in steered.findings] == ["not-compiler"]
    # A script that names no compiler API at all is eager-only, however its runs went.
    eager_only = conclude("v", _with_output(records("BBBBBBB"), "Traceback...\n"), MISMATCH,
                          "import torch\nassert torch.ones(2).sum() == 3\n")
    assert [f.kind for f in eager_only.findings] == ["not-compiler"]
    optimized = conclude("v", _with_output(records("BBBBBBB"), "Traceback...\n"), MISMATCH,
                         "import torch\nf = torch._dynamo.optimize('inductor')(g)\n")
    assert [f.kind for f in optimized.findings] == ["unsteered"]


def test_the_shim_prints_the_mark_the_triage_reads() -> None:
    import importlib.util

    path = Path(bot.core.triage.__file__).parents[1] / "jobs" / "triage_shim" / "sitecustomize.py"
    tree = ast.parse(path.read_text())
    marks = [node.value.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and any(getattr(t, "id", "") == "USED_MARK" for t in node.targets)]
    assert marks == [STEERED_MARK]
    assert importlib.util.find_spec("bot.jobs.triage_shim") is not None


def test_a_triage_read_back_from_the_run_job_s_outcome_keeps_its_conclusions() -> None:
    """The report job ranks commits by the subsystem, the precision finding and the compiler
    bisector's pass; from_dict dropped all three, which to_dict writes."""
    from bot.core.triage import Finding, Triage
    triage = Triage("2.13.0.dev20260521+cu130", (Finding("subsystem", "fails with inductor"),),
                    ("module: inductor",), subsystem="Inductor", precision=True,
                    runs=(("inductor", "bad", "exit 1"),),
                    bisector=BisectorFinding("inductor", "lowerings", 3, "aten.cumsum"))
    assert Triage.from_dict(triage.to_dict()) == triage
    plain = Triage("2.13.0.dev20260521+cpu", (), ())
    assert Triage.from_dict(plain.to_dict()) == plain
    with pytest.raises(ValueError, match="bisector"):
        Triage.from_dict({**plain.to_dict(), "bisector": "lowerings"})


def test_a_reproducer_broken_in_eager_is_not_blamed_on_dynamo() -> None:
    """Seen on torch 2.13: a matmul of mismatched shapes fails in eager with RuntimeError and,
    compiled, under every backend with Dynamo's TorchRuntimeError (its fake tensors run the
    code first). The run without torch.compile failing otherwise is the answer, not Dynamo."""
    made = records("BBSBBBB")
    made[2] = replace(made[2], reason="different failure: RuntimeError: mat1 and mat2 shapes "
                      "cannot be multiplied (4x8 and 7x3)")
    triage = conclude("v", _with_output(made, f"{STEERED_MARK}\n"),
                      "torch._dynamo.exc.TorchRuntimeError: RuntimeError when making fake "
                      "tensor call")
    assert [f.kind for f in triage.findings] == ["not-compiler"]
    assert "mat1 and mat2 shapes cannot be multiplied" in triage.findings[0].text
    assert triage.labels == () and triage.subsystem is None


def test_a_failure_before_torch_compile_is_called_is_not_a_compiler_bug() -> None:
    """A script that compiles only with torch.compile, failing in its eager reference before
    the call: the same failure on every rung, none of which reached torch.compile."""
    script = "import torch\nref = f(x, w)\nout = torch.compile(f)(x, w)\n"
    triage = conclude("v", _with_output(records("BBBBBBB"), "Traceback...\n"),
                      "RuntimeError: mat1 and mat2 shapes cannot be multiplied", script)
    assert [f.kind for f in triage.findings] == ["not-compiler"]
    assert "before torch.compile is ever called" in triage.findings[0].text
    for other in ("torch._dynamo.optimize('inductor')(f)", "torch.export.export(m, (x,))",
                  "torch._inductor.aoti_compile_and_package(ep)"):
        unsteered = conclude("v", _with_output(records("BBBBBBB"), "Traceback...\n"),
                             MISMATCH, script + other + "\n")
        assert [f.kind for f in unsteered.findings] == ["unsteered"]


@pytest.mark.parametrize(("relative", "kind", "silent"), [
    ("4.392621121951379e-06", "float32-sized", False), ("0.25", "not-precision", True)])
def test_a_float32_sized_difference_is_not_called_silently_wrong(relative: str, kind: str,
                                                                  silent: bool) -> None:
    """Seen on torch 2.13 (CPU): a float32 sum of 4099 terms, checked with rtol=1e-7, differs
    by 4.4e-06 under Inductor, with or without emulated casts: summation order, not a wrong
    result."""
    made = records("BBGGGGB")
    output = ("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 56 / 64\n"
              "Greatest absolute difference: 5.7e-05 at index (3,) (up to 1e-07 allowed)\n"
              f"Greatest relative difference: {relative} at index (20,) (up to 1e-07 allowed)\n")
    made[0] = replace(made[0], result=RunResult(Stage.RUN, exit_code=1, output=output))
    triage = conclude("v", made, MISMATCH)
    assert [f.kind for f in triage.findings] == [kind, "subsystem"]
    assert ("module: correctness (silent)" in triage.labels) is silent


def test_an_unfinished_bisector_says_how_far_it_got() -> None:
    """torch 2.13's compiler_bisector, killed by --bisector-timeout, had printed its progress;
    the triage said nothing of it (the runs table read only 'timed out after 25 s: no
    result')."""
    output = ("Starting bisection process with system: eager\nMoving to the next system: "
              "aot_eager\nThe issue is in the aot_eager_decomp_partition system. Moving to the "
              "first subsystem: ConfigChange(name='aot_eager_decomp_partition_cse')\n"
              "Disabling aot_eager_decomp_partition_cse did not fix the issue.\n"
              "Disabling decomposition fixed the issue.\nStarting bisect by getting upper "
              "bound.\nBisecting aot_eager_decomp_partition - decomposition (Range: [0, 40], "
              "Midpoint: 20)\n")
    made = records("BBGGGBB")
    made.append(ProbeRecord(index=3, version="v", verdict=Verdict.SKIP,
                            reason="timed out after 25 s: no result", seconds=25.0,
                            variant_env=variant_env(Variant.BISECTOR),
                            result=RunResult(Stage.RUN, timed_out=True, output=output)))
    triage = conclude("v", made, MISMATCH)
    assert triage.bisector is None
    assert triage.findings[-1].text == (
        "compiler_bisector did not finish (timed out after 25 s: no result); it had found: "
        "The issue is in the aot_eager_decomp_partition system; Disabling decomposition fixed "
        "the issue; Bisecting aot_eager_decomp_partition - decomposition (Range: [0, 40], "
        "Midpoint: 20)")


def _with_static(pattern: str, static: str, output: str | None = None) -> list[ProbeRecord]:
    """`records(pattern)` and a run with static shapes whose verdict is `static` (G, B, S),
    with `output` as its run's output when given."""
    run = None if output is None else RunResult(Stage.RUN, exit_code=0, output=output)
    return [*records(pattern), ProbeRecord(index=3, version="v", verdict=WORD[static],
                                           reason=static, seconds=0.0, result=run,
                                           variant_env=variant_env(Variant.STATIC_SHAPES))]


def test_a_failure_that_passes_with_static_shapes_needs_dynamic_shapes() -> None:
    """The label PyTorch's triagers give such failures: the triage never suggested it."""
    triage = conclude("v", _with_static("BBGGGGB", "G", f"{STEERED_MARK}\n"), MISMATCH)
    assert [f.kind for f in triage.findings] == ["not-precision", "subsystem", "dynamic-shapes"]
    assert ("passes with static shapes (torch.compile(dynamic=False), automatic_dynamic_shapes "
            "off): the failure needs dynamic shapes") in triage.findings[2].text
    assert list(triage.labels) == ["module: inductor", "oncall: pt2", "module: dynamic shapes",
                                   "module: correctness (silent)"]
    assert ("static-shapes", "good", "G") in triage.runs
    assert "| static-shapes | good | G |" in render_triage_markdown(triage)
    assert Triage.from_dict(triage.to_dict()) == triage


@pytest.mark.parametrize(("pattern", "static", "output"), [
    ("BBGGGGB", "B", None),  # fails with static shapes too: shapes are not it
    ("BBGGGGB", "S", None),  # could not be tested: says nothing
    ("BBBBBBB", "G", None),  # fails without torch.compile: no compiler's failure
    ("BBGGGGB", "G", "compiled matches eager\n"),  # never went through torch.compile: a flake
])
def test_static_shapes_say_nothing_unless_they_alone_make_it_pass(
        pattern: str, static: str, output: str | None) -> None:
    triage = conclude("v", _with_static(pattern, static, output), MISMATCH)
    assert "dynamic-shapes" not in [f.kind for f in triage.findings]
    assert "module: dynamic shapes" not in triage.labels


def test_an_old_triage_without_the_static_shapes_run_reads_back() -> None:
    old = {"version": "v", "findings": [{"kind": "subsystem", "text": "fails with inductor"}],
           "labels": ["module: inductor"], "subsystem": "Inductor", "precision": None,
           "runs": [{"variant": "inductor", "verdict": "bad", "reason": "exit 1"}],
           "bisector": None}
    assert Triage.from_dict(old).to_dict() == old
