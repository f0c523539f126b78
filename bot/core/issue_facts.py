"""What an issue says about its reproducer: torch and Python versions, CUDA, third-party imports."""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from bot.core.errors import UserError
from bot.core.issue_markdown import code_spans
from bot.core.safe_markdown import code_span

# In priority order: torch/utils/collect_env.py's "PyTorch version:" line is the most reliable,
# then its "[pip3] torch==" list, then pip freeze, then "torch: X" and pip list "torch X".
# Matched against one stripped line at a time; every pattern is anchored and has no nested
# repetition, so a hostile line costs linear time.
_TORCH_VERSION_PATTERNS = (
    re.compile(r"PyTorch version\s*:\s*(\S+)", re.IGNORECASE),
    re.compile(r"\[(?:pip3?|conda)\]\s+torch\s*==\s*(\S+)", re.IGNORECASE),
    re.compile(r"torch\s*==\s*(\S+)", re.IGNORECASE),
    re.compile(r"(?:py)?torch(?:\s+version)?\s*:\s*(\S+)", re.IGNORECASE),
    re.compile(
        r"(?:\[(?:pip3?|conda)\]\s+)?(?:py)?torch\s+(?:version\s+)?v?(\d\S*)", re.IGNORECASE
    ),
    # "torch2.4.0.dev20240611+cu121", a wheel's "torch-2.4.0.dev20240609+cu121-cp38-..."
    re.compile(r"(?:py)?torch-?v?(\d+\.\d+\.\d+[0-9A-Za-z.+]*)", re.IGNORECASE),
)
# A nightly named anywhere in the prose ("in torch nightly versions (2.1.0.dev20230825)"),
# also as pip names a distribution's files ("the nightly release (`torch-2.6.0.dev20241115+cu124`)",
# pytorch/pytorch#140884), a wheel's too ("torch-2.6.0.dev20241115+cu124-cp311-...whl").
_NIGHTLY_IN_PROSE = re.compile(r"(?:(?<=[Tt]orch-)|(?<![\w.+-]))v?(\d{1,2}\.\d{1,3}\.\d{1,3}"
                               r"\.dev\d{8}(?:\+[a-z0-9.]{1,20})?)(?=-cp3|(?![\w.+-]*\w))")
# collect_env writes "Python version: 3.12.3 (main, ...) [GCC ...] (64-bit runtime)".
_PYTHON_PATTERNS = (
    re.compile(r"Python version\s*:\s*(\d+\.\d+)", re.IGNORECASE),
    re.compile(r"python\s*[:=]=?\s*v?(\d+\.\d+)", re.IGNORECASE),
)
# A build the reporter says was good, from prose: "works in torch 2.12.0", "worked fine on
# 2.12.1", "regression from 2.12", "last known good: 2.13.0.dev20260501", "works till
# 2.13.0.dev20260520", "PyTorch 2.12 and below, it works", "no issue on 2.12.1", "runs fine on
# `torch-2.5.1`" (pip's spelling, pytorch/pytorch#140884). A bare version
# must be X.Y.Z of torch's majors so far, as "works with 3.11.4" is more likely Python;
# "regressed since X" is left out, as it names the first bad one. Searched in one prose line
# at a time; no pattern nests a repetition. A match the words before it deny ("does not work
# with torch 2.12.1", "never worked in 2.12.1 either") is not what worked (`_DENIED`).
_GOOD_VERSION = r"v?(\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:\.dev\d{8})?(?:\+[a-z0-9.]{1,20})?)\b"
_WORKS = (r"\b(?:works?|worked|working|pass(?:es|ed)?|(?:was|is)\s+(?:fine|ok|correct)"
          r"|(?:runs?|ran)\s+(?:fine|well|correctly|ok))")
_WORKED = (_WORKS + r"(?:\s+(?:fine|well|correctly|ok|as\s+expected))?"
           r"\s+(?:in|on|with|under|using)\s+")
