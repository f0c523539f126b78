"""What one run of a reproducer means: GOOD, BAD or SKIP, with the reason in words."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, replace
from enum import Enum

from bot.core.ansi import without_escapes


class Verdict(str, Enum):
    """The one vocabulary of a probe's result, the same in flags, JSON, logs and comments."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


class Stage(str, Enum):
    """How far a probe got: a build that never ran the reproducer is untestable, not bad."""

    INSTALL = "install"
    IMPORT = "import"
    RUN = "run"


# The reason of a run that failed otherwise than the failure a search follows (SKIP); the
# report and the triage tell such builds from untestable ones by it.
DIFFERENT_FAILURE = "different failure: "
FLAKY = "flaky: "  # the reason of runs of one build that disagree
# Before it, where the failure is not the one `--match` names: the pattern, so that a typo in it
# (a pattern that matches no build) is plain to see.
MATCH_MISSED = "the output does not match --match "


def failed_otherwise(reason: str) -> str | None:
    """The failure of a run judged to fail otherwise than the one followed, from its reason."""
    if reason.startswith(MATCH_MISSED) and DIFFERENT_FAILURE in reason:
        return reason.split(DIFFERENT_FAILURE, 1)[1]
    return reason[len(DIFFERENT_FAILURE):] if reason.startswith(DIFFERENT_FAILURE) else None


# The `git bisect run` convention: 0 good, 125 skip, any other code from 1 to 127 bad.
EXIT_SKIP = 125


