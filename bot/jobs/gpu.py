"""Whether a build can use a GPU here: asked of its own torch, inside the runner's sandbox."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.adapters.environments import Environment
from bot.adapters.runner import Runner
from bot.core.builds import Build
from bot.core.errors import UserError
from bot.core.issue_facts import gpus_needed
from bot.jobs.engine import Prober

CUDA_CHECK = ('import torch\nprint("CUDA_AVAILABLE", bool(torch.cuda.is_available()), '
              'torch.cuda.device_count() if torch.cuda.is_available() else 0)\n')


def cuda_devices(runner: Runner, env: Environment,
                 extra_env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """How many GPUs the build's own torch sees, in the runner's scrubbed environment (with
    `extra_env`: a worker's CUDA_VISIBLE_DEVICES), and how it said so."""
    with tempfile.TemporaryDirectory(prefix="tbb-cuda-") as folder:
        script = Path(folder) / "cuda_check.py"
        script.write_text(CUDA_CHECK)
        result = runner.run(env.python, script, timeout_s=300, readonly=[env.path],
                            extra_env=extra_env)
    for line in reversed(result.output.splitlines()):
        words = line.split()
        if len(words) == 3 and words[0] == "CUDA_AVAILABLE" and words[2].isdigit():
            count = int(words[2]) if words[1] == "True" else 0
            return count, f"torch.cuda.is_available() is {words[1]}" + (
                f", with {count} GPU{'s' if count != 1 else ''}" if count else "")
    return 0, f"torch.cuda.is_available() could not be asked (exit {result.exit_code})"


def cuda_available(runner: Runner, env: Environment) -> tuple[bool, str]:
    """Ask the build's own torch, in the runner's scrubbed environment, if it sees a GPU."""
    count, detail = cuda_devices(runner, env)
    return count > 0, detail


def gpu_blocker(prober: Prober, newest: Build,
                slots: Sequence[Mapping[str, str]] = ()) -> str | None:
    """Why the newest build cannot run a CUDA reproducer here, or None when it can: no GPU,
    or fewer than the processes it runs on with torchrun (a GPU each).

    Asked through the prober's runner, so a sandbox that keeps the GPU out is noticed before
    the bisection, as "cannot test", instead of turning every build BAD. With `slots`
    (`--gpus`), asked with each worker's own devices, at once: a GPU that is not there
    (`--gpus 0,7` on a machine with two) would otherwise fail every probe that worker runs.
    """
    with prober.environment(newest) as (env, failure, _):
        if env is None or failure is not None:
            return None  # the bisection itself will report the build as untestable
        if not slots:
            return _too_few(prober, *cuda_devices(prober.runner, env))
        with ThreadPoolExecutor(len(slots)) as pool:
            seen = list(pool.map(lambda slot: cuda_devices(prober.runner, env, slot), slots))
    for slot, (count, detail) in zip(slots, seen, strict=True):
        why = _too_few(prober, count, detail)
        if why is not None:
            shown = ", ".join(f"{name}={value}" for name, value in slot.items())
            return f"--gpus: the worker given {shown} cannot run it: {why}"
    return None


def _too_few(prober: Prober, count: int, detail: str) -> str | None:
    processes = prober.options.processes
    needed = gpus_needed(processes, _script(prober))
    if count == 0:
        return f"needs a CUDA GPU; {detail}"
    if count < needed:
        how = "with torchrun" if processes else "it starts itself"
        return f"runs on {needed} processes {how}, a CUDA GPU each; {detail}"
    return None


def _script(prober: Prober) -> str | None:
    try:
        return prober.script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def gpu_slots(gpus: Sequence[str], processes: str | None,
              script: str | None = None) -> list[dict[str, str]]:
    """One slot a worker, each of the GPUs one run needs: one, or one a process when the
    reproducer runs on several with torchrun or starts several itself (`--gpus 0,1,2,3` and 2
    processes: 0,1 and 2,3)."""
    each = gpus_needed(processes, script)
    if gpus and len(gpus) < each:
        raise UserError(f"--gpus {','.join(gpus)}: the reproducer runs on {each} processes, a "
                        f"GPU each, so give at least {each} GPUs")
    groups = [gpus[start:start + each] for start in range(0, len(gpus) - each + 1, each)]
    return [{"CUDA_VISIBLE_DEVICES": ",".join(group)} for group in groups]
