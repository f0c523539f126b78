#!/usr/bin/env bash
# The GPU proofs, in one go, on a machine with GPUs, a preinstalled CUDA torch and no network:
# 1. two probes of one round on two GPUs, each seeing only its own (scripts/two_gpu_probe.sh);
# 2. a bisection with the machine's torch as the builds, on a CUDA eager-vs-compile reproducer;
# 3. the triage of a bf16 reproducer on the GPU (scripts/triage_on_device.sh).
# Outputs go to $OUT (default ./device-output). Wheels in .whl/ (PyGithub and its needs) are
# installed into /tmp/site first when the machine lacks them.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/device-output}"; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="$(command -v python3)"
WORK="$(mktemp -d)"
# A second path to the same build: a link to the whole venv, so its pyvenv.cfg is still found.
VENV="$(dirname "$(dirname "$PY")")"
if [ -f "$VENV/pyvenv.cfg" ]; then ln -s "$VENV" "$WORK/alt"; else
  mkdir -p "$WORK/alt/bin"; ln -s "$PY" "$WORK/alt/bin/python3"; fi
ALT="$WORK/alt/bin/python3"
nvidia-smi -L | tee "$OUT/gpus.txt"
{ id; ls -l /dev/nvidia*; } > "$OUT/devices.txt" 2>&1
echo "=== 0. CUDA inside the namespace sandbox"
"$PY" - <<'PY' 2>&1 | tee "$OUT/sandbox_cuda.txt"
import sys, tempfile
from pathlib import Path
from bot.adapters.runner import Runner
from bot.adapters.sandbox import gpu_groups, make_sandbox
script = Path(tempfile.mkdtemp()) / "c.py"
script.write_text("import os, torch\nprint('uid', os.getuid(), 'groups', os.getgroups(), "
                  "'cuda', torch.cuda.is_available(), torch.cuda.device_count())\n")
env = Path(sys.executable).parent.parent
result = Runner(make_sandbox("namespace", cuda=True)).run(
    Path(sys.executable), script, timeout_s=120, readonly=[env])
print("gpu groups", gpu_groups(), "exit", result.exit_code, result.output[-600:])
PY

SANDBOX="${SANDBOX:-namespace}"
if [ -z "${ONLY_BISECT_AND_TRIAGE:-}" ]; then  # set it to run steps 2 and 3 alone
  echo "=== diagnostics: which sandbox piece keeps CUDA out"
  timeout 200 bash scripts/sandbox_gpu_diag.sh 2>&1 | tee "$OUT/diag.txt"
  echo "=== 1. two GPUs (--sandbox $SANDBOX)"
  SANDBOX="$SANDBOX" PYTHON="$PY" timeout 150 bash scripts/two_gpu_probe.sh 2>&1 | tail -25 | tee "$OUT/two_gpu.log"
fi

echo "=== 2. the machine's torch as builds, CUDA reproducer"
timeout 200 "$PY" -m bot.jobs.cli bisect examples/cuda_compile_repro.py \
  --builds-from-python "$PY" "$ALT" --no-triage --no-commit-tier --sandbox "$SANDBOX" \
  --cache-dir "$WORK/cache" --json "$OUT/gpu_bisect.json" --markdown "$OUT/gpu_bisect.md" \
  > "$OUT/gpu_bisect.log" 2>&1
echo "exit $?" >> "$OUT/gpu_bisect.log"; tail -8 "$OUT/gpu_bisect.log"; cat "$OUT/gpu_bisect.md"

echo "=== 3. triage on the GPU"
OUT="$OUT" timeout 220 bash scripts/triage_on_device.sh "$PY" "" --bisector-timeout 90 --sandbox "$SANDBOX" \
  > "$OUT/triage.log" 2>&1
echo "exit $?" >> "$OUT/triage.log"; grep -v '^\[' "$OUT/triage.log" | tail -30
