#!/usr/bin/env bash
# Which part of the namespace sandbox keeps CUDA from initialising? Tries each piece alone.
PY="$(command -v python3)"
export HOME=/tmp/diag-home; mkdir -p "$HOME"; chmod 777 "$HOME"
T='import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'
U=2000000001
run() { local name=$1; shift; printf '%-22s ' "$name"; timeout 90 "$@" "$PY" -W ignore -c "$T" 2>&1 | tail -1; }
run plain env
run uid setpriv --reuid=$U --regid=$U --clear-groups
run no-new-privs setpriv --no-new-privs
run rlimits prlimit --nproc=4096 --nofile=4096 --fsize=4294967296 --core=0
run net unshare --net
run pid unshare --pid --fork --mount-proc
run ipc unshare --ipc
run uts unshare --uts
run mount unshare --mount
run all-ns-root unshare --net --pid --fork --mount --mount-proc --ipc --uts --kill-child
run all-ns-uid unshare --net --pid --fork --mount --mount-proc --ipc --uts --kill-child setpriv --reuid=$U --regid=$U --clear-groups
run pid-uid unshare --pid --fork --mount-proc setpriv --reuid=$U --regid=$U --clear-groups
run net-uid unshare --net setpriv --reuid=$U --regid=$U --clear-groups
run ipc-uid unshare --ipc setpriv --reuid=$U --regid=$U --clear-groups