_TORCH_WORD = r"(?:py)?torch(?:[- ]nightly)?(?:-|\s*)(?:version\s+|<=?\s*|==\s*)?"
_BARE_VERSION = r"v?([12]\.\d{1,3}\.\d{1,3}(?:\.dev\d{8})?(?:\+[a-z0-9.]{1,20})?)\b"
_TORCH_OR_BARE = "(?:" + _TORCH_WORD + _GOOD_VERSION + "|" + _BARE_VERSION + ")"
_GOOD_PATTERNS = tuple(re.compile(pattern, re.IGNORECASE) for pattern in (
    r"\blast\s+(?:known\s+)?(?:good|working)(?:\s+(?:version|build|nightly))?\s*[:=]?\s*"
    r"(?:(?:py)?torch\s+)?" + _GOOD_VERSION,
    # "works till 2.1.0.dev20230303+cpu nightly, fails from 2.1.0.dev20230304+cpu"
    _WORKS + r"(?:\s+(?:fine|well|correctly|ok))?\s+(?:till|until|up\s+(?:to|until)|through)\s+"
    r"(?:(?:the\s+)?(?:py)?torch(?:[- ]nightly)?\s+)?" + _GOOD_VERSION,
    _WORKED + _TORCH_WORD + _GOOD_VERSION,
    _WORKED + _BARE_VERSION,
    r"\bregress(?:ion|ed)\s+(?:from|after)\s+(?:(?:py)?torch\s+)?" + _GOOD_VERSION,
    r"\bregress(?:ion|ed)?\s+between\s+" + _TORCH_OR_BARE,
    # "On PyTorch 2.1.2, it works perfectly", "PyTorch 2.9 and below, it works", "In pytorch
    # 2.11 compilation worked correctly"
    r"(?:\b(?:on|in|with|using)\s+)?\b(?:py)?torch\s+" + _GOOD_VERSION
    + r"(?:\s+(?:and|or)\s+(?:below|earlier|older|before|lower))?,?\s+"
    r"(?:(?!(?:not|never|no|nothing)\b)[a-z]+\s+)?(?:works?|worked|passe[sd]|runs?\s+fine"
    r"|(?:is|was)\s+(?:fine|ok|correct))\b",
    # "v2.3 is not affected", "torch 2.5.1 is not affected"; not "CUDA 12.4 is not affected"
    r"(?:(?:py)?torch\s+v?|(?<![\w.])v|^)(\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:\.dev\d{8})?)"
    r"\s+(?:is|was)\s+not\s+affected\b",
    # "No issue on 2.5.1", "no such error with torch 2.5"
    r"\bno\s+(?:such\s+)?(?:issues?|problems?|errors?|failures?)\s+(?:on|in|with|using)\s+"
    + _TORCH_OR_BARE,
    # "the issue doesn't happen on torch 2.2.1" (pytorch/pytorch#121288), "does not occur
    # with 2.5.1", "didn't reproduce in torch 2.4"
    r"\b(?:does|did|do)(?:\s+not|n['’]t)\s+(?:happen|occur|reproduce|repro|show\s+up)"
    r"\s+(?:on|in|with|under|using)\s+" + _TORCH_OR_BARE,
    # "after upgrading to PyTorch 2.6.0 from 2.5.1", "upgraded from torch 2.5.1 to 2.6.0"
    r"\b(?:upgrad|updat|switch)(?:e|ed|es|ing)?\s+(?:to\s+[^\s,;]+(?:\s+[^\s,;]+)?\s+)?"
    r"from\s+" + _TORCH_OR_BARE,
))
# Words that deny what follows them: "does not work with", "doesn't work in", "never worked
# in", "no longer works on", "fail to pass with"; up to two words between ("did not even
# work with").
_DENIED = re.compile(r"(?:\bnot|n['’]t|\bnever|\bno\s+longer|\bfail(?:s|ed|ing)?\s+to)"
                     r"(?:\s+\w+){0,2}\s*$", re.IGNORECASE)
_LONGEST_VERSION = 80  # longer tokens are noise; bounds the work packaging's regex does
_CUDA_DEVICE = re.compile(r"cuda(?::\d*)?")
# Attributes named `cuda` that work without a GPU (torch.version.cuda is None on CPU builds).
_HARMLESS_CUDA_OWNERS = frozenset({"version", "backends"})

# Import name -> the name pip installs it by, where they differ.
PIP_NAMES = {
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "cv2": "opencv-python",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "google": "protobuf",
    "Crypto": "pycryptodome",
    "serial": "pyserial",
    "jwt": "pyjwt",
    "fitz": "pymupdf",
    "dotenv": "python-dotenv",
    "flash_attn": "flash-attn",
    "pytorch_lightning": "pytorch-lightning",
    "OpenGL": "PyOpenGL",
}
# Shipped inside the torch wheel or pinned exactly by it (triton): never installed separately.
_PART_OF_TORCH = frozenset({"torch", "functorch", "triton", "torchgen", "__future__"})
# Built and published with each nightly on the same index, so they must match torch's date.
COMPANIONS = frozenset({"torchvision", "torchaudio", "torchao"})


