#!/bin/bash
# Device proof: `--gpus` asks each worker's devices before bisecting. On a one-GPU host, `--gpus 0,1`
# is cannot-test before any probe, `--gpus 0` runs. The device has no network: the bot's dependencies
# go along as wheels in .whl (`pip download --only-binary :all: --python-version 3.12 -d .whl .` here).
# Run: bash scripts/gpu_slots_on_device.sh (the JSON reports go to $OUT).
set -u
pip install --quiet --no-index --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
nvidia-smi -L
PY=$(command -v python3); echo "python: $PY"; $PY -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"
cat > /tmp/cuda_repro.py <<'PYEOF'
import os, torch
x = torch.ones(3, device="cuda")
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "sum", x.sum().item())
assert x.sum().item() == 3
PYEOF
bb() { python3 -m bot.jobs.cli bisect /tmp/cuda_repro.py --builds-from-python "$PY" "$PY" --needs-cuda yes --no-triage --no-commit-tier --no-bisector --db /tmp/db-$1.sqlite "${@:2}"; echo "exit $?"; }
echo "=== --gpus 0,1 on a host with one GPU"; bb a --gpus 0,1 --json $OUT/gpus01.json
echo "=== --gpus 0"; bb b --gpus 0 --json $OUT/gpus0.json
python3 -c "
import json; d=json.load(open('$OUT/gpus01.json')); print('gpus 0,1 ->', d['status'], '|', d.get('cannot_test'), '| probes', len(d['probe_records']))
d=json.load(open('$OUT/gpus0.json')); print('gpus 0 ->', d['status'], '| probes', len(d['probe_records'])); [print('  ', p['version'], p['verdict'], p['result']['output'].strip().splitlines()[-1][:100]) for p in d['probe_records']]"