@dataclass(frozen=True)
class RunResult:
    """What the runner saw: exit status, signal, timeout, timing and the kept output."""

    stage: Stage
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    output: str = ""  # head and tail of the combined output, capped by the runner
    output_dropped: int = 0  # bytes the runner dropped from the middle
    error: str | None = None  # install or import failure, in words

    def to_dict(self) -> dict[str, object]:
        return {
            "stage": self.stage.value,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "seconds": round(self.seconds, 3),
            "output": self.output,
            "output_dropped": self.output_dropped,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RunResult:
        def opt_int(key: str) -> int | None:
            value = data.get(key)
            return int(value) if isinstance(value, (int, float)) else None

        seconds = data.get("seconds", 0.0)
        dropped = data.get("output_dropped", 0)
        error = data.get("error")
        return cls(
            stage=Stage(str(data["stage"])),
            exit_code=opt_int("exit_code"),
            signal=opt_int("signal"),
            timed_out=bool(data.get("timed_out")),
            seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
            output=str(data.get("output", "")),
            output_dropped=int(dropped) if isinstance(dropped, int) else 0,
            error=str(error) if error is not None else None,
        )


@dataclass(frozen=True)
class Policy:
    """How runs are judged; set by flags or a bisect command."""

    on_timeout: Verdict = Verdict.SKIP
    match: str | None = None  # a user's regex that defines BAD, instead of the signature
    metric: str | None = None  # a regex whose first group (or whole match) is a number
    threshold: float | None = None  # BAD when the metric exceeds it
    # A torch API the script uses and the build lacks: SKIP where older builds may predate it
    # (a bisection steps back past them); BAD for a stored case that passed on an earlier
    # nightly, where an API gone from the new one is the regression (a sweep).
    missing_api: Verdict = Verdict.SKIP


@dataclass(frozen=True)
class Judgement:
    """A verdict with its reason, and the failure signature the verdict rests on."""

    verdict: Verdict
    reason: str
    signature: str | None = None
    metric: float | None = None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")


# torchrun's own traceback, printed last when a rank fails: it says which rank failed, not why.
_LAUNCHER_FAILED = "ChildFailedError"
_TRACEBACK = "Traceback (most recent call last)"


# Tracebacks that never decide a run's exit status: an exception in a `__del__`, a weakref
# callback or an atexit function (sys.unraisablehook: "Exception ignored in: <...>"), and one
# that ended a thread other than the main one (threading.excepthook: "Exception in thread
# NAME:"). They come at any time, often at shutdown after the main traceback (a worker pool's
# or a DataLoader's destructor), so taking the last traceback took them for the failure.
_ASIDE = ("Exception ignored", "Exception in thread")
# What joins an exception's chained traceback to the one before it (PEP 3134).
_CHAINED = ("During handling of the above exception", "The above exception was the direct")


def _last_traceback(output: str) -> tuple[list[str], str] | None:
    """The frames and the exception line of the output's last traceback (the first unindented
    line after its frames), passing over torchrun's when a rank's own traceback is there, and
    over those an exception beside the main thread's printed (see `_ASIDE`) when it is."""
    found: tuple[list[str], str] | None = None
    launcher: tuple[list[str], str] | None = None
    aside: tuple[list[str], str] | None = None
    frames: list[str] | None = None
    set_aside = False  # whether the traceback read now is one of those
    before = ""  # the last line that is not blank or a frame
    for line in output.splitlines():
        # also after output the script left without a newline: print(..., end="")
        if line.startswith(_TRACEBACK) or line.rstrip().endswith(_TRACEBACK + ":"):
            set_aside = before.startswith(_ASIDE) or before.startswith(_CHAINED) and set_aside
            frames, before = [], line
            continue
        if not line.strip() or frames is not None and line.startswith((" ", "\t")):
            if frames is not None and line.strip():
                frames.append(line)
            continue
        before = line
        if frames is None:
            continue
        if _EXCEPTION_LINE.match(line.rstrip()):
            if set_aside:
                aside = (frames, line.rstrip())
            elif line.split(":")[0].endswith(_LAUNCHER_FAILED):
                launcher = (frames, line.rstrip())
            else:
                found = (frames, line.rstrip())
        frames = None
    return found or launcher or aside


def failure_signature(output: str) -> str | None:
    """The exception type and message of the last traceback, e.g. `AssertionError: ...`.

    With chained exceptions ("During handling of the above exception...") the last traceback
    wins, among the main thread's where there are any (see `_ASIDE`); torchrun's
    ChildFailedError only where no rank's own traceback is there, and then as the crash of its
    rank when a signal killed it.
    """
    traceback = _last_traceback(output)
    if traceback is None:
        return None
    match = _EXCEPTION_LINE.match(traceback[1])
    assert match is not None
    if match["type"].endswith(_LAUNCHER_FAILED):
        return _rank_crash(output) or _LAUNCHER_FAILED
    signature = match["type"] + (": " + match["msg"] if match["msg"] else "")
    if signature.endswith(_RAISED):
        signature += " " + _line_after(output, traceback[1])
    return signature[:300]


# Dynamo's BackendCompilerFailed says which exception the backend raised on the next line
# (torch/_dynamo/exc.py: f"backend={name!r} raised:\n{type(inner).__name__}: {inner}"); its
# first line alone made every compile failure of a backend the same failure.
_RAISED = " raised:"


def _line_after(output: str, line: str) -> str:
    """The first line that is not blank after the last `line` of the output."""
    rest = output[output.rindex(line) + len(line):]
    return next((later.strip() for later in rest.splitlines() if later.strip()), "")


# torchrun (torch >= 2.2) writes each rank's stderr with a `[rankN]:` prefix, and names the
# rank that failed first in its summary: "Root Cause (first observed failure): ... rank : 1
# (local_rank: 1) ... exitcode : -11".
_RANK_PREFIX = re.compile(r"^\[rank(\d{1,4})\]:[ ]?")
_ROOT_CAUSE = re.compile(r"^Root Cause \(first observed failure\):\n(?:.*\n){0,8}?"
                         r"\s*rank\s*: (?P<rank>\d+)[^\n]*\n\s*exitcode\s*: (?P<code>-?\d+)",
                         re.MULTILINE)


def _rank_crash(output: str) -> str | None:
    """`crash (SIGSEGV)` where torchrun says its root-cause rank died of a signal, as `judge`
    names the crash of a script run alone."""
    found = _ROOT_CAUSE.search(output)
    if found is None or not found["code"].startswith("-"):
        return None
    return f"crash ({_signal_name(int(found['code'][1:]))})"


def rank_view(output: str) -> str:
    """The output as the failing rank saw it: every line without a rank prefix, and the lines
    of the rank torchrun names as the root cause (else of the first rank with a traceback,
    else of the lowest rank), unprefixed. Output without rank prefixes comes back as it is.
    Ranks that print at once interleave their lines; this keeps one rank's together."""
    lines = output.splitlines()
    ranks: dict[int, list[int]] = {}
    for number, line in enumerate(lines):
        prefix = _RANK_PREFIX.match(line)
        if prefix:
            ranks.setdefault(int(prefix[1]), []).append(number)
    if not ranks:
        return output
    root = _ROOT_CAUSE.search(output)
    traced = [rank for rank in sorted(ranks)
              if any(lines[i].endswith("Traceback (most recent call last):") for i in ranks[rank])]
    # A root cause that wrote nothing under its prefix (killed by a signal, or failed before
    # torch.distributed set the prefixes up) is told by the unprefixed lines alone: the other
    # ranks' tracebacks are then what its failure did to them.
    chosen = int(root["rank"]) if root else (traced or sorted(ranks))[0]
    kept = ranks.get(chosen, [])
    prefixed = {number for numbers in ranks.values() for number in numbers}
    # The rank's lines as one block where they begin: what the others print unprefixed (their
    # stdout) meanwhile goes after it. A line of it amid the rank's traceback ended that
    # traceback, and the failure read was torchrun's ChildFailedError (a flaky BAD of
    # another signature, then SKIP "different failure", in a bisection under load).
    first = kept[0] if kept else len(lines)
    view = [line for number, line in enumerate(lines[:first]) if number not in prefixed]
    view += [_RANK_PREFIX.sub("", lines[number]) for number in kept]
    view += [line for number, line in enumerate(lines[first:], first) if number not in prefixed]
    return "\n".join(view)


# A reproducer that uses an API newer than an old build fails there for that reason alone:
# `module 'torch' has no attribute ...`, `cannot import name ... from 'torch...'`,
# `No module named 'torch._inductor.something'`; a config flag the build's config module does
# not have, read or set (torch/utils/_config_module.py: "torch._inductor.config.flag does not
# exist"); or an operator of one of torch's own namespaces that it does not register
# (torch/_ops.py, _OpNamespace.__getattr__: "'_OpNamespace' 'aten' object has no attribute
# 'op'"). Another package's namespace (torchvision's, a user's torch.library one) is left out:
# its op goes missing for reasons of that package.
_TORCH_OP_NAMESPACE = (r"aten|prims?|inductor|higher_order|_?quantized|c10d"
                       r"|_c10d_functional(?:_autograd)?|symm_mem|_dtensor|mkldnn|onednn|profiler")
_MISSING_API = re.compile(
    r"^(AttributeError: module 'torch[\w.]*' has no attribute"
    r"|ImportError: cannot import name '[\w.]+' from 'torch[\w.]*'"
    r"|ModuleNotFoundError: No module named '(torch|functorch)[\w.]*'"
    r"|AttributeError: (torch|functorch)\.[\w.]+ does not exist$"
    rf"|AttributeError: '_OpNamespace' '({_TORCH_OP_NAMESPACE})' object has no attribute )"
)


# A module the environment lacks that is not torch's: the reproducer imports a package that
# was not installed (or a package torch uses lazily is missing), which says nothing about the
# build. Judged BAD, it would make every build fail alike: "not a regression".
NOT_INSTALLED = "module not installed here"
_NOT_INSTALLED = re.compile(r"^ModuleNotFoundError: No module named '(?P<module>[\w.]+)'")


# The reproducer reached for the network, which no probe has (downloading weights, a dataset,
# a hub model): the build cannot be judged. The failure's last line names the cause in words
# the standard library, urllib3/requests and huggingface_hub use.
NO_NETWORK = "needs the network, which probes do not have"
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable"
    r"|No address associated with hostname|Failed to resolve '|NameResolutionError"
    r"|Max retries exceeded with url|couldn't connect to '?https?://|OfflineModeIsEnabled"
    r"|LocalEntryNotFoundError|socket\.gaierror|^gaierror"
)