# `torch==2.7.0` inside a sentence ("it fails when using `torch==2.7.0`"), when no line says
# more: the patterns above are anchored at a line's start.
_PINNED_IN_PROSE = re.compile(r"(?<![\w.-])torch\s?==\s?v?(\d{1,2}\.\d{1,3}[0-9A-Za-z.+]{0,40})")


# collect_env's "OS: Microsoft Windows 11 Pro", "OS: macOS 14.1.1 (arm64)".
_OS_LINE = (re.compile(r"OS\s*:\s*(.{1,80})"),)


def reported_platform(text: str) -> str | None:
    """"Windows" or "macOS" where the issue's collect_env reports one; None for Linux or no
    report. The builds bisected are Linux ones, where a bug of those platforms does not show."""
    return _first_match(text, _OS_LINE, _platform)


def _platform(value: str) -> str | None:
    lowered = value.lower()
    if "windows" in lowered:
        return "Windows"
    if "macos" in lowered or "mac os" in lowered or "darwin" in lowered:
        return "macOS"
    return None


def reported_torch_version(text: str) -> str | None:
    """The torch version the reporter names, e.g. "2.13.0.dev20260521+cu130", or None."""
    found = _first_match(text, _TORCH_VERSION_PATTERNS, _valid_version)
    if found is None:
        for line in text.split("\n"):
            pinned = _PINNED_IN_PROSE.search(line[:1000])
            if pinned and _valid_version(pinned[1].rstrip(".,;:)")):
                return pinned[1].rstrip(".,;:)")
    return found


def nightly_in_prose(prose: str, good: str | None = None) -> str | None:
    """The first nightly the prose names that is not the one it says worked, or None: where
    no version report says which build the reporter ran."""
    for line in prose.split("\n"):
        # A wheel's URL writes the local version's "+" as "%2B".
        for found in _NIGHTLY_IN_PROSE.finditer(line[:1000].replace("%2B", "+")):
            version = found[1].rstrip(".")
            if version != good:
                return version
    return None


def reported_good(prose: str) -> tuple[str, str] | None:
    """A torch version the reporter says worked, and the words that say so, or None."""
    # Emphasis and code spans around a version ("On **PyTorch 2.1.2**") are not words.
    lines = [line[:1000].replace("*", "").replace("`", "") for line in prose.split("\n")]
    for pattern in _GOOD_PATTERNS:
        for line in lines:
            for match in pattern.finditer(line):
                version = next((group for group in match.groups() if group), "")
                if (_valid_version(version) is not None
                        and not _DENIED.search(line[max(0, match.start() - 40):match.start()])
                        and not line[match.end():].lstrip(" )").lower().startswith("either")):
                    return version, match.group(0).strip()
    return None


# The questions of this repository's issue form (.github/ISSUE_TEMPLATE/bisect.yml), by the
# option each answers. GitHub writes a form's answers into the issue body as a `### <label>`
# heading followed by the answer, or "_No response_" for one left empty.
FORM_QUESTIONS = {
    "last known good version": "good",
    "first known bad version": "bad",
    "variant": "variant",
    "packages": "packages",
}
_NO_RESPONSE = "_No response_"
# The form's first variant choice (.github/ISSUE_TEMPLATE/bisect.yml): no answer. A default
# that named a variant (it was cu130) overrode the repository's configured one and the variant
# of the build the issue reports.
FORM_DEFAULT = "the repository's default"


def form_answers(prose: str) -> dict[str, str]:
    """The options an issue form answered: {"good": "2.12.0", "variant": "cu130", ...}."""
    answers: dict[str, str] = {}
    asked: str | None = None
    for line in prose.split("\n"):
        text = line.strip()
        if text.startswith("#"):
            heading = text.lstrip("#").strip().lower()
            asked = FORM_QUESTIONS.get(heading) if text.startswith("### ") else None
        elif text and asked is not None:
            if text != _NO_RESPONSE and asked not in answers:
                answers[asked] = text[:200]
            asked = None
    return answers


_WHEEL_PYTHON = re.compile(r"-cp3(\d{1,2})-(?:cp3\d{1,2}|abi3)")
_PYTHON_IN_PROSE = re.compile(r"\bpython\s?(3\.\d{1,2})(?![\d/\w]|\.\w)", re.IGNORECASE)


