"""Whether a build can use a GPU here: asked of its own torch, inside the runner's sandbox."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bot.adapters.environments import Environment
from bot.adapters.runner import Runner
from bot.core.builds import Build
from bot.jobs.engine import Prober

CUDA_CHECK = 'import torch\nprint("CUDA_AVAILABLE", bool(torch.cuda.is_available()))\n'


def cuda_available(runner: Runner, env: Environment) -> tuple[bool, str]:
    """Ask the build's own torch, in the runner's scrubbed environment, if it sees a GPU."""
    with tempfile.TemporaryDirectory(prefix="tbb-cuda-") as folder:
        script = Path(folder) / "cuda_check.py"
        script.write_text(CUDA_CHECK)
        result = runner.run(env.python, script, timeout_s=300, readonly=[env.path])
    for line in reversed(result.output.splitlines()):
        if line.startswith("CUDA_AVAILABLE "):
            available = line.split()[-1] == "True"
            return available, "torch.cuda.is_available() is " + str(available)
    return False, f"torch.cuda.is_available() could not be asked (exit {result.exit_code})"


def gpu_blocker(prober: Prober, newest: Build) -> str | None:
    """Why the newest build cannot run a CUDA reproducer here, or None when it can.

    Asked through the prober's runner, so a sandbox that keeps the GPU out is noticed before
    the bisection, as "cannot test", instead of turning every build BAD (DESIGN §5).
    """
    env, failure, _ = prober.environment(newest)
    if env is None or failure is not None:
        return None  # the bisection itself will report the build as untestable
    available, detail = cuda_available(prober.runner, env)
    return None if available else f"needs a CUDA GPU; {detail}"
