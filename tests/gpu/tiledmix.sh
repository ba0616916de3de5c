#!/usr/bin/env bash
# ninfer - tiledmix device run (tiled q5/q6/q8, the upstream mix): GPU tests side by side, then decode benches
# one at a time, every step bounded by one deadline. Logs under $OUT (kernels/PERF_NOTES.md "Tiled
# q5/q6/q8 decode layout"). Usage (repository root, on the GPU machine): OUT=dir
# [NINFER_GPU_BIN=.deps/tiledmix] [LIMIT=230] tests/gpu/tiledmix.sh, where $NINFER_GPU_BIN/bin.tar.xz
# holds stripped test_gpu, bench_decode and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
LIMIT=${LIMIT:-230}
D=${NINFER_GPU_BIN:-.deps/tiledmix}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
BIN=$D/bin
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD" # fixtures of this copy, wherever the binaries were built
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((LIMIT - ($(date +%s) - T0))); }
cap() { local l; l=$(left); l=$((l - 4)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
say "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
run_test() { # name, cap seconds, filter
    local start t; start=$(date +%s); t=$(cap "$2")
    if [ "$t" -lt 5 ]; then say "test $1: SKIPPED (deadline)"; return; fi
    if timeout "$t" "$BIN/test_gpu" "$3" >"$OUT/test_$1.log" 2>&1; then r=PASS; else r="FAIL rc $?"; fi
    say "test $1: $r in $(($(date +%s) - start)) s (limit $t); $(grep -E '^(All tests passed|test cases:)' "$OUT/test_$1.log" | head -1)"
    case "$r" in FAIL*) grep -E -B4 -A14 'FAILED|failed|with expansion' "$OUT/test_$1.log" | head -60 >>"$S" ;; esac
    grep -E '^RESULT ' "$OUT/test_$1.log" >>"$S"
}
# Tests: host-side encoding dominates, so they run side by side, [gemv] and [gemv_pipe] split by case.
run_test gemv_edge 110 "gemv matches an fp64 reference on edge*" &
run_test gemv_lo 110 "gemv: low halves*" &
run_test gemv_sizes 60 "gemv: q5/q6/q8 sizes*" &
run_test gemv_layers 110 "gemv matches an fp64 reference at the 27B*" &
run_test gemv_layers_q 110 "gemv: q5/q6/q8 at the 27B*" &
run_test gemv_nvfp4 110 "gemv: nvfp4*" &
run_test gemv_batch 110 "gemv: a batch of 8*" &
run_test gemv_refuse 60 "gemv refuses*" &
run_test gemv_pipe_old 110 "gemv_pipe: every tiled weight path*" &
run_test gemv_pipe_new 110 "gemv_pipe: q5/q6/q8*" &
run_test gemv_pipe_carve 60 "gemv_pipe: a smaller*" &
run_test dequant 60 "dequant_bf16 equals*" &
run_test formats_e2e 110 "[formats_e2e]" &
run_test cuda_backend 110 "[cuda_backend]" &
run_test moe_decode 110 "[moe_decode]" &
wait
say "tests done at $(($(date +%s) - T0)) s"
i=0
bench() { # VAR=value, then bench_decode's arguments
    i=$((i + 1)); local start t; start=$(date +%s); t=$(cap 45)
    if [ "$t" -lt 12 ]; then say "bench $*: SKIPPED (deadline)"; return; fi
    env "$1" timeout "$t" "$BIN/bench_decode" "${@:2}" >"$OUT/bench_$i.log" 2>&1 || say "bench $*: rc $?"
    say "bench $* ($(($(date +%s) - start)) s):"; grep -E '^(decode|prefill|weights|copy)' "$OUT/bench_$i.log" >>"$S"
}
bench X=1 --synthetic qwen3.6-27b --recipe mix --batch 1,8 --prompt-len 512,8192 --gen 16
bench X=1 --synthetic qwen3.6-35b-a3b --recipe mix --batch 1,8 --prompt-len 512,8192 --gen 16
bench NINFER_GEMV_TILED_Q5Q8=0 --synthetic qwen3.6-27b --recipe mix --batch 1,8 --prompt-len 512 --gen 16 --decode-only
bench X=1 --synthetic qwen3.6-27b --recipe q8 --batch 1 --prompt-len 512 --gen 16 --decode-only
bench X=1 --synthetic qwen3.6-27b --recipe q5 --batch 1 --prompt-len 512 --gen 16 --decode-only
bench X=1 --synthetic qwen3.6-27b --recipe q6 --batch 1 --prompt-len 512 --gen 16 --decode-only
bench NINFER_GEMV_TILED_Q5Q8=0 --synthetic qwen3.6-35b-a3b --recipe mix --batch 1 --prompt-len 512 --gen 16 --decode-only
say "done at $(($(date +%s) - T0)) s"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
cat "$S"
