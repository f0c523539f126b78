#!/usr/bin/env bash
# Triage the CUDA bf16 reproducer with the torch already installed on a GPU machine (no network):
#   scripts/triage_on_device.sh [PYTHON] [REPRODUCER]
# Uses the interpreter as it is (`bisect-bot triage --python`), so nothing is installed; the bot
# runs from this checkout through PYTHONPATH. Prints the conclusions; JSON and Markdown go to
# $OUT (or ./triage-output).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:-$(command -v python3)}"
repro="${2:-$repo/tests/data/triage/bf16_precision_repro_cuda.py}"
out="${OUT:-$repo/triage-output}"
mkdir -p "$out"
"$python" - <<'PY'
import torch
print(f"torch {torch.__version__} ({torch.version.git_version}), cuda {torch.version.cuda}, "
      f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
PY
# The bot needs requests and packaging; fall back to the interpreter's own if they are there.
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m bot.jobs.cli triage "$repro" \
    --python "$python" --json "$out/triage.json" --markdown "$out/triage.md" "${@:3}"
echo
cat "$out/triage.md"