# A build that cannot run on the runner's GPU or driver: it has no kernels for the GPU's
# architecture (a CUDA variant that dropped it, or older than the GPU), or its CUDA runtime is
# newer than the driver. Every run on this machine fails so, whatever the build's code does.
NOT_FOR_THIS_GPU = "this build cannot run on this GPU or driver"
_NOT_FOR_THIS_GPU = re.compile(
    r"no kernel image is available for execution on the device"
    r"|NVIDIA driver on your system is too old"
    r"|CUDA driver version is insufficient for CUDA runtime version")


# A name the script uses and never defines, at its top level: the snippet is incomplete (a
# model or input defined elsewhere in the issue). Dynamo rewrites functions, never a script's
# top level, so no build can be the cause there; inside a function it may be (a bug in the
# resumed bytecode after a graph break), and that stays a failure.
INCOMPLETE = "the script fails on its own"
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+, in (?P<where>\S+)')
_LIBRARY = ("site-packages", "dist-packages", "/lib/python3")


# A file the reporter had and the issue does not include (inputs.pt, a checkpoint, an image):
# a relative path, or one in a home or data folder, never torch's own files (Inductor's and
# Triton's live in the run's cache folders, which the runner makes).
_MISSING_FILE = re.compile(
    r"^FileNotFoundError: \[Errno 2\] No such file or directory: '(?P<path>[^']*)'")
_USERS_FOLDERS = ("/home/", "/Users/", "/root/", "/data", "/mnt/", "/content/", "/workspace/",
                  "~", "C:\\")


