"""The oracle: a run's exit status, signal, timeout and output become a verdict with a reason."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.ansi import without_escapes
from bot.core.verdicts import (
    Policy,
    RunResult,
    Stage,
    Verdict,
    against_signature,
    failed_otherwise,
    failure_signature,
    judge,
    rank_view,
)

TRACEBACK = """Traceback (most recent call last):
  File "repro.py", line 17, in <module>
    torch.testing.assert_close(actual, expected)
AssertionError: Tensor-likes are not close!

Mismatched elements: 251 / 256 (98.0%)
Greatest absolute difference: 0.49 at index (3,)
"""


@pytest.mark.parametrize(
    ("result", "verdict", "reason"),
    [
        (RunResult(Stage.RUN, exit_code=0), Verdict.GOOD, "exit 0"),
        (RunResult(Stage.RUN, exit_code=125), Verdict.SKIP, "asked to skip"),
        (RunResult(Stage.RUN, exit_code=1, output=TRACEBACK), Verdict.BAD, "AssertionError"),
        (RunResult(Stage.RUN, exit_code=3), Verdict.BAD, "exit 3"),
        (RunResult(Stage.RUN, signal=signal.SIGSEGV), Verdict.BAD, "crash (SIGSEGV)"),
        (RunResult(Stage.RUN, timed_out=True, seconds=9), Verdict.SKIP, "timed out after 9 s"),
        (RunResult(Stage.INSTALL, error="404"), Verdict.SKIP, "install failed: 404"),
        (RunResult(Stage.IMPORT, error="ImportError: x"), Verdict.SKIP, "import torch failed"),
    ],
)
def test_judge(result, verdict, reason):
    judgement = judge(result, Policy())
    assert judgement.verdict is verdict
    assert reason in judgement.reason


def test_timeout_policy_can_make_a_hang_bad():
    judgement = judge(RunResult(Stage.RUN, timed_out=True), Policy(on_timeout=Verdict.BAD))
    assert judgement.verdict is Verdict.BAD


def test_signature_is_the_last_traceback_line():
    assert failure_signature(TRACEBACK) == "AssertionError: Tensor-likes are not close!"
    chained = "Traceback (most recent call last):\n  x\nKeyError: 'a'\n\nDuring handling..." \
        "\nTraceback (most recent call last):\n  y\ntorch._dynamo.exc.BackendCompilerFailed: boom\n"
    assert failure_signature(chained) == "torch._dynamo.exc.BackendCompilerFailed: boom"
    assert failure_signature("no traceback here\nValueError: x") is None


def test_a_traceback_after_output_without_a_newline_is_read():
    """print(..., end="") before the failure: the header follows the output on its line."""
    output = "step 3/4 ... Traceback (most recent call last):\n  File \"r.py\", line 3\n" \
        "RuntimeError: CUDA error: an illegal memory access\n"
    assert failure_signature(output) == "RuntimeError: CUDA error: an illegal memory access"
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert "illegal memory access" in judged.reason


def test_a_different_failure_is_skip_and_numbers_do_not_count():
    bad = judge(RunResult(Stage.RUN, exit_code=1, output=TRACEBACK), Policy())
    other = judge(RunResult(Stage.RUN, exit_code=1, output=TRACEBACK.replace(
        "AssertionError: Tensor-likes are not close!", "ImportError: cannot import name 'x'")),
        Policy())
    assert against_signature(other, bad.signature).verdict is Verdict.SKIP
    assert "different failure: ImportError" in against_signature(other, bad.signature).reason
    same_shape = judge(RunResult(Stage.RUN, exit_code=1,
                                 output=TRACEBACK.replace("251 / 256", "12 / 256")), Policy())
    assert against_signature(same_shape, bad.signature).verdict is Verdict.BAD


def test_match_overrides_the_signature():
    policy = Policy(match=r"not close")
    assert judge(RunResult(Stage.RUN, exit_code=1, output=TRACEBACK), policy).verdict is Verdict.BAD
    other = judge(RunResult(Stage.RUN, exit_code=1, output="RuntimeError: x"), policy)
    assert other.verdict is Verdict.SKIP and "different failure" in other.reason


def test_run_result_round_trips_through_json():
    result = RunResult(Stage.RUN, exit_code=1, signal=None, seconds=1.5, output="x", error=None)
    assert RunResult.from_dict(result.to_dict()) == result


def _missing(module: str) -> RunResult:
    return RunResult(Stage.RUN, exit_code=1, output=(
        "Traceback (most recent call last):\n  File \"repro.py\", line 2, in <module>\n"
        f"    import {module}\nModuleNotFoundError: No module named '{module}'\n"))


@pytest.mark.parametrize(("module", "reason"), [
    ("einops", "module not installed here: einops"),
    ("transformers.models", "module not installed here: transformers"),
    ("torch._inductor.gone", "API not in this build: ModuleNotFoundError"),  # torch's own
])
def test_a_module_the_environment_lacks_is_untestable_not_bad(module, reason):
    judgement = judge(_missing(module), Policy())
    assert judgement.verdict is Verdict.SKIP
    assert judgement.reason.startswith(reason)


def test_match_can_still_make_a_missing_module_the_failure_searched_for():
    judgement = judge(_missing("einops"), Policy(match="No module named 'einops'"))
    assert judgement.verdict is Verdict.BAD


@pytest.mark.parametrize("last_line", [
    "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): "
    "Max retries exceeded with url: /bert-base-uncased/resolve/main/config.json",
    "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't "
    "find them in the cached files.",
    "socket.gaierror: [Errno -2] Name or service not known",
])
def test_a_reproducer_that_needs_the_network_is_untestable_not_bad(last_line):
    output = f"Traceback (most recent call last):\n  File \"repro.py\", line 3\n{last_line}\n"
    judgement = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert judgement.verdict is Verdict.SKIP
    assert judgement.reason.startswith("needs the network, which probes do not have: ")


def test_a_connection_error_of_torch_s_own_is_still_bad():
    # torch.distributed's rendezvous on localhost is the build's business, not the network's
    output = ("Traceback (most recent call last):\n  File \"repro.py\", line 3\n"
              "torch.distributed.DistStoreError: Timed out after 30 seconds waiting for clients\n")
    assert judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy()).verdict is Verdict.BAD


def _name_error(frame: str) -> RunResult:
    return RunResult(Stage.RUN, exit_code=1, output=(
        "Traceback (most recent call last):\n"
        '  File "/tmp/tbb-run-1/repro.py", line 9, in <module>\n    main()\n'
        f"{frame}    out = model(x)\n          ^^^^^\n"
        "NameError: name 'model' is not defined\n"))


@pytest.mark.parametrize(("frame", "verdict"), [
    ("", Verdict.SKIP),  # the script's top level: an incomplete snippet
    ('  File "/tmp/tbb-run-1/repro.py", line 5, in main\n', Verdict.BAD),  # Dynamo may be why
    ('  File "/env/lib/python3.12/site-packages/torch/_dynamo/x.py", line 3, in <module>\n',
     Verdict.BAD),  # a library's top level is the build's business
])
def test_a_name_the_script_never_defines_at_its_top_level_is_untestable(frame, verdict):
    judgement = judge(_name_error(frame), Policy())
    assert judgement.verdict is verdict
    if verdict is Verdict.SKIP:
        assert judgement.reason == ("the script fails on its own: "
                                    "NameError: name 'model' is not defined")


@pytest.mark.parametrize(("path", "verdict"), [
    ("inputs.pt", Verdict.SKIP),  # beside the reporter's script
    ("data/img.png", Verdict.SKIP),
    ("/home/alice/ckpt/model.pth", Verdict.SKIP),
    ("/content/drive/x.npy", Verdict.SKIP),  # Colab
    # Inductor's own files: the build's business
    ("/tmp/tbb-run-1/inductor/ab/cab.py", Verdict.BAD),
    ("/tmp/torchinductor_root/xy/kernel.so", Verdict.BAD),
])
def test_a_file_the_issue_does_not_include_is_untestable(path, verdict):
    output = ("Traceback (most recent call last):\n"
              '  File "/tmp/tbb-run-1/repro.py", line 3, in <module>\n'
              "    x = torch.load('inputs.pt')\n"
              '  File "/env/lib/python3.12/site-packages/torch/serialization.py", line 1, in load\n'
              f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'\n")
    judgement = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert judgement.verdict is verdict
    if verdict is Verdict.SKIP:
        assert judgement.reason.startswith("the script fails on its own: FileNotFoundError")
    # a triager's --match still makes it BAD
    assert judge(RunResult(Stage.RUN, exit_code=1, output=output),
                 Policy(match="FileNotFoundError")).verdict is Verdict.BAD


def test_a_script_that_does_not_compile_is_untestable():
    output = ('  File "/tmp/tbb-run-1/repro.py", line 2\n    x = [1.0\n        ^\n'
              "SyntaxError: '[' was never closed\n")
    judgement = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert (judgement.verdict, judgement.reason) == (
        Verdict.SKIP, "the script fails on its own: SyntaxError: '[' was never closed")
    # code torch generates and compiles fails in a traceback: the build's business
    traced = ("Traceback (most recent call last):\n  File \"/tmp/tbb-run-1/repro.py\", line 9, "
              "in <module>\n    f()\n" + output.replace("/tmp/tbb-run-1/repro.py",
                                                         "/tmp/torchinductor_u/ab/cab.py"))
    assert judge(RunResult(Stage.RUN, exit_code=1, output=traced), Policy()).verdict \
        is Verdict.BAD


@pytest.mark.parametrize("last_line", [
    "RuntimeError: Failed to resolve symbolic shape s0",  # words a compiler error may use
    "torch._dynamo.exc.Unsupported: couldn't connect to the guard",
])
def test_words_near_network_ones_are_still_a_failure(last_line):
    output = f"Traceback (most recent call last):\n  File \"repro.py\", line 3\n{last_line}\n"
    assert judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy()).verdict \
        is Verdict.BAD


# Real torchrun output (torch 2.13.0+cpu, `python -m torch.distributed.run --standalone
# --nproc_per_node=2`, gloo; paths shortened): a rank's exception, a rank killed by SIGSEGV,
# a NameError at a snippet's top level on both ranks, and a module missing before
# torch.distributed set up its `[rankN]:` prefixes.
TORCHRUN = Path(__file__).parent.parent / "data" / "torchrun"


@pytest.mark.parametrize(("name", "verdict", "reason"), [
    ("ddp", Verdict.BAD, "RuntimeError: mismatch on rank 1: 12.0"),
    ("segv", Verdict.BAD, "crash (SIGSEGV)"),
    ("nameerr", Verdict.SKIP, "the script fails on its own: NameError: name 'model' is not "
                              "defined"),
    ("nomod", Verdict.SKIP, "module not installed here: einops_missing_pkg"),
    # torch 2.11.0+cu130 on Python 3.12: rank 1 exits 125, rank 0's barrier then fails; the
    # rank's skip came back as torchrun's exit 1 and was judged BAD ("ChildFailedError")
    ("skip125", Verdict.SKIP, "the reproducer asked to skip (exit 125 on rank 1)"),
])
def test_a_torchrun_failure_is_judged_by_its_rank_s_own(name, verdict, reason):
    output = (TORCHRUN / f"{name}.txt").read_text()
    assert "ChildFailedError" in output  # torchrun's own traceback comes last
    judgement = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert (judgement.verdict, judgement.reason) == (verdict, reason)


def test_the_root_cause_rank_s_lines_are_kept_together():
    # Two ranks failing at once interleave their lines; the view keeps the root cause's.
    output = ("[rank0]: Traceback (most recent call last):\n"
              "[rank1]: Traceback (most recent call last):\n"
              '[rank0]:   File "/w/repro.py", line 3, in <module>\n'
              '[rank1]:   File "/w/repro.py", line 5, in <module>\n'
              "[rank1]: ValueError: rank one\n"
              "[rank0]: KeyError: 'rank zero'\n"
              "Traceback (most recent call last):\n"
              '  File "/env/lib/python3.11/site-packages/torch/distributed/run.py", line 1\n'
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
              "Root Cause (first observed failure):\n[0]:\n  host      : localhost\n"
              "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 7)\n")
    assert rank_view(output).splitlines()[:3] == [
        "Traceback (most recent call last):", '  File "/w/repro.py", line 5, in <module>',
        "ValueError: rank one"]
    assert failure_signature(rank_view(output)) == "ValueError: rank one"
    assert judge(RunResult(Stage.RUN, exit_code=1, output=output.replace(
        "rank      : 1", "rank      : 0")), Policy()).reason == "KeyError: 'rank zero'"
    assert rank_view(TRACEBACK) == TRACEBACK  # no prefixes: as it is


def test_another_rank_s_print_amid_the_root_cause_s_traceback_does_not_end_it():
    """A rank's stdout has no prefix: rank 0's print came between two lines of rank 1's
    traceback (the synthetic torchrun, 2 of 40 runs under load), which ended it, and the
    failure read was torchrun's ChildFailedError: BAD on one build, another signature on
    the next (a flaky "ambiguous" in CI)."""
    output = ("rank 1 of 2: share 2.0\n"
              "[rank1]: Traceback (most recent call last):\n"
              '[rank1]:   File "/w/repro.py", line 32, in <module>\n'
              "rank 0 of 2: share 2.0\n"
              "[rank1]:     torch.testing.assert_close(a, b)\n"
              "[rank1]: AssertionError: Tensor-likes are not close!\n"
              "[rank0]: Traceback (most recent call last):\n"
              "[rank0]: AssertionError: Tensor-likes are not close!\n"
              "Traceback (most recent call last):\n"
              '  File "/env/lib/python3.11/site-packages/torch/distributed/run.py", line 1\n'
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
              "Root Cause (first observed failure):\n[0]:\n  host      : localhost\n"
              "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 7)\n")
    judgement = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert judgement.signature == "AssertionError: Tensor-likes are not close!"
    assert rank_view(output).splitlines()[:2] == ["rank 1 of 2: share 2.0",
                                                  "Traceback (most recent call last):"]
    assert "rank 0 of 2: share 2.0" in rank_view(output)  # kept, after the rank's lines


def test_the_sandbox_s_own_exit_125_is_not_the_reproducer_s():
    output = ("torch-bisect-bot sandbox: cannot start cache/envs/x/bin/python: [Errno 2] No "
              "such file or directory: 'cache/envs/x/bin/python'\n")
    judgement = judge(RunResult(Stage.RUN, exit_code=125, output=output), Policy())
    assert judgement.verdict is Verdict.SKIP
    assert judgement.reason.startswith("the sandbox could not run it: cannot start cache/envs")
    asked = judge(RunResult(Stage.RUN, exit_code=125, output="skipping\n"), Policy())
    assert asked.reason == "the reproducer asked to skip (exit 125)"


def test_a_run_that_exits_without_a_traceback_is_told_by_its_last_words():
    """`sys.exit("compiled result differs")` prints its message and exits 1: the reason says
    it; the signature stays `exit 1`, so another wording of it is the same failure."""
    said = judge(RunResult(Stage.RUN, exit_code=1, output="max diff 0.5\ncompiled result "
                                                            "differs\n"), Policy())
    assert (said.verdict, said.reason, said.signature) == (
        Verdict.BAD, "exit 1: compiled result differs", "exit 1")
    assert judge(RunResult(Stage.RUN, exit_code=3), Policy()).reason == "exit 3"


@pytest.mark.parametrize(("output", "reason"), [
    ("max diff: 0.5\n", "metric 0.5 > 0.1"),
    ("max diff: n/a\n", "metric 'max diff: (\\\\S+)' matched 'n/a', which is not a number"),
    ("nothing here\n", "metric 'max diff: (\\\\S+)' not found in the output"),
])
def test_a_metric_that_matched_no_number_says_what_it_matched(output, reason):
    """A match that is not a number was reported as "not found in the output"."""
    policy = Policy(metric=r"max diff: (\S+)", threshold=0.1)
    judgement = judge(RunResult(Stage.RUN, exit_code=0, output=output), policy)
    assert judgement.reason == reason


def test_a_match_that_matches_nothing_says_its_pattern():
    """A typo in --match made every failure "different failure: AssertionError ...", which
    reads as the build's doing; the reason names the pattern that did not match."""
    output = "Traceback (most recent call last):\nAssertionError: boom\n"
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy(match="ZZZ"))
    assert judged.verdict is Verdict.SKIP
    assert judged.reason.startswith("the output does not match --match 'ZZZ'; different "
                                    "failure: AssertionError: boom")
    assert failed_otherwise(judged.reason) == "AssertionError: boom"


