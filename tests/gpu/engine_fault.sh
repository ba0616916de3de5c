#!/usr/bin/env bash
# ninfer - the device-fault test on the GPU machine (issue 30, GPU faults): ninferd serves the
# kernel/dense fixture (converted here, bf16: the shapes the CUDA kernels take) on the CUDA backend
# with --persist-slots and NINFER_FAULT=engine_step:N, which launches a kernel that writes to an
# unmapped address at the N-th step: a real sticky cudaErrorIllegalAddress. tests/blackbox/
# engine_fault.py then checks the streams' error events, the queued request's 503, exit status 3,
# the engine-failed log line naming the CUDA error, the lane files written from the host
# checkpoints, and their restore by the next start (the CPU suite runs the same script on the CPU
# backend: blackbox.test_engine_fault).
# $OUT/engine_fault.txt: the test's output (and the daemons' last log lines on a failure).
#
# Usage (repository root): OUT=/some/dir NINFER_GPU_BIN=.deps/gpufault tests/gpu/engine_fault.sh
#   NINFER_GPU_BIN       ninferd and ninferctl of a -DNINFER_CUDA=ON build with the shared libraries
#                        Ubuntu lacks (tests/gpu/serve_pack.sh makes it), or a folder holding its
#                        serve.tar.xz
#   NINFER_FAULT_DEVICE  cuda (default), or cpu to try the script on the CPU machine
#   NINFER_FAULT_STEP    the step that fails (default 1000: a GPU step of this model takes well under
#                        a millisecond, and the queued request must arrive before it)
# Exit status: the test's (0 = every check passed).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/fault-out}
mkdir -p "$OUT"
DEVICE=${NINFER_FAULT_DEVICE:-cuda}
WORK=$(mktemp -d) || exit 1
trap 'rm -rf "$WORK"' EXIT
BIN=$(cd "${NINFER_GPU_BIN:?NINFER_GPU_BIN names the binaries}" && pwd) || exit 1
if [ ! -x "$BIN/ninferd" ] && [ -f "$BIN/serve.tar.xz" ]; then
    mkdir -p "$WORK/bin" && tar -xJf "$BIN/serve.tar.xz" -C "$WORK/bin" || exit 1
    BIN=$WORK/bin
fi
export LD_LIBRARY_PATH="$BIN:${LD_LIBRARY_PATH:-}"
{
    command -v nvidia-smi >/dev/null && echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
    "$BIN/ninferctl" convert "$SRC/tests/fixtures/model/kernel/dense/hf" "$WORK/dense.ninfer" --recipe bf16 \
        >"$WORK/convert.log" 2>&1 || { echo "engine_fault: convert FAILED:"; tail -5 "$WORK/convert.log"; exit 1; }
    timeout 540 python3 "$SRC/tests/blackbox/engine_fault.py" "$BIN/ninferd" "$BIN/ninferctl" "$WORK/dense.ninfer" \
        "$DEVICE" "$WORK" "${NINFER_FAULT_STEP:-1000}"
} 2>&1 | tee "$OUT/engine_fault.txt"
exit "${PIPESTATUS[0]}"