def missing_input_file(signature: str) -> bool:
    """Whether a failure is a file the script reads and the issue does not include."""
    found = _MISSING_FILE.match(signature)
    if found is None:
        return False
    path = found["path"]
    return not path.startswith("/") or path.startswith(_USERS_FOLDERS)


def top_level_of_script(output: str) -> bool:
    """Whether the last traceback's last frame is a script's top level (`in <module>` of a
    file that is no library's)."""
    traceback = _last_traceback(output)
    frames = [m for m in map(_FRAME.match, traceback[0] if traceback else ()) if m]
    if not frames:
        return False
    last = frames[-1]
    return last["where"] == "<module>" and not any(part in last["file"] for part in _LIBRARY)


# A script that stopped at its own usage error: argparse's (`usage: ...` then `repro.py:
# error: the following arguments are required: --size`, exit 2) or click's (`Usage: ...`,
# `Error: Missing option '--size'`). It was not given the command-line arguments it needs (or
# was given ones it refuses): the build is untestable, as every build would fail alike
# ("not a regression").
USAGE_ERROR = "needs command-line arguments"
_USAGE_LINE = re.compile(r"^usage: ", re.MULTILINE | re.IGNORECASE)
_USAGE_ERROR = re.compile(r"^(?:\S+: error: |Error: (?:Missing|No such|Invalid value|Got "
                          r"unexpected))(?P<message>.*)$", re.MULTILINE)


def usage_error(output: str) -> str | None:
    """The line that says why a script refused its command line, or None."""
    if _USAGE_LINE.search(output) is None:
        return None
    found = _USAGE_ERROR.search(output)
    return found[0].strip()[:200] if found is not None else None


# Python reports a script that does not compile without a traceback: where, then the error.
_COMPILE_ERROR = re.compile(
    r'^  File "(?P<file>[^"]+)", line \d+\n(?:.*\n){0,4}?'
    r"(?P<error>(?:SyntaxError|IndentationError|TabError): .*)$", re.MULTILINE)


def script_does_not_compile(output: str) -> str | None:
    """The compile error of a script that never started (`SyntaxError: ...`), or None."""
    found = _COMPILE_ERROR.search(output)
    if found is None or any(part in found["file"] for part in _LIBRARY):
        return None
    return found["error"][:300]


def read_metric(output: str, pattern: str) -> float | None:
    """The last number the metric regex captures in the output (its first group, else the match)."""
    value: float | None = None
    for match in re.finditer(pattern, output, flags=re.MULTILINE):
        text = match.group(1) if match.groups() else match.group(0)
        try:
            value = float(text)
        except (TypeError, ValueError):
            continue
    return value


def _judge_metric(output: str, policy: Policy) -> Judgement:
    assert policy.metric is not None
    value = read_metric(output, policy.metric)
    if value is None:
        seen = re.search(policy.metric, output, flags=re.MULTILINE)
        if seen is not None:
            text = seen.group(1) if seen.groups() else seen.group(0)
            return Judgement(Verdict.SKIP, f"metric {policy.metric!r} matched {text!r}, which "
                             "is not a number")
        return Judgement(Verdict.SKIP, f"metric {policy.metric!r} not found in the output")
    threshold = policy.threshold if policy.threshold is not None else 0.0
    if value != value or value > threshold:  # NaN is bad too
        signature = f"metric > {threshold:g}"
        return Judgement(Verdict.BAD, f"metric {value:g} > {threshold:g}", signature, value)
    return Judgement(Verdict.GOOD, f"metric {value:g} <= {threshold:g}", None, value)


# What the namespace sandbox says when it cannot set a run up (bot/adapters/sandbox_launcher.py).
_SANDBOX_FAILED = re.compile(r"^torch-bisect-bot sandbox: (.+)$", re.MULTILINE)