def reported_python(text: str, prose: str = "") -> str | None:
    """The reporter's Python as "X.Y" (what selects the wheel's cpXY tag), or None: a version
    report's, else the tag of a wheel the issue names, else "python3.8" in its prose."""
    found = (_first_match(text, _PYTHON_PATTERNS, _valid_python)
             or next((f"3.{tag[1]}" for tag in _WHEEL_PYTHON.finditer(text)), None))
    if found is None:  # prose that names one Python only ("this is on python3.8")
        spoken = {match[1] for match in _PYTHON_IN_PROSE.finditer(prose)}
        found = _valid_python(spoken.pop()) if len(spoken) == 1 else None
    return found


def _first_match(
    text: str, patterns: tuple[re.Pattern[str], ...], valid: Callable[[str], str | None]
) -> str | None:
    """The first valid capture of the first pattern, in pattern order, then line order."""
    # Bug-report templates list versions as Markdown bullets: " - PyTorch Version: 2.12.0".
    lines = [line.strip().lstrip("-*+ \t") for line in text.split("\n")]
    for pattern in patterns:
        for line in lines:
            match = pattern.match(line)
            if match is None:
                continue
            value = valid(match.group(1).rstrip(".,;:)"))
            if value is not None:
                return value
    return None


def _valid_version(token: str) -> str | None:
    """The token as written when packaging accepts it as a PEP 440 version."""
    if len(token) > _LONGEST_VERSION:
        return None
    try:
        Version(token)
    except InvalidVersion:
        return None
    return token


def _valid_python(token: str) -> str | None:
    """A Python 3 "X.Y", or None."""
    major, _, minor = token.partition(".")
    return f"{major}.{int(minor)}" if major == "3" and minor.isdigit() else None


def needs_cuda(nodes: Iterable[ast.AST]) -> bool:
    """Whether the script asks for a CUDA device: "cuda" strings, .cuda(), torch.cuda.*, triton.

    Reading the syntax tree, not the text, keeps comments out; a script that falls back to the
    CPU ("cuda" if torch.cuda.is_available() else "cpu") still counts, since the report came
    from a GPU run.
    """
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _CUDA_DEVICE.fullmatch(node.value):
                return True
        elif isinstance(node, ast.Attribute) and node.attr == "cuda":
            owner = node.value
            if not (isinstance(owner, ast.Attribute) and owner.attr in _HARMLESS_CUDA_OWNERS):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and "triton" in _top_modules(node):
            return True  # Triton kernels run only on a GPU
    return False


_MPS_DEVICE = re.compile(r"mps(?::\d*)?")


def needs_mps(tree: ast.AST) -> bool:
    """Whether the script runs on Apple's MPS device with nothing else to fall back to: an
    "mps" device or `torch.mps.*` outside an `if`/`x if ... else y` that has an alternative.
    Linux has no MPS, so on every Linux build such a script fails alike (or skips its own
    bug), which would read as "not a regression" (or "not reproduced")."""
    def uses(node: ast.AST, guarded: bool) -> bool:
        if isinstance(node, (ast.If, ast.IfExp)):
            branch_guarded = guarded or bool(node.orelse)
            body = node.body if isinstance(node.body, list) else [node.body]
            orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
            return (uses(node.test, True)
                    or any(uses(child, branch_guarded) for child in [*body, *orelse]))
        if not guarded:
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _MPS_DEVICE.fullmatch(node.value)):
                return True
            if (isinstance(node, ast.Attribute) and node.attr == "mps"
                    and isinstance(node.value, ast.Name) and node.value.id == "torch"):
                return True
        return any(uses(child, guarded) for child in ast.iter_child_nodes(node))

    return uses(tree, False)


