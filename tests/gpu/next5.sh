#!/usr/bin/env bash
# ninfer - one device run for branch wip/next (main + wip/gdn5 + wip/attn5, kernels/PERF_NOTES.md
# "Attention decode v4" and "GDN recurrent decode v4", both prepared, not run): their tests with
# both switches on, the timing cases, then bench_decode 27B q4 (batch 1,8, depth 512,8192) with
# neither / NINFER_ATTN_DECODE=2 / NINFER_GDN_DECODE=2 / both, two rounds, and the 35B-A3B with
# neither / both, under one deadline (LIMIT s, default 420).
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/next5] [LIMIT=420]
# bash tests/gpu/next5.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode
# and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
LIMIT=${LIMIT:-420}
D=${NINFER_GPU_BIN:-.deps/next5}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
BIN=$D/bin
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}" NINFER_SOURCE_DIR="$PWD"
unset NINFER_ATTN_DECODE NINFER_GDN_DECODE
mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((LIMIT - ($(date +%s) - T0))); }
say "next5: device $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
t() { # name, filter, settings...
    local n=$1 f=$2 s; shift 2; s=$(date +%s)
    env "$@" timeout 150 "$BIN/test_gpu" "$f" >"$OUT/t_$n.log" 2>&1
    say "test $n ($*) rc $? $(($(date +%s) - s)) s: $(grep -E '^(All tests passed|test cases:)' "$OUT/t_$n.log" | head -1)"
}
if [ -z "${ONLY_GDN:-}" ]; then t attn "[attention_decode]" & t gdn "[gdn_decode]" & t cb "[cuda_backend]" NINFER_ATTN_DECODE=2 NINFER_GDN_DECODE=2 &
t fe "[formats_e2e]" NINFER_ATTN_DECODE=2 NINFER_GDN_DECODE=2 & t real "[real_shape]" NINFER_ATTN_DECODE=2 NINFER_GDN_DECODE=2 &
t i8 "[int8_x]" & t a8 "[gemv_q4a8]" &
else t gdn "[gdn_decode]" & fi
wait
t timing "[mixer_decode_timing]"
for f in "$OUT"/t_*.log; do grep -B3 -A14 FAILED "$f" | head -30 >>"$S"; done
grep -h RESULT "$OUT/t_timing.log" | grep -E "8192 batch 1|gdn 27B batch 1|path" | head -20 >>"$S"
NB=0
bd() { # label, settings..., then bench arguments after --
    local label=$1; shift; local env=(); while [ "$1" != -- ]; do env+=("$1"); shift; done; shift
    [ "$(left)" -lt 20 ] && { say "bench $label: SKIPPED (deadline)"; return; }
    local log=$OUT/b_$((++NB)).log
    say "bench $label:"; env "${env[@]}" timeout 90 "$BIN/bench_decode" "$@" >"$log" 2>&1
    say "  rc $?"; grep -E '^(decode|bench_decode|prefill)' "$log" | tee -a "$S" >/dev/null
}
A=(--synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only)
for r in 1 2; do
    bd "27B neither" X=0 -- "${A[@]}"; bd "27B attn" NINFER_ATTN_DECODE=2 -- "${A[@]}"
    bd "27B gdn" NINFER_GDN_DECODE=2 -- "${A[@]}"; bd "27B both" NINFER_ATTN_DECODE=2 NINFER_GDN_DECODE=2 -- "${A[@]}"
done
B=(--synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 8192 --gen 16 --decode-only)
bd "35B neither" X=0 -- "${B[@]}"; bd "35B both" NINFER_ATTN_DECODE=2 NINFER_GDN_DECODE=2 -- "${B[@]}"
say "done at $(($(date +%s) - T0)) s"
(cd "$OUT" && tar czf logs.tgz ./t_*.log ./b_*.log && rm -f ./t_*.log ./b_*.log)
