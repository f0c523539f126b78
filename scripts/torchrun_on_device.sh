#!/usr/bin/env bash
# Reproducers run with torchrun, on a GPU machine with a preinstalled CUDA torch and no network
# (nothing is installed): the machine's torch, reached by two paths, is two "builds".
#  1. an issue that says `torchrun --nproc_per_node=1`: NCCL all_reduce on the GPU, then
#     eager against torch.compile, in the namespace sandbox (the rendezvous on its loopback);
#  2. the same script with --nproc-per-node 2 on a machine with fewer GPUs: "cannot test",
#     said before anything runs, instead of every build failing alike;
#  3. a gloo reproducer on 2 CPU processes whose rank 1 fails: judged by rank 1's traceback.
# Usage: scripts/torchrun_on_device.sh [PYTHON]; outputs under $OUT (default ./device-output).
set -u
cd "$(dirname "$0")/.."
PY="${1:-$(command -v python3)}"
OUT="${OUT:-$PWD/device-output}"; mkdir -p "$OUT"
WORK="$(mktemp -d)"
VENV="$(dirname "$(dirname "$PY")")"
if [ -f "$VENV/pyvenv.cfg" ]; then ln -s "$VENV" "$WORK/alt"; else
  mkdir -p "$WORK/alt/bin"; ln -s "$PY" "$WORK/alt/bin/python3"; fi
ALT="$WORK/alt/bin/python3"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

cat > "$WORK/issue.md" <<'EOF'
### 🐛 Describe the bug

The compiled GELU after an all_reduce differs from eager on each rank.

```python
import os
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.randn(1024, 1024, device="cuda", generator=torch.Generator("cuda").manual_seed(rank))
dist.all_reduce(x)
f = lambda t: torch.nn.functional.gelu(t) * 2
eager, compiled = f(x), torch.compile(f)(x)
print(f"rank {rank} of {dist.get_world_size()} on {torch.cuda.get_device_name()}: "
      f"max abs diff {(eager - compiled).abs().max().item():.3e}")
torch.testing.assert_close(compiled, eager)
dist.destroy_process_group()
```

Run it with `torchrun --nproc_per_node=1 repro.py`.
EOF

run() {  # name, then the bisect arguments
  local name="$1"; shift
  echo "=== $name"
  timeout 300 "$PY" -m bot.jobs.cli bisect "$@" --builds-from-python "$PY" "$ALT" \
    --no-commit-tier --no-bisector --cache-dir "$WORK/cache" --db "$WORK/$name.sqlite3" \
    --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "exit $?" >> "$OUT/$name.log"
  grep -v '^\[probe' "$OUT/$name.log" | head -30
}
nvidia-smi -L
run torchrun_nccl "$WORK/issue.md"
run torchrun_two_gpus "$WORK/issue.md" --nproc-per-node 2
run torchrun_gloo examples/gloo_ranks_repro.py --nproc-per-node 2 --needs-cuda no --no-triage
"$PY" - "$OUT/torchrun_nccl.json" <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
for record in data["probe_records"]:
    print(record["version"], record["verdict"], "|",
          [line for line in record["result"]["output"].splitlines() if "max abs diff" in line])
EOF
rm -rf "$WORK"
