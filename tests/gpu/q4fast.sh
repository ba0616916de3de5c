#!/usr/bin/env bash
# ninfer - q4fast device run (branch wip/q4fast: the tiled GEMV ring's per-step overhead cut, staged x
# without null rows; kernels/PERF_NOTES.md "Cheaper q4 ring step (q4fast)"): the GEMV, ring, dequant,
# MoE, end-to-end and runner tests side by side, then decode benches of this branch and of main's
# binary alternated, then the q4 GEMV micro-bench of both, all under one deadline (LIMIT s, default 300).
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/q4fast] [LIMIT=300]
# bash tests/gpu/q4fast.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode,
# bench_gpu (this branch), bench_decode_base, bench_gpu_base (main's), optionally bench_decode_imad
# (this branch with -DNINFER_Q4_SHR_IMAD=1) and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
LIMIT=${LIMIT:-300}
D=${NINFER_GPU_BIN:-.deps/q4fast}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
BIN=$D/bin
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD" # fixtures of this copy, wherever the binaries were built
mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((LIMIT - ($(date +%s) - T0))); }
cap() { local l; l=$(left); l=$((l - 3)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
say "q4fast: device $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
run_test() { # name, cap seconds, filter
    local start t r; start=$(date +%s); t=$(cap "$2")
    if [ "$t" -lt 5 ]; then say "test $1: SKIPPED (deadline)"; return; fi
    if timeout "$t" "$BIN/test_gpu" "$3" >"$OUT/test_$1.log" 2>&1; then r=PASS; else r="FAIL rc $?"; fi
    say "test $1: $r in $(($(date +%s) - start)) s (limit $t); $(grep -E '^(All tests passed|test cases:)' "$OUT/test_$1.log" | head -1)"
    case "$r" in FAIL*) grep -E -B4 -A14 'FAILED|failed|with expansion' "$OUT/test_$1.log" | head -60 >>"$S" ;; esac
}
# [gemv] and [gemv_pipe] split by case (host-side encoding dominates), the rest by tag.
run_test gemv_edge 90 "gemv matches an fp64 reference on edge*" &
run_test gemv_lo 90 "gemv: low halves*" &
run_test gemv_layers 90 "gemv matches an fp64 reference at the 27B*" &
run_test gemv_layers_q 90 "gemv: q5/q6/q8 at the 27B*" &
run_test gemv_batch 90 "gemv: a batch of 8*" &
run_test gemv_pipe_all 90 "gemv_pipe: every tiled weight path*" &
run_test gemv_pipe_q 90 "gemv_pipe: q5/q6/q8*" &
run_test gemv_pipe_carve 60 "gemv_pipe: a smaller*" &
run_test dequant 60 "dequant_bf16 equals*" &
run_test moe_decode 90 "[moe_decode]" &
run_test formats_e2e 90 "[formats_e2e]" &
run_test cuda_backend 90 "[cuda_backend]" &
wait
say "tests done at $(($(date +%s) - T0)) s"
i=0
bench() { # cap seconds, binary, bench_decode arguments
    i=$((i + 1)); local start t; start=$(date +%s); t=$(cap "$1")
    if [ "$t" -lt 10 ]; then say "bench ${*:2}: SKIPPED (deadline)"; return; fi
    timeout "$t" "$BIN/$2" "${@:3}" >"$OUT/bench_$i.log" 2>&1 || say "bench ${*:2}: rc $?"
    say "bench ${*:2} ($(($(date +%s) - start)) s):"; grep -E '^(decode|weights|copy)' "$OUT/bench_$i.log" >>"$S"
}
# This branch, main's binary and (if packed) this branch built with -DNINFER_Q4_SHR_IMAD=1, alternated
# (same machine, same minute); the most important comparison first.
for b in bench_decode bench_decode_base bench_decode_imad; do
    [ -x "$BIN/$b" ] || continue
    bench 40 $b --synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only
done
gpu_bench() { # binary: q4 rows (per-shape GB/s, the 27B / 35B-A3B mixes, every path)
    local t; t=$(cap 35)
    [ -x "$BIN/$1" ] || return
    [ "$t" -lt 10 ] && { say "$1: SKIPPED (deadline)"; return; }
    timeout "$t" "$BIN/$1" "$OUT/$1.txt" q4_g64_fp16 >"$OUT/$1.log" 2>&1
    say "$1 q4_g64_fp16 (rc $?, limit $t s):"; grep -E 'q4_g64_fp16|copy' "$OUT/$1.log" | head -40 >>"$S"
}
gpu_bench bench_gpu
gpu_bench bench_gpu_base
for b in bench_decode bench_decode_base; do
    bench 40 $b --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only
done
say "done at $(($(date +%s) - T0)) s"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
cat "$S"
