#!/usr/bin/env bash
# Which part of the launcher's view keeps CUDA out: the launcher run with pieces turned off.
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 - <<'PY'
import json, subprocess, sys, tempfile
from pathlib import Path
from bot.adapters.sandbox import LAUNCHER, Limits, NamespaceSandbox
script = Path(tempfile.mkdtemp()) / "c.py"
script.write_text("import torch, warnings\nwarnings.simplefilter('ignore')\n"
                  "print(torch.cuda.is_available())\n")
env = Path(sys.executable).parent.parent
box = NamespaceSandbox(Limits().for_cuda(), gpu=True)
def attempt(name, **changes):
    work = Path(tempfile.mkdtemp()); (work / "tmp").mkdir()
    (work / "c.py").write_text(script.read_text())
    config = box._config([sys.executable, str(work / "c.py")], work, [env])
    for key, value in changes.items():
        config[key] = value(config[key]) if callable(value) else value
    done = subprocess.run([sys.executable, "-I", "-S", str(LAUNCHER), "outer", json.dumps(config)],
                          capture_output=True, text=True, timeout=120)
    print(f"{name:28} {(done.stdout.strip().splitlines() or ['?'])[-1]} {done.stderr.strip()[-160:]}")
hidden = lambda keep: (lambda hide: [h for h in hide if h not in keep])
attempt("default (gpu: /dev, /proc writable)")
attempt("only /dev writable", writable=["/dev"])
attempt("only /proc writable", writable=["/proc"])
attempt("neither", writable=[])
attempt("root not read-only", readonly_root=False)
PY
