#!/usr/bin/env bash
# ninfer - where the decode step's time goes inside the graph, with PDL overlap: nsys (or, where the
# machine has none, the CUPTI library of tests/gpu/build_cupti_trace.sh) traces bench_decode's graph
# nodes, tests/gpu/trace_step.py attributes each step's span to its kernels (kernels/PERF_NOTES.md
# "Session 8"). The bench's own host-timed figures rise under tracing; the traced GPU spans do not
# (session 8 run 1). About a minute warm.
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=dir with bench_decode,
# libsimdjson.so.14 and, without nsys, libninfer_cupti_trace.so] bash tests/gpu/trace_step.sh
set -uo pipefail
BIN=${NINFER_GPU_BIN:-build-gpu/tests}
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
CUPTI=$PWD/$BIN/libninfer_cupti_trace.so # tests/gpu/build_cupti_trace.sh: the fallback without nsys
if [ -n "$NSYS" ]; then echo "nsys: $NSYS ($("$NSYS" --version 2>&1 | head -1))" >>"$S"
elif [ -e "$CUPTI" ]; then echo "nsys: not found, tracing with $CUPTI" >>"$S"
else echo "nsys: not found, and no $CUPTI" | tee -a "$S"; exit 1; fi
trace() { # label, model, pdl
    local label=$1 model=$2 pdl=$3 rep=/tmp/trace_$1
    local args=(--synthetic "$model" --recipe q4 --batch 1,8 --prompt-len 8192 --gen 8 --decode-only)
    if [ -n "$NSYS" ]; then
        NINFER_PDL=$pdl timeout 240 "$NSYS" profile --cuda-graph-trace=node -t cuda --sample=none --cpuctxsw=none \
            -o "$rep" -f true "$BIN/bench_decode" "${args[@]}" >/tmp/trace_$1.log 2>&1
        echo "== $label ($model, NINFER_PDL=$pdl): nsys rc $?" >>"$S"
        "$NSYS" stats --report cuda_gpu_trace --format csv -o "$rep" "$rep.nsys-rep" >/dev/null 2>&1
    else
        NINFER_PDL=$pdl CUDA_INJECTION64_PATH=$CUPTI NINFER_TRACE_OUT=${rep}_cuda_gpu_trace.csv timeout 240 \
            "$BIN/bench_decode" "${args[@]}" >/tmp/trace_$1.log 2>&1
        echo "== $label ($model, NINFER_PDL=$pdl): CUPTI rc $?" >>"$S"
    fi
    grep -E '^decode|cupti_trace' /tmp/trace_$1.log >>"$S"
    python3 tests/gpu/trace_step.py "${rep}_cuda_gpu_trace.csv" >>"$S" 2>&1
}
trace moe35 qwen3.6-35b-a3b 1
trace moe35_nopdl qwen3.6-35b-a3b 0
trace dense27 qwen3.6-27b 1
cat "$S"
