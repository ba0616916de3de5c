#!/usr/bin/env bash
# ninfer - session 6 device run B (carried binaries): the int8-x tests ([int8_x], [gemv_q4a8],
# [gemv_pipe], [real_shape], [cuda_backend], [formats_e2e], the last two also with every launch on
# the ring) side by side, then bench_decode 27B q4 (batch 1,8, depth 512,8192) twice and 35B-A3B q4
# once. Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/s6b] bash
# tests/gpu/s6b.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode and
# libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
D=${NINFER_GPU_BIN:-.deps/s6b}
mkdir -p "$D/bin" "$OUT" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
export LD_LIBRARY_PATH="$PWD/$D/bin:${LD_LIBRARY_PATH:-}" NINFER_SOURCE_DIR="$PWD"
S=$OUT/summary.txt; : >"$S"; L=/tmp/logs; mkdir -p $L
t() { # name, filter, settings...
    local n=$1 f=$2 s; shift 2; s=$(date +%s)
    env "$@" timeout 200 "$D/bin/test_gpu" "$f" >"$L/t_$n.log" 2>&1
    echo "test $n $f ($*) rc $? $(($(date +%s) - s)) s: $(grep -E '^(All tests passed|test cases:)' "$L/t_$n.log" | head -1)" >>"$S"
}
t i8 "[int8_x]" & t a8 "[gemv_q4a8]" & t pipe "[gemv_pipe]" & t real "[real_shape]" &
t cb "[cuda_backend]" & t fe "[formats_e2e]" & t cbr "[cuda_backend]" NINFER_GEMV_STAGES=2 &
t fer "[formats_e2e]" NINFER_GEMV_STAGES=2 & t rms "[rmsnorm]" &
wait
for f in $L/t_*.log; do grep -B3 -A14 FAILED "$f" | head -30 >>"$S"; done
b() { echo "bench $*:" >>"$S"; timeout 120 "$D/bin/bench_decode" "$@" >$L/b.log 2>&1; echo "  rc $?" >>"$S"; grep -E '^(decode|copy|bench_decode)' $L/b.log >>"$S"; }
for r in 1 2; do b --synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only; done
b --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 8192 --gen 16 --decode-only
echo "done at $(($(date +%s) - T0)) s" >>"$S"
(cd $L && tar czf "$OUT/logs.tgz" .)
tail -3 "$S"
