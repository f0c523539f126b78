"""The failure a run is judged by: which traceback, which words of it, what else it may be."""

from __future__ import annotations

import signal

import pytest

from bot.core.verdicts import (
    Policy,
    RunResult,
    Stage,
    Verdict,
    against_signature,
    judge,
    same_failure,
)

# Real output of Python 3.11 (paths shortened): the main thread's failure, then a thread's
# exception and a destructor's one at shutdown, neither of which decided the exit status 1.
AFTER_THE_MAIN_ONE = """Traceback (most recent call last):
  File "/tmp/tbb-run-x/repro.py", line 10, in <module>
    raise AssertionError("Tensor-likes are not close!")
AssertionError: Tensor-likes are not close!
Exception in thread Thread-1 (work):
Traceback (most recent call last):
  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner
    self.run()
  File "/tmp/tbb-run-x/repro.py", line 8, in work
    raise ValueError("worker gave up")
ValueError: worker gave up
Exception ignored in: <function Pool.__del__ at 0x7f13e5fb84a0>
Traceback (most recent call last):
  File "/tmp/tbb-run-x/repro.py", line 4, in __del__
RuntimeError: pool shut down twice
"""


def _failed(output: str, policy: Policy | None = None):
    return judge(RunResult(Stage.RUN, exit_code=1, output=output), policy or Policy())


def test_a_traceback_printed_beside_the_main_thread_s_is_not_the_failure():
    """A destructor's complaint at shutdown became the signature: an older build failing
    otherwise (an unrelated bug, a missing API) printed it too, and was judged the same
    failure, so the search named the wrong first bad nightly."""
    judged = _failed(AFTER_THE_MAIN_ONE)
    assert (judged.verdict, judged.signature) == (
        Verdict.BAD, "AssertionError: Tensor-likes are not close!")
    older = _failed(AFTER_THE_MAIN_ONE.replace(
        "AssertionError: Tensor-likes are not close!", "RuntimeError: an unrelated bug"))
    assert against_signature(older, judged.signature).verdict is Verdict.SKIP
    # With nothing else to go by (the main thread exited 1 by itself), it is what is left.
    alone = AFTER_THE_MAIN_ONE.split("Exception in thread")[1]
    assert _failed("Exception in thread" + alone).signature == "RuntimeError: pool shut down twice"
    chained = ("Exception ignored in: <function f at 0x7f>\nTraceback (most recent call last):\n"
               "  File \"r.py\", line 1\nKeyError: 'a'\n\nDuring handling of the above exception,"
               " another exception occurred:\n\nTraceback (most recent call last):\n"
               "  File \"r.py\", line 2\nValueError: in the handler\n")
    assert _failed(AFTER_THE_MAIN_ONE.split("Exception in")[0] + chained).signature == (
        "AssertionError: Tensor-likes are not close!")


# Real output of torch 2.11.0 (frames left out): torch.compile with a backend that raises.
BACKEND_FAILED = """Traceback (most recent call last):
  File "/tmp/tbb-run-x/repro.py", line 4, in <module>
    torch.compile(lambda x: x + 1, backend=boom)(torch.ones(3))
torch._dynamo.exc.BackendCompilerFailed: backend='boom' raised:
RuntimeError: size mismatch 4 vs 8

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're \
reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"

"""


def test_a_backend_s_compile_failure_is_told_by_what_the_backend_raised():
    """`BackendCompilerFailed: backend='inductor' raised:` says what failed on the next line:
    without it, an older build's unrelated compile error was the same failure as the bad
    end's, and the search named it the first bad nightly."""
    judged = _failed(BACKEND_FAILED)
    assert judged.signature == ("torch._dynamo.exc.BackendCompilerFailed: backend='boom' "
                                "raised: RuntimeError: size mismatch 4 vs 8")
    older = _failed(BACKEND_FAILED.replace("RuntimeError: size mismatch 4 vs 8",
                                           "NameError: name 's0' is not defined"))
    assert against_signature(older, judged.signature).verdict is Verdict.SKIP
    same = _failed(BACKEND_FAILED.replace("4 vs 8", "16 vs 32"))
    assert against_signature(same, judged.signature).verdict is Verdict.BAD


@pytest.mark.parametrize(("bad_end", "other"), [
    # reprs of the same objects, from two runs (Python 3.11)
    ("TypeError: cannot trace <function <lambda> at 0x7f714534b7e0> with <object object at "
     "0x7f714546c380>", "TypeError: cannot trace <function <lambda> at 0x7f99a75c37e0> with "
     "<object object at 0x7f99a76c4380>"),
    ("AssertionError: first difference -0.25", "AssertionError: first difference 0.5"),
    ("AssertionError: max diff nan", "AssertionError: max diff 0.5"),
    ("AssertionError: max diff inf", "AssertionError: max diff 1e-05"),
])
def test_one_failure_printing_other_values_is_the_same_failure(bad_end, other):
    """An address in a message made every run's signature its own: each build but the bad end
    was "different failure", and the bisection ended ambiguous over the whole window."""
    assert same_failure(bad_end, other)
    assert not same_failure("AssertionError: max diff nan", "AssertionError: infinite loop")


def test_a_crash_the_match_does_not_match_is_another_failure():
    """With `--match`, a newer build's segfault was BAD and, as the bad end, defined the
    failure: the builds showing the matched mismatch became "different failure"."""
    policy = Policy(match="mismatch")
    crash = judge(RunResult(Stage.RUN, signal=signal.SIGSEGV, output="step 1\n"), policy)
    assert crash.verdict is Verdict.SKIP
    assert crash.reason == ("the output does not match --match 'mismatch'; different failure: "
                            "crash (SIGSEGV)")
    said = judge(RunResult(Stage.RUN, signal=signal.SIGABRT, output="mismatch, aborting\n"),
                 policy)
    assert (said.verdict, said.signature) == (Verdict.BAD, "mismatch")
    alone = judge(RunResult(Stage.RUN, signal=signal.SIGSEGV), Policy())
    assert (alone.verdict, alone.reason) == (Verdict.BAD, "crash (SIGSEGV)")


@pytest.mark.parametrize("last_line", [
    "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the "
    "device",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11080). Please "
    "update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx",
])
def test_a_build_that_cannot_run_on_this_gpu_is_untestable_not_bad(last_line):
    """A newest build without kernels for the runner's GPU was BAD and defined the failure;
    the builds showing the reported mismatch became "different failure" (ambiguous)."""
    output = f"Traceback (most recent call last):\n  File \"repro.py\", line 3\n{last_line}\n"
    judged = _failed(output)
    assert judged.verdict is Verdict.SKIP
    assert judged.reason.startswith("this build cannot run on this GPU or driver: ")
    assert _failed(output, Policy(match="CUDA error|driver")).verdict is Verdict.BAD
