"""The source of a synthetic `torch` package whose compiled numerics change on planted builds."""

from __future__ import annotations

import json
from typing import Any

# Which torch.compile backend exercises which subsystem, in the order the real stack layers them
# (torch/_dynamo/backends: eager runs Dynamo only, aot_eager adds AOTAutograd, the decomp variant
# adds decompositions and the partitioner, inductor adds code generation).
BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")

INIT = '''"""A synthetic torch built by torch-bisect-bot's mirror: just enough to bisect offline."""
import json as _json
from pathlib import Path as _Path

__version__ = {version!r}
_BEHAVIOUR = _json.loads((_Path(__file__).parent / "_behaviour.json").read_text())

from torch import cuda, testing, version  # noqa: E402
from torch._compile import compile  # noqa: E402

float32 = "float32"
bfloat16 = "bfloat16"
'''

VERSION = '''__version__ = {version!r}
git_version = {git_version!r}
cuda = None
hip = None
'''

CUDA = '''def is_available():
    return False


def device_count():
    return 0
'''

TESTING = '''def assert_close(actual, expected, *, rtol=1.3e-6, atol=1e-5):
    """Float32 defaults of torch.testing.assert_close: rtol 1.3e-6, atol 1e-5."""
    actual = list(actual) if isinstance(actual, (list, tuple)) else [actual]
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    if len(actual) != len(expected):
        raise AssertionError(
            f"The length of the sequences mismatch: {{len(actual)}} != {{len(expected)}}"
        )
    bad = [(a, e) for a, e in zip(actual, expected) if abs(a - e) > atol + rtol * abs(e)]
    if bad:
        worst = max(abs(a - e) for a, e in bad)
        raise AssertionError(
            "Tensor-likes are not close!\\n\\n"
            f"Mismatched elements: {{len(bad)}} / {{len(actual)}}\\n"
            f"Greatest absolute difference: {{worst}}"
        )
'''

COMPILE = '''import os
import signal
import struct

import torch

_ORDER = {backends!r}


def _bf16(value):
    # Keep the top 16 bits of the float32 pattern: bfloat16's 8-bit significand.
    bits = struct.unpack("<I", struct.pack("<f", value))[0] & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _perturb(out, kind):
    values = list(out) if isinstance(out, (list, tuple)) else [out]
    if kind == "precision":
        if os.environ.get("TORCHINDUCTOR_EMULATE_PRECISION_CASTS") == "1":
            return out
        values = [_bf16(v) for v in values]
    elif kind == "wrong":
        values = values[:1] + values[:-1]  # an off-by-one shift: no rounding explains it
    return values if isinstance(out, (list, tuple)) else values[0]


def _symbolic(dynamic, sizes):
    # As Dynamo decides: dynamic=True always; the default (None) once a call brings a second
    # size and automatic dynamic shapes is on (the recompile marks the size dynamic).
    if dynamic is not None:
        return dynamic is True
    import torch._dynamo.config as config

    return config.automatic_dynamic_shapes and len(sizes) > 1


def compile(fn=None, *, backend="inductor", mode=None, fullgraph=False, dynamic=None):
    if fn is None:
        return lambda f: compile(f, backend=backend, mode=mode, dynamic=dynamic)
    bug = torch._BEHAVIOUR.get("bug")
    sizes = set()

    def compiled(*args, **kwargs):
        out = fn(*args, **kwargs)
        sizes.add(len(args[0]) if args and hasattr(args[0], "__len__") else None)
        if not bug or _ORDER.index(backend) < _ORDER.index(bug["subsystem"]):
            return out
        if bug.get("dynamic") and not _symbolic(dynamic, sizes):
            return out  # a bug of dynamic shapes only: static sizes compile right
        if bug["kind"] == "crash":
            raise RuntimeError("compiled kernel failed: invalid configuration argument")
        if bug["kind"] == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        return _perturb(out, bug["kind"])

    return compiled
'''

# torch/_dynamo/config.py's two switches of shapes, with their defaults.
DYNAMO_CONFIG = '''automatic_dynamic_shapes = True
assume_static_by_default = True
'''


# torchrun (`python -m torch.distributed.run`), as far as a bisection sees it: N copies of the
# script with torchrun's variables, a rendezvous port bound on 127.0.0.1 (which needs the run's
# loopback), each rank's stderr prefixed `[rankN]: ` as torch >= 2.2 does, and, when a rank
# fails, the others stopped and torchrun's ChildFailedError summary (format of torch 2.13).
RUN = '''import os
import socket
import subprocess
import sys
import threading
import time


def _prefixed(stream, rank):
    for line in iter(stream.readline, b""):
        sys.stderr.buffer.write(b"[rank%d]: " % rank + line)
        sys.stderr.flush()


def main(argv):
    nproc, rest = 1, list(argv)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option.startswith(("--nproc_per_node", "--nproc-per-node")):
            nproc = int(option.split("=", 1)[1] if "=" in option else rest.pop(0))
    with socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        port = store.getsockname()[1]
    children, pumps = [], []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        child = subprocess.Popen([sys.executable, *rest], env=env, stderr=subprocess.PIPE)
        pump = threading.Thread(target=_prefixed, args=(child.stderr, rank))
        pump.start()
        children.append(child)
        pumps.append(pump)
    failed = None
    while failed is None and any(child.poll() is None for child in children):
        failed = next((rank for rank, child in enumerate(children)
                       if child.poll() not in (None, 0)), None)
        time.sleep(0.01)
    failed = failed if failed is not None else next(
        (rank for rank, child in enumerate(children) if child.returncode != 0), None)
    for child in children:
        if child.poll() is None:
            child.terminate()
        child.wait()
    for pump in pumps:
        pump.join()
    if failed is None:
        return 0
    code = children[failed].returncode
    print(f"E0000 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: "
          f"{code}) local_rank: {failed} (pid: {children[failed].pid}) of binary: "
          f"{sys.executable}", file=sys.stderr)
    print("Traceback (most recent call last):\\n"
          f\'  File "{__file__}", line 1, in <module>\\n    main()\\n\'
          "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \\n"
          + "=" * 60 + f"\\n{os.path.basename(rest[0])} FAILED\\n" + "-" * 60
          + "\\nFailures:\\n  <NO_OTHER_FAILURES>\\n" + "-" * 60
          + "\\nRoot Cause (first observed failure):\\n[0]:\\n  host      : localhost\\n"
          f"  rank      : {failed} (local_rank: {failed})\\n"
          f"  exitcode  : {code} (pid: {children[failed].pid})\\n" + "=" * 60,
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def package_files(version: str, git_version: str, bug: dict[str, Any] | None) -> dict[str, str]:
    """The files of one build; `bug` is None for a good build, else its subsystem and kind,
    and `"dynamic": True` for a bug that shows only when the sizes are symbolic."""
    return {
        "torch/__init__.py": INIT.format(version=version),
        "torch/version.py": VERSION.format(version=version, git_version=git_version),
        "torch/cuda.py": CUDA,
        "torch/testing.py": TESTING.format(),
        "torch/_compile.py": COMPILE.format(backends=BACKENDS),
        "torch/_behaviour.json": json.dumps({"bug": bug}),
        "torch/_dynamo/__init__.py": "",
        "torch/_dynamo/config.py": DYNAMO_CONFIG,
        "torch/distributed/__init__.py": "",
        "torch/distributed/run.py": RUN,
    }
