"""Device proof: a CUDA reproducer under the namespace sandbox (minimal /dev, seccomp, session
keyring, read-only /proc/sys) on a GPU host, as root and as an unprivileged bot.

    python3 scripts/sandbox_gpu_check.py [PYTHON_WITH_TORCH]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bot.adapters.runner import Runner
from bot.adapters.sandbox import make_sandbox

SCRIPT = r"""
import ctypes, os, torch
print("cuda", torch.cuda.is_available(), torch.cuda.device_count())
x = torch.randn(256, 256, device="cuda")
print("matmul", float((x @ x).sum().isfinite()))
f = torch.compile(lambda t: torch.sin(t) + 1)
print("compile", bool(torch.allclose(f(x), torch.sin(x) + 1)))
print("dev", sorted(os.listdir("/dev")))
try:
    os.unshare(os.CLONE_NEWUSER)
    print("LEAK unshare worked")
except OSError as exc:
    print("unshare refused", exc.errno)
try:
    open("/proc/sys/kernel/shmmax", "w").write("18446744073692774399")
    print("LEAK shmmax written")
except OSError as exc:
    print("shmmax refused", exc.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("keyctl", libc.syscall(250, 0, -3, 0), ctypes.get_errno())
"""


def main() -> int:
    python = Path(sys.argv[1] if len(sys.argv) > 1 else sys.executable)
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "repro.py"
        script.write_text(SCRIPT)
        runner = Runner(make_sandbox("namespace", cuda=True))
        result = runner.run(python, script, timeout_s=300)
        print("exit", result.exit_code, "signal", result.signal, "timed out", result.timed_out)
        print(result.output[-3000:])
    return 0 if result.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