def _last_words(output: str) -> str:
    """The last line a run printed, cut short: what a failing run without a traceback said."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


def judge(result: RunResult, policy: Policy) -> Judgement:
    """Verdict of one run, before any signature comparison (see `against_signature`)."""
    if result.stage is Stage.INSTALL:
        return Judgement(Verdict.SKIP, f"install failed: {result.error or 'unknown error'}")
    if result.stage is Stage.IMPORT:
        return Judgement(Verdict.SKIP, f"import torch failed: {result.error or 'unknown error'}")
    if result.timed_out:
        return Judgement(policy.on_timeout, f"timed out after {result.seconds:.0f} s", "timeout")
    code = result.exit_code
    # Everything below reads the output without colour codes: a coloured number is no number,
    # and a coloured exception line (`ESC[1;35mAttributeError`) no exception line.
    printed = without_escapes(result.output)
    output = rank_view(printed)
    if result.signal is not None:
        crash = f"crash ({_signal_name(result.signal)})"
        # `--match` defines BAD for a crash too: one whose output it does not match is
        # another failure, or a later crash would define the failure and hide the matched one.
        if policy.match is not None and re.search(policy.match, output) is None:
            return Judgement(Verdict.SKIP, f"{MATCH_MISSED}{policy.match!r}; "
                             f"{DIFFERENT_FAILURE}{crash}", crash)
        if policy.match is not None:
            return Judgement(Verdict.BAD, f"{crash}, output matches {policy.match!r}",
                             policy.match)
        return Judgement(Verdict.BAD, crash, crash)
    if code == 0 and policy.metric is not None:
        return _judge_metric(output, policy)
    if code == 0:
        return Judgement(Verdict.GOOD, "exit 0")
    if code == EXIT_SKIP:
        setup = _SANDBOX_FAILED.search(printed)
        if setup is not None:  # the sandbox's own exit 125: the script never started
            return Judgement(Verdict.SKIP, f"the sandbox could not run it: {setup[1][:200]}")
        return Judgement(Verdict.SKIP, "the reproducer asked to skip (exit 125)")
    # Under torchrun a rank's exit 125 comes back as torchrun's exit 1; its summary names it.
    root = _ROOT_CAUSE.search(printed)
    if root is not None and int(root["code"]) == EXIT_SKIP:
        return Judgement(Verdict.SKIP, f"the reproducer asked to skip (exit 125 on rank "
                         f"{root['rank']})")
    traced = failure_signature(output)
    if traced is None and (error := script_does_not_compile(output)):
        return Judgement(Verdict.SKIP, f"{INCOMPLETE}: {error}", error)
    if (code == 2 and traced is None and (refused := usage_error(output))
            and not (policy.match and re.search(policy.match, output))):
        return Judgement(Verdict.SKIP, f"{USAGE_ERROR}: {refused}", refused)
    signature = traced or f"exit {code}"
    matched = bool(policy.match and re.search(policy.match, signature))
    said = _last_words(output) if traced is None else ""
    if _MISSING_API.match(signature) and not matched:
        if policy.missing_api is Verdict.BAD:
            return Judgement(Verdict.BAD, f"API gone from this build: {signature}", signature)
        return Judgement(Verdict.SKIP, f"API not in this build: {signature}", signature)
    missing = _NOT_INSTALLED.match(signature)
    if missing and not matched:
        module = missing["module"].split(".")[0]
        return Judgement(Verdict.SKIP, f"{NOT_INSTALLED}: {module}", signature)
    if _NOT_FOR_THIS_GPU.search(signature) and not matched:
        return Judgement(Verdict.SKIP, f"{NOT_FOR_THIS_GPU}: {signature}", signature)
    if _NETWORK.search(signature) and not matched:
        return Judgement(Verdict.SKIP, f"{NO_NETWORK}: {signature}", signature)
    if (signature.startswith("NameError:") and top_level_of_script(output)
            or missing_input_file(signature)) and not matched:
        return Judgement(Verdict.SKIP, f"{INCOMPLETE}: {signature}", signature)
    if policy.match is not None:
        if re.search(policy.match, output):
            return Judgement(Verdict.BAD, f"output matches {policy.match!r}", policy.match)
        return Judgement(Verdict.SKIP, f"{MATCH_MISSED}{policy.match!r}; {DIFFERENT_FAILURE}"
                         f"{signature}", signature)
    # `sys.exit("message")` and a script's own last words: in the reason, not the signature
    # (the same failure may word itself differently from one build to the next).
    return Judgement(Verdict.BAD, f"{signature}: {said}" if said else signature, signature)


# An object's address in its repr (`<function f at 0x7f3a2c1b5e50>`) differs on every run,
# and a printed difference changes its sign or becomes nan or inf from one build to the next.
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|-?\b(?:nan|inf)\b")


def _normalise(signature: str | None) -> str:
    # Numbers in a message (sizes, differences, addresses) vary between builds of one failure.
    return _NUMBER.sub("N", signature or "")


def same_failure(first: str | None, second: str | None) -> bool:
    """Whether two failure signatures name one failure, the numbers in them aside."""
    return _normalise(first) == _normalise(second)


def against_signature(judgement: Judgement, bad_signature: str | None) -> Judgement:
    """A BAD run whose failure differs from the bad end's is SKIP, so the search stays on track."""
    if judgement.verdict is not Verdict.BAD or bad_signature is None:
        return judgement
    if same_failure(judgement.signature, bad_signature):
        return judgement
    return replace(
        judgement, verdict=Verdict.SKIP, reason=f"{DIFFERENT_FAILURE}{judgement.signature}"
    )
