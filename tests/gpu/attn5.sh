#!/usr/bin/env bash
# ninfer - attention decode v4 device run (branch wip/attn5, kernels/PERF_NOTES.md "Attention decode v4
# (prepared, not run)"): [attention_decode] (the staged path against fp64 and the split path, bit for
# bit), [cuda_backend] with NINFER_ATTN_DECODE=2 (graph = eager, batch 8 = singles, cosines), then
# [mixer_decode_timing] alone (split and staged RESULT lines side by side), then bench_decode 27B q4
# with NINFER_ATTN_DECODE unset and =2 alternated, all under one deadline (LIMIT s, default 420).
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/attn5] [LIMIT=420]
# bash tests/gpu/attn5.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode
# and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
LIMIT=${LIMIT:-420}
D=${NINFER_GPU_BIN:-.deps/attn5}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
BIN=$D/bin
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD" # fixtures of this copy, wherever the binaries were built
mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((LIMIT - ($(date +%s) - T0))); }
cap() { local l; l=$(left); l=$((l - 3)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
say "attn5: device $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
run_test() { # name, cap seconds, filter, then optional VAR=value settings
    local start t r name=$1 c=$2 filter=$3; shift 3; start=$(date +%s); t=$(cap "$c")
    if [ "$t" -lt 5 ]; then say "test $name: SKIPPED (deadline)"; return; fi
    if env "$@" timeout "$t" "$BIN/test_gpu" "$filter" >"$OUT/test_$name.log" 2>&1; then r=PASS; else r="FAIL rc $?"; fi
    say "test $name: $r in $(($(date +%s) - start)) s (limit $t); $(grep -E '^(All tests passed|test cases:)' "$OUT/test_$name.log" | head -1)"
    case "$r" in FAIL*) grep -E -B4 -A14 'FAILED|failed|with expansion' "$OUT/test_$name.log" | head -60 >>"$S" ;; esac
    grep -E '^RESULT ' "$OUT/test_$name.log" >>"$S"
}
run_test attention_decode 200 "[attention_decode]" &
run_test cuda_backend_staged 150 "[cuda_backend]" NINFER_ATTN_DECODE=2 &
wait
run_test mixer_decode_timing 120 "[mixer_decode_timing]"
say "tests done at $(($(date +%s) - T0)) s"
i=0
bench() { # cap seconds, NINFER_ATTN_DECODE value ("" = unset), bench_decode arguments
    i=$((i + 1)); local start t; start=$(date +%s); t=$(cap "$1")
    if [ "$t" -lt 10 ]; then say "bench NINFER_ATTN_DECODE=$2: SKIPPED (deadline)"; return; fi
    if [ -n "$2" ]; then
        NINFER_ATTN_DECODE=$2 timeout "$t" "$BIN/bench_decode" "${@:3}" >"$OUT/bench_$i.log" 2>&1 || say "bench $i: rc $?"
    else
        env -u NINFER_ATTN_DECODE timeout "$t" "$BIN/bench_decode" "${@:3}" >"$OUT/bench_$i.log" 2>&1 || say "bench $i: rc $?"
    fi
    say "bench NINFER_ATTN_DECODE=${2:-unset} ${*:3} ($(($(date +%s) - start)) s):"
    grep -E '^(decode|weights|copy)' "$OUT/bench_$i.log" >>"$S"
}
# Alternated (same machine, same minutes), so that drift hits both settings alike.
for v in "" 2 "" 2; do
    bench 60 "$v" --synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only
done
say "done at $(($(date +%s) - T0)) s"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
cat "$S"