def third_party_imports(nodes: Iterable[ast.AST]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pip names to install, nightly companions such as torchvision), each sorted."""
    packages: set[str] = set()
    companions: set[str] = set()
    for node in nodes:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for module in _top_modules(node):
            if module in COMPANIONS:
                companions.add(module)
            elif module not in _PART_OF_TORCH and module not in sys.stdlib_module_names:
                packages.add(PIP_NAMES.get(module, module))
    return tuple(sorted(packages)), tuple(sorted(companions))


# Variables an issue says to run its script with (`TORCHINDUCTOR_FREEZING=1 python repro.py`,
# `export TORCH_LOGS=+dynamo`): torch's, Triton's and CUDA's switches only. Not the folders
# and search paths (`*_DIR`, `*_HOME`, `*_PATH`): the runner sets those for each run.
_ENV_NAME = re.compile(
    r"(?:TORCH|TORCHINDUCTOR|TORCHDYNAMO|TORCH_COMPILE|PYTORCH|TRITON|INDUCTOR)_[A-Z0-9_]+"
    r"|CUDA_LAUNCH_BLOCKING|CUBLAS_WORKSPACE_CONFIG")
_ENV_VALUE = r"(?:\"[^\"\n`|]{0,200}\"|'[^'\n`|]{0,200}'|[^\s'\"`|]{1,200})"
_ENV_ASSIGNMENT = re.compile(rf"\b([A-Z][A-Z0-9_]*)=({_ENV_VALUE})")
_ENV_COMMAND = re.compile(
    rf"((?:\b[A-Z][A-Z0-9_]*={_ENV_VALUE}[ \t]+)+)(?:python[0-9.]*|torchrun)\b")
_ENV_EXPORT = re.compile(rf"^[ \t]*export[ \t]+([A-Z][A-Z0-9_]*={_ENV_VALUE})[ \t]*$",
                         re.MULTILINE)
MAX_ENV = 10


def env_name_allowed(name: str) -> bool:
    """Whether a reproducer may be run with this variable set: torch's, Triton's and CUDA's
    switches, not the folders and search paths the runner sets."""
    return bool(_ENV_NAME.fullmatch(name)) and not name.endswith(("_DIR", "_HOME", "_PATH"))


def given_env(words: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Variables a triager names (`--env NAME=VALUE`, `env="NAME=VALUE NAME=VALUE"`), checked
    as the issue's are: torch's, Triton's and CUDA's switches only; UserError otherwise."""
    found: dict[str, str] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if not equals or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            raise UserError(f"`{word[:60]}`: give variables as NAME=VALUE.")
        if not env_name_allowed(name):
            raise UserError(f"{name}: only torch's, Triton's and CUDA's switches can be set "
                            "(TORCH*, PYTORCH_*, TRITON_*, CUDA_LAUNCH_BLOCKING, "
                            "CUBLAS_WORKSPACE_CONFIG), never a folder or search path.")
        if len(value) > 200 or any(c in value for c in "`|\n"):
            raise UserError(f"{name}: a value is at most 200 characters, without ` or |.")
        found[name] = value
    if len(found) > MAX_ENV:
        raise UserError(f"at most {MAX_ENV} variables.")
    return tuple(found.items())


# The minifier's switches: an issue shows them from the reporter's own attempt to shrink the
# repro, and every probe run with them would minify its failure instead of just failing.
_MINIFIER = re.compile(r"TORCHDYNAMO_REPRO_[A-Z0-9_]+")


def reported_env(text: str) -> tuple[tuple[str, str], ...]:
    """The variables the issue runs its script with, in the order it gives them (the last
    value of a name wins), as (name, value) pairs; only torch's, Triton's and CUDA's, and not
    the minifier's (a triager can still give those)."""
    found: dict[str, str] = {}
    for match in (*_ENV_COMMAND.finditer(text), *_ENV_EXPORT.finditer(text)):
        for name, value in _ENV_ASSIGNMENT.findall(match.group(1)):
            if env_name_allowed(name) and not _MINIFIER.fullmatch(name):
                found[name] = value.strip("\"'")
    return tuple(found.items())[:MAX_ENV]


# How many processes the issue launches its script on (`torchrun --nproc_per_node=2 repro.py`,
# `python -m torch.distributed.run ...`): a distributed reproducer run as `python repro.py`
# fails on every build alike ("environment variable RANK expected"), which reads as "not a
# regression". A count, or what torchrun resolves at run time: gpu, cpu or auto.
_LAUNCHER = re.compile(
    r"(?:\btorchrun|\bpython[0-9.]*[ \t]+-m[ \t]+torch\.distributed\.(?:run|launch))"
    r"(?P<options>(?:[ \t]+-[-\w]+(?:(?:=|[ \t]+)(?!-)[^\s'\"`|;&]+)?){0,20})"
    r"[ \t]+(?:[\w./-]+/)?[\w.-]+\.py\b")
_NPROC = re.compile(r"--nproc[-_]per[-_]node(?:=|[ \t]+)(\d{1,3}|gpu|cpu|auto)\b")
_NNODES = re.compile(r"--nnodes(?:=|[ \t]+)(\d{1,3})(?::\d{1,3})?\b")
MAX_PROCESSES = 16
_NAMED_COUNTS = ("gpu", "cpu", "auto")  # what torchrun resolves at run time
PROCESSES_WANTED = f"1 to {MAX_PROCESSES}, or gpu, cpu or auto, as torchrun's --nproc_per_node"


