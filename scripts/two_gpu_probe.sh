#!/usr/bin/env bash
# Two probes of one round on two GPUs at once: each run must see only its own GPU.
# Needs: 2 GPUs, a python3 with torch (CUDA) preinstalled; no network (nothing is installed).
# The two "builds" are the same interpreter reached by two paths, so a round holds both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python3)}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Second path to the same interpreter: --builds-from-python wants two builds to bisect. Link the
# whole venv when there is one, so the interpreter still finds its pyvenv.cfg.
VENV="$(dirname "$(dirname "$PY")")"
if [ -f "$VENV/pyvenv.cfg" ]; then ln -s "$VENV" "$WORK/alt"; else
    mkdir -p "$WORK/alt/bin"; ln -s "$PY" "$WORK/alt/bin/python3"; fi

cat > "$WORK/repro.py" <<'EOF'
import os, time, torch
began = time.time()
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
time.sleep(3)  # long enough that the two probes overlap
print(f"device_count={torch.cuda.device_count()} "
      f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} "
      f"name={torch.cuda.get_device_name(0)} sum={x.sum().item():.0f} "
      f"window={began:.2f}..{time.time():.2f}")
EOF

# Run the bot's own code without installing it (no network): the package from this checkout,
# and its dependencies from .deps when the machine lacks them. Make .deps where there is a
# network: uv pip install --target .deps --python-version 3.12 packaging requests PyGithub \
#   pyyaml docker uv
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Existing interpreters are never installed into, so uv is not run; a stub satisfies the lookup.
if ! command -v uv >/dev/null; then
    mkdir -p "$WORK/bin" && printf '#!/bin/sh\nexit 1\n' > "$WORK/bin/uv"
    chmod +x "$WORK/bin/uv" && export PATH="$WORK/bin:$PATH"
fi
[ -d .deps ] && export PYTHONPATH="$PWD/.deps:$PYTHONPATH" PATH="$PWD/.deps/bin:$PATH"
"$PY" -m bot.jobs.cli bisect "$WORK/repro.py" \
    --builds-from-python "$PY" "$WORK/alt/bin/python3" \
    --gpus 0,1 --needs-cuda yes --no-triage --no-commit-tier --sandbox "${SANDBOX:-namespace}" --cache-dir "$WORK/cache" --json "$WORK/report.json" || true

echo "--- what each probe saw (two lines, overlapping windows, different GPUs) ---"
"$PY" - "$WORK/report.json" <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
for probe in data["probe_records"]:
    out = (probe.get("result") or {}).get("output", "")
    seen = [ln for ln in out.splitlines() if ln.startswith("device_count=")]
    print(probe["version"], probe["verdict"], *seen)
EOF
