#!/bin/bash
# ninfer - a device fault while serving, on the CPU backend and the tiny model: NINFER_FAULT makes
# the backend fail mid-stream; the streams and the queued request get their errors, ninferd exits 3,
# the lanes are saved from their host checkpoints and restored by the next start (engine_fault.py;
# tests/gpu/engine_fault.sh runs the same on the GPU with a real CUDA fault).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }
exec python3 "$SRC/tests/blackbox/engine_fault.py" "$BIN/daemon/ninferd" "$BIN/ctl/ninferctl" "$T/tiny.ninfer" cpu "$T"