def valid_processes(text: str) -> bool:
    """Whether `text` is a process count torchrun takes and the bot runs: 1-16, gpu, cpu or
    auto (the `--nproc-per-node` option, the `nproc=` command option, a case's key)."""
    return text in _NAMED_COUNTS or (text.isdigit() and 1 <= int(text) <= MAX_PROCESSES)


def gpus_needed(processes: str | None, script: str | None = None) -> int:
    """The GPUs one run of a CUDA reproducer needs: a GPU a process for a count; for a script
    run alone, one, or one for each process it starts itself on a GPU of its own
    (`spawned_gpus`); one for a count torchrun resolves from what the machine has."""
    if processes:
        return int(processes) if processes.isdigit() else 1
    return (spawned_gpus(script) if script else None) or 1


_MAX_SPAWNED = 16


def spawned_gpus(script: str) -> int | None:
    """The processes a script starts itself, a GPU each (`mp.spawn(run, nprocs=8)`, or
    `mp.Process` in a `for rank in range(world_size)` loop, with `world_size = 8`), when each
    takes a GPU of its own (NCCL, `cuda:{rank}`, `torch.cuda.set_device`); None otherwise. A
    script that starts 8 ranks on one GPU fails alike on every build (invalid device
    ordinal)."""
    if "spawn" not in script and "Process" not in script and "start_processes" not in script:
        return None
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError, RecursionError):
        return None
    nodes = list(ast.walk(tree))
    if not any(_per_rank_gpu(node) for node in nodes):
        return None
    constants = {target.id: node.value.value for node in nodes if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)
                 for target in node.targets if isinstance(target, ast.Name)}

    def count(value: ast.expr | None) -> int | None:
        if isinstance(value, ast.Constant) and isinstance(value.value, int):
            number: object = value.value
        elif isinstance(value, ast.Name):
            number = constants.get(value.id)
        else:
            return None
        return number if isinstance(number, int) and 1 < number <= _MAX_SPAWNED else None

    for node in nodes:
        if isinstance(node, ast.Call) and _called(node.func) in ("spawn", "start_processes"):
            given = {keyword.arg: keyword.value for keyword in node.keywords}
            found = count(given.get("nprocs", node.args[2] if len(node.args) > 2 else None))
            if found:
                return found
        if (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
                and _called(node.iter.func) == "range" and len(node.iter.args) == 1
                and any(isinstance(inner, ast.Call) and _called(inner.func) == "Process"
                        for inner in ast.walk(node))):
            found = count(node.iter.args[0])
            if found:
                return found
    return None


def _per_rank_gpu(node: ast.AST) -> bool:
    """A sign that each process takes a GPU of its own."""
    if isinstance(node, ast.Constant) and node.value == "nccl":
        return True
    if isinstance(node, ast.JoinedStr):  # f"cuda:{rank}"
        return any(isinstance(part, ast.Constant) and str(part.value).endswith("cuda:")
                   for part in node.values)
    return isinstance(node, ast.Call) and _called(node.func) == "set_device"


def reported_processes(text: str) -> str | None:
    """The processes the issue runs its script on with torchrun, as torchrun's
    `--nproc_per_node` takes them ("2", "gpu"), or None where it runs it with `python`.
    Several nodes become as many processes on one node (the same world size); at most 16."""
    found = _LAUNCHER.search(text.replace("\\\n", " "))
    if found is None:
        return None
    nproc = _NPROC.search(found["options"])
    count = nproc[1] if nproc else "1"  # torchrun's default
    nodes = _NNODES.search(found["options"])
    if count.isdigit():
        total = int(count) * (int(nodes[1]) if nodes else 1)
        return str(min(max(total, 1), MAX_PROCESSES))
    return count


# What torchrun sets for each process; a script that reads them expects to be started by it.
_LAUNCHER_VARIABLES = frozenset({"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"})
# Calls that start a script's own processes (mp.spawn, multiprocessing.Process, ...).
_SELF_STARTING = frozenset({"spawn", "start_processes", "Process", "elastic_launch"})
# torchrun's count where a script needs it and the issue names none: the smallest group.
GUESSED_PROCESSES = "2"


