#!/usr/bin/env bash
# ninfer - one device run that maps the 35B-A3B's batch-1 step for the persistent-kernel design
# (kernels/PERF_NOTES.md "Where session 6 leaves decode"): the default bench, the split-target
# switch (no code change), then per-kernel ncu sums of one step (PDL off, isolated
# durations) for the 35B-A3B and the 27B at depth 8192. About 3 minutes warm.
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/probe35] bash
# tests/gpu/probe35.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode and
# libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
D=${NINFER_GPU_BIN:-.deps/probe35}
mkdir -p "$D/bin" "$OUT" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
export LD_LIBRARY_PATH="$PWD/$D/bin:${LD_LIBRARY_PATH:-}" NINFER_SOURCE_DIR="$PWD"
S=$OUT/summary.txt; : >"$S"; L=/tmp/logs; mkdir -p $L
B=(--synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 8192 --gen 16 --decode-only)
b() { # label, settings...
    local label=$1; shift
    echo "bench 35B $label:" >>"$S"
    env "$@" timeout 90 "$D/bin/bench_decode" "${B[@]}" >$L/b.log 2>&1
    echo "  rc $?" >>"$S"; grep -E '^decode' $L/b.log >>"$S"
}
for r in 1 2; do
    b default X=0
    for n in 2 3 4 6 8; do b "NINFER_GEMV_TARGET_BLOCKS=$n" NINFER_GEMV_TARGET_BLOCKS=$n; done
done
if command -v ncu >/dev/null; then
    for m in qwen3.6-35b-a3b qwen3.6-27b; do
        NINFER_PDL=0 timeout 120 ncu --profile-from-start off --clock-control none --cache-control none \
            --metrics gpu__time_duration.sum --csv --print-units base "$D/bin/bench_decode" --synthetic $m \
            --recipe q4 --batch 1 --prompt-len 8192 --gen 2 --decode-only >$L/ncu_$m.csv 2>$L/ncu_$m.err
        echo "== ncu $m batch 1 depth 8192: rc $? at $(($(date +%s) - T0)) s" >>"$S"
        python3 tests/gpu/ncu_sum.py $L/ncu_$m.csv >"$OUT/ncu_$m.txt" 2>&1
        head -40 "$OUT/ncu_$m.txt" >>"$S"
    done
else
    echo "ncu: not found" >>"$S"
fi
echo "done at $(($(date +%s) - T0)) s" >>"$S"
(cd $L && tar czf "$OUT/logs.tgz" .)
tail -3 "$S"