# Python 3.13's traceback with colour forced (PYTHON_COLORS=1): Lib/_colorize.py's MAGENTA
# (ESC[35m) around each frame's file, line and function, BOLD_MAGENTA (ESC[1;35m) on the
# exception's type, MAGENTA on its message, RESET (ESC[0m) after each.
COLOURED_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File \x1b[35m"/work/repro.py"\x1b[0m, line \x1b[35m9\x1b[0m, in \x1b[35m<module>\x1b[0m\n'
    "    \x1b[31mtorch.testing.assert_close\x1b[0m\x1b[1;31m(out, ref)\x1b[0m\n"
    "    \x1b[31m~~~~~~~~~~~~~~~~~~~~~~~~~~\x1b[0m\x1b[1;31m^^^^^^^^^^\x1b[0m\n"
    "\x1b[1;35mAssertionError\x1b[0m: \x1b[35mTensor-likes are not close!\x1b[0m\n"
)


def test_a_coloured_number_is_read_as_the_number():
    """FORCE_COLOR and the like: a metric printed in colour was "not a number" on every build."""
    policy = Policy(metric=r"max abs diff: (\S+)", threshold=0.1)
    coloured = judge(RunResult(Stage.RUN, exit_code=0,
                               output="max abs diff: \x1b[31m0.5\x1b[0m\x1b[K\n"), policy)
    assert (coloured.verdict, coloured.metric) == (Verdict.BAD, 0.5)
    calm = judge(RunResult(Stage.RUN, exit_code=0,
                           output="max abs diff: \x1b[32m0.01\x1b[0m\n"), policy)
    assert (calm.verdict, calm.metric) == (Verdict.GOOD, 0.01)


def test_a_coloured_traceback_keeps_its_signature():
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=COLOURED_TRACEBACK), Policy())
    assert (judged.verdict, judged.signature) == (
        Verdict.BAD, "AssertionError: Tensor-likes are not close!")
    # one build coloured and another not are the same failure
    plain = judge(RunResult(Stage.RUN, exit_code=1, output=TRACEBACK), Policy())
    assert against_signature(judged, plain.signature).verdict is Verdict.BAD
    # a top-level NameError is still told by its coloured frame
    undefined = COLOURED_TRACEBACK.replace(
        "\x1b[1;35mAssertionError\x1b[0m: \x1b[35mTensor-likes are not close!",
        "\x1b[1;35mNameError\x1b[0m: \x1b[35mname 'model' is not defined")
    assert judge(RunResult(Stage.RUN, exit_code=1, output=undefined),
                 Policy()).reason.startswith("the script fails on its own")


def test_a_match_reads_the_output_without_colour():
    """`--match` is written against what the user saw, which had no escape codes in it."""
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=COLOURED_TRACEBACK),
                   Policy(match=r"AssertionError: Tensor-likes"))
    assert judged.verdict is Verdict.BAD


@pytest.mark.parametrize(("printed", "shown"), [
    ("\x1b[1;31mred\x1b[0m \x1b[mreset", "red reset"),
    ("50%\x1b[K\r100%\x1b[2K", "50%\r100%"),  # erase in line: a progress bar's
    ("\x1b]8;;https://pytorch.org\x1b\\docs\x1b]8;;\x1b\\", "docs"),  # OSC 8 hyperlink
    ("\x1b]0;title\x07text", "text"),  # a window title, ended by BEL
    ("\x1b(B\x1b[mplain", "plain"),  # tput sgr0
    ("\x1b]8;;never closed", "8;;never closed"),  # an OSC left open takes nothing with it
    ("no escapes [31m here", "no escapes [31m here"),
])
def test_escape_codes_are_taken_out(printed, shown):
    assert without_escapes(printed) == shown


_SGR = st.lists(st.integers(min_value=0, max_value=255), max_size=4).map(
    lambda numbers: "\x1b[" + ";".join(map(str, numbers)) + "m")


@given(st.lists(st.tuples(st.text().filter(lambda text: "\x1b" not in text), _SGR)))
def test_colour_around_any_text_comes_off_and_leaves_the_text(pieces):
    coloured = "".join(text + code for text, code in pieces)
    assert without_escapes(coloured) == "".join(text for text, _ in pieces)


# Tracebacks as torch 2.11 prints them for an API the build lacks beyond a module's attribute:
# a config flag (torch/utils/_config_module.py turns the KeyError into an AttributeError) and
# an operator (torch/_ops.py turns the dispatcher's RuntimeError into one).
SITE = "/opt/venv/lib/python3.12/site-packages/torch"
CONFIG_FLAG_MISSING = f"""Traceback (most recent call last):
  File "{SITE}/utils/_config_module.py", line 363, in __getattr__
    config = self._config[name]
             ~~~~~~~~~~~~^^^^^^
KeyError: 'no_such_flag_xyz'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/repro.py", line 5, in <module>
    if torch._inductor.config.no_such_flag_xyz:
       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/utils/_config_module.py", line 371, in __getattr__
    raise AttributeError(f"{{self.__name__}}.{{name}} does not exist") from e
AttributeError: torch._inductor.config.no_such_flag_xyz does not exist
"""
CONFIG_FLAG_SET = f"""Traceback (most recent call last):
  File "/work/repro.py", line 4, in <module>
    torch._inductor.config.triton.no_such_flag_xyz = True
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/utils/_config_module.py", line 338, in __setattr__
    raise AttributeError(f"{{self.__name__}}.{{name}} does not exist")
AttributeError: torch._inductor.config.triton.no_such_flag_xyz does not exist
"""
OP_MISSING = f"""Traceback (most recent call last):
  File "{SITE}/_ops.py", line 1361, in __getattr__
    op, overload_names = _get_packet(qualified_op_name, module_name)
                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/_ops.py", line 1395, in _get_packet
    op, overload_names = torch._C._jit_get_operation(qualname)
                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: No such operator aten::no_such_op_xyz

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/repro.py", line 6, in <module>
    out = torch.ops.aten.no_such_op_xyz(x)
          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{SITE}/_ops.py", line 1365, in __getattr__
    raise AttributeError(
AttributeError: '_OpNamespace' 'aten' object has no attribute 'no_such_op_xyz'
"""


@pytest.mark.parametrize("output", [CONFIG_FLAG_MISSING, CONFIG_FLAG_SET, OP_MISSING],
                         ids=["config-read", "config-set", "op"])
def test_a_config_flag_or_operator_the_build_lacks_is_a_missing_api(output):
    result = RunResult(Stage.RUN, exit_code=1, output=output)
    skipped = judge(result, Policy())
    assert skipped.verdict is Verdict.SKIP
    assert skipped.reason.startswith("API not in this build: AttributeError: ")
    assert judge(result, Policy(missing_api=Verdict.BAD)).reason.startswith(
        "API gone from this build: ")
    # `--match` naming it still makes it the failure searched for
    assert judge(result, Policy(match="no_such_")).verdict is Verdict.BAD


@pytest.mark.parametrize("last_line", [
    "AttributeError: 'Tensor' object has no attribute 'foo'",  # the user's own mistake
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "AttributeError: '_OpNamespace' 'torchvision' object has no attribute 'nms'",  # not torch's
    "AttributeError: '_OpNamespace' 'mylib' object has no attribute 'my_op'",
    "AttributeError: myproject.config.lr does not exist",  # not torch's config
    "AttributeError: torch._inductor.config.flag does not exist, and then some",
])
def test_other_attribute_errors_stay_failures(last_line):
    output = OP_MISSING.rsplit("\n", 2)[0] + f"\n{last_line}\n"
    judged = judge(RunResult(Stage.RUN, exit_code=1, output=output), Policy())
    assert (judged.verdict, judged.reason) == (Verdict.BAD, last_line)