def needs_launcher(nodes: Iterable[ast.AST]) -> bool:
    """Whether the script expects torchrun without the issue saying so: it reads RANK,
    WORLD_SIZE or LOCAL_RANK, or starts a process group (or a device mesh) without a rank of
    its own, and neither sets those variables nor starts its own processes. Run as `python
    script`, it fails alike on every build ("environment variable RANK expected")."""
    reads = starts = ranked = False
    for node in nodes:
        if isinstance(node, ast.Subscript) and _names_launcher_variable(node.slice):
            if isinstance(node.ctx, ast.Store) and _is_environ(node.value):
                return False  # it sets them itself
            reads = reads or _is_environ(node.value)
        elif isinstance(node, ast.Call):
            name = _called(node.func)
            keywords = {keyword.arg for keyword in node.keywords}
            on_environ = _is_environ(getattr(node.func, "value", None))
            if name in _SELF_STARTING or name == "putenv" or (on_environ and name == "update"):
                return False  # it starts its own processes, or sets their variables
            named = bool(node.args) and _names_launcher_variable(node.args[0])
            if named and on_environ and name == "setdefault":
                return False
            reads = reads or (named and (name == "getenv" or (on_environ and name == "get")))
            if name == "init_process_group":
                ranked = ranked or "rank" in keywords or "store" in keywords
                starts = starts or not ("rank" in keywords or "store" in keywords)
            if name in ("init_device_mesh", "DeviceMesh"):
                starts = True
    return reads or (starts and not ranked)


def _called(func: ast.expr) -> str:
    """The name a call is made by: `spawn` for `mp.spawn(...)` and `spawn(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _is_environ(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _names_launcher_variable(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in _LAUNCHER_VARIABLES


def script_installs(code: str) -> tuple[str, ...]:
    """What a script needs installed beside torch: its third-party packages, then torch's
    companions (as Reproducer.installs); nothing for a script that does not parse."""
    try:
        nodes = list(ast.walk(ast.parse(code)))
    except SyntaxError:
        return ()
    packages, companions = third_party_imports(nodes)
    return (*packages, *companions)


def imports_torch(nodes: Iterable[ast.AST]) -> bool:
    """Whether the script imports torch itself (import torch, import torch.nn, from torch ...)."""
    return any(
        "torch" in _top_modules(node)
        for node in nodes
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def _top_modules(node: ast.Import | ast.ImportFrom) -> set[str]:
    """Top-level module names of an absolute import; relative imports name local files."""
    if isinstance(node, ast.ImportFrom):
        return {node.module.split(".")[0]} if node.module and node.level == 0 else set()
    return {alias.name.split(".")[0] for alias in node.names}


# The reproducer's own command-line arguments, as the issue runs it (`python repro.py --size
# 8`, `torchrun --nproc_per_node=2 repro.py --bs 4`): a script whose argparse requires one
# failed on every build alike ("the following arguments are required"), which read as "not a
# regression"; one whose flag has a default ran something else than the issue's case. They
# go to the script as its argv, never through a shell.
MAX_ARGS = 32
MAX_ARGS_CHARS = 1000
# A command's start: at a line's start (after a `$ ` prompt) or a code span's, behind the
# variables it sets.
_COMMAND_START = re.compile(r"^(?:\$[ \t]+)?(?:[A-Za-z_][A-Za-z0-9_]*=\S*[ \t]+)*"
                            r"(?P<command>(?:python[0-9.]*|torchrun)[ \t].*)$")
# Python's options that take a value (`-W ignore`, `-X dev`); the others stand alone.
_PYTHON_VALUED = frozenset({"-W", "-X"})
_LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
# Scripts an issue runs that are not its reproducer.
_NOT_THE_REPRODUCER = frozenset({"collect_env.py", "setup.py"})
# What a shell would have changed before the script saw it: variables, commands, a `*` glob
# (of the reporter's files) and the home folder. The words are passed as they are, so such a
# word is not what the script saw there. (`[1,2]` and `?` match no file, and stay as they are.)
_SHELL_EXPANDS = re.compile(r"[$`*]|(?:^|=)~")
_REDIRECT_FD = re.compile(r"(?<=[ \t])\d+(?=[<>])")  # `2>&1`: the 2 is no argument


def checked_args(words: Iterable[str]) -> tuple[str, ...]:
    """The reproducer's arguments, when they can be passed: at most MAX_ARGS words of
    MAX_ARGS_CHARS in all, with no control characters; UserError otherwise. They are the
    script's argv in its sandbox (never a shell's), so no word can reach further than the
    script itself can."""
    found = tuple(words)
    if len(found) > MAX_ARGS or sum(len(word) + 1 for word in found) > MAX_ARGS_CHARS:
        raise UserError(f"the reproducer's arguments are at most {MAX_ARGS} words and "
                        f"{MAX_ARGS_CHARS} characters.")
    for word in found:
        if any(ord(char) < 32 or ord(char) == 127 for char in word):
            raise UserError(f"`{word[:40]!r}`: an argument holds no control characters "
                            "(newlines, tabs, escapes).")
    return found


def split_args(text: str) -> tuple[str, ...]:
    """Arguments written as a shell would split them (`--size 8 --name 'a b'`), checked as
    `checked_args`; UserError for an unclosed quote."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise UserError(f"the arguments `{text[:60]}` do not split into words: {error}.") \
            from None
    return checked_args(words)


