#!/usr/bin/env bash
# ninfer - session 6 device run (carried binaries): every GPU test and the validation benches through
# tests/gpu/run.sh (defaults: attention Auto, GDN Wide4, norm weights read before the PDL wait), then
# A/B benches of the attention schedule (NINFER_ATTN_DECODE unset = Auto / 0 = split) at 27B q4
# batch 1 and 8, depth 8192 and 32768, two rounds, and the q4 e2e tests with every launch on the ring.
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/s6] bash tests/gpu/s6.sh,
# where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
D=${NINFER_GPU_BIN:-.deps/s6}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
L=/tmp/logs; mkdir -p $L "$OUT"
unset NINFER_ATTN_DECODE NINFER_GDN_DECODE
OUT=$OUT NINFER_GPU_BIN=$D/bin NINFER_GPU_LOGDIR=$L NINFER_GPU_MICROBENCH=0 \
  NINFER_GPU_BENCH_DECODE="--synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --prefill-chunk 2048;--synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only;--synthetic qwen3.6-27b --recipe mix --batch 1,8 --prompt-len 512 --gen 16 --decode-only" \
  bash tests/gpu/run.sh >$L/run.out 2>&1
S=$OUT/summary.txt
echo "run.sh rc $? at $(($(date +%s) - T0)) s" >>"$S"
export LD_LIBRARY_PATH="$PWD/$D/bin:${LD_LIBRARY_PATH:-}" NINFER_SOURCE_DIR=$PWD
ab() { # label, NINFER_ATTN_DECODE value ("" = unset), bench arguments
    local label=$1 v=$2; shift 2
    echo "ab $label (NINFER_ATTN_DECODE=${v:-unset}):" >>"$S"
    if [ -n "$v" ]; then NINFER_ATTN_DECODE=$v timeout 120 "$D/bin/bench_decode" "$@" >$L/ab.log 2>&1
    else timeout 120 "$D/bin/bench_decode" "$@" >$L/ab.log 2>&1; fi
    echo "  rc $?" >>"$S"; grep -E '^decode|bench_decode' $L/ab.log >>"$S"
}
A=(--synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 8192,32768 --gen 16 --decode-only)
for r in 1 2; do ab auto "" "${A[@]}"; ab split 0 "${A[@]}"; done
for tag in "[cuda_backend]" "[formats_e2e]"; do
    NINFER_GEMV_STAGES=2 timeout 120 "$D/bin/test_gpu" "$tag" >"$L/ring_$tag.log" 2>&1
    echo "NINFER_GEMV_STAGES=2 $tag rc $?: $(grep -E '^(All tests passed|test cases:)' "$L/ring_$tag.log" | head -1)" >>"$S"
done
echo "done at $(($(date +%s) - T0)) s" >>"$S"
(cd $L && tar czf "$OUT/logs.tgz" .)
tail -3 "$S"
