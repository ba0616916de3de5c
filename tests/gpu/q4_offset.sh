#!/usr/bin/env bash
# ninfer - on the GPU machine: the q4 offset dequantisation A/B (kernels/PERF_NOTES.md "q4 offset
# dequantisation"), as two runs of tests/gpu/run.sh. Switch off: the offset kernels' own tests (they
# pass the offsets explicitly), the default path's GEMV and norm tests, bench_decode 27B / 35B-A3B q4.
# Switch on (NINFER_GEMV_Q4_OFFSET=1): the runner's bit and accuracy tests and the same bench_decode.
# Between them bench_gpu's q4 rows (the last ones: the 27B mix on the offset path).
# Usage (repository root): OUT=/some/dir NINFER_GPU_BIN=dir bash tests/gpu/q4_offset.sh
#   (dir: stripped test_gpu, bench_gpu and bench_decode of a Release CUDA 90a build, libsimdjson.so.14
#   beside them). About 7-9 minutes warm; summaries in $OUT/off, $OUT/on and $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
export NINFER_GPU_BIN=${NINFER_GPU_BIN:-build-gpu/tests}
mkdir -p "$OUT"
status=0
OUT=$OUT/off NINFER_GPU_TAGS="gemv_q4_offset gemv gemv_pipe rmsnorm" NINFER_GPU_MICROBENCH=0 \
    bash tests/gpu/run.sh >/dev/null || status=1
LD_LIBRARY_PATH="$PWD/$NINFER_GPU_BIN:${LD_LIBRARY_PATH:-}" timeout 240 "$NINFER_GPU_BIN/bench_gpu" \
    "$OUT/bench_gpu.txt" q4_g64_fp16 >"$OUT/bench_gpu.log" 2>&1 || status=1
OUT=$OUT/on NINFER_GEMV_Q4_OFFSET=1 NINFER_GPU_TAGS="cuda_backend formats_e2e" NINFER_GPU_MICROBENCH=0 \
    bash tests/gpu/run.sh >/dev/null || status=1
{
    echo "== switch off"; cat "$OUT/off/summary.txt"
    echo "== bench_gpu q4"; grep -E 'copy bandwidth|27B mix' "$OUT/bench_gpu.log"
    echo "== NINFER_GEMV_Q4_OFFSET=1"; cat "$OUT/on/summary.txt"
} | tee "$OUT/summary.txt"
exit $status