class ScriptRun(NamedTuple):
    """A command of the issue's that runs a script."""

    script: str  # its file name
    args: tuple[str, ...]
    line: str  # the command as written, to say which one was not used


def command_lines(prose: Iterable[str], blocks: Iterable[str]) -> Iterator[ScriptRun]:
    """Each command that runs a script: in the code spans of prose lines, and on the lines of
    shell blocks, each a whole command (prose outside code spans is words: "python repro.py
    fails on ..."). Python's options and torchrun's go before the script and are not its
    arguments; a command ends at `|`, `;`, `&&`, a redirection or a comment; `python -c` and
    modules other than torchrun's run no script."""
    texts = [line[start:end].strip("`").strip() for line in prose
             for start, end in code_spans(line[:2000])[:20]]
    texts += [line for block in blocks for line in block.replace("\\\n", " ").split("\n")]
    for text in texts:
        found = _COMMAND_START.match(text.strip())
        command = _script_and_args(found["command"]) if found is not None else None
        if found is not None and command is not None:
            yield ScriptRun(*command, found["command"].strip()[:200])


def _script_and_args(command: str) -> tuple[str, tuple[str, ...]] | None:
    lexer = shlex.shlex(_REDIRECT_FD.sub("", command[:2000]), posix=True,
                        punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        for word in lexer:
            if word and (word[0] in ";&|<>()" or word.startswith("#")):
                break
            words.append(word)
    except ValueError:  # an unclosed quote: not a command one can read
        return None
    launcher = words[0] == "torchrun"
    index = 1
    while index < len(words):
        word = words[index]
        if word.endswith(".py") and not word.startswith("-"):
            return word.rsplit("/", 1)[-1], tuple(words[index + 1:])
        if launcher:
            index += 1  # torchrun's options and their values
        elif word == "-m" and index + 1 < len(words) and words[index + 1] in _LAUNCHER_MODULES:
            launcher, index = True, index + 2
        elif word.startswith("-") and word[:2] not in ("-c", "-m"):
            index += 2 if word in _PYTHON_VALUED else 1
        else:
            return None
    return None


def reported_args(commands: Iterable[ScriptRun], is_the_reproducer: Callable[[str], bool]
                  ) -> tuple[tuple[str, ...], str | None]:
    """The arguments the issue runs its reproducer with, or none, and then why the ones a
    command gives were not used (Markdown; None where no command gave any). They are taken
    only when every command that runs it (the scripts `is_the_reproducer` accepts by name)
    gives the same ones, and a shell would not have changed them ($VAR, globs, `~`), and
    `checked_args` takes them. Two commands with different arguments (what works, what fails)
    leave the choice to whoever asks for the bisection."""
    runs: dict[tuple[str, ...], ScriptRun] = {}
    for run in commands:
        if run.script not in _NOT_THE_REPRODUCER and is_the_reproducer(run.script):
            runs.setdefault(run.args, run)
    if len(runs) > 1:
        shown = ", ".join(code_span(run.line) for run in list(runs.values())[:3])
        return (), (f"the issue runs the reproducer with different arguments ({shown}), so "
                    "none of them are used: which run fails is not clear")
    if not runs:
        return (), None
    run = runs.popitem()[1]
    expanded = next((word for word in run.args if _SHELL_EXPANDS.search(word)), None)
    if expanded is not None:
        return (), (f"the arguments of {code_span(run.line)} are not used: a shell would have "
                    f"changed {code_span(expanded)} (a variable, a glob or `~`) before the "
                    "script saw it")
    try:
        return checked_args(run.args), None
    except UserError as error:
        return (), (f"the arguments of {code_span(run.line)} are not used: "
                    f"{str(error).rstrip('.')}")
