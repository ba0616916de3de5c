#!/usr/bin/env bash
# ninfer - GDN recurrent decode v4 device run (branch wip/gdn5, kernels/PERF_NOTES.md "GDN recurrent decode
# v4 (prepared, not run)"): [gdn_decode] (Wide4 against fp64 and against Split2 bit for bit) beside
# [cuda_backend] with NINFER_GDN_DECODE=2 (graph = eager, batch 8 = singles, cosines), then the GDN
# timing case of [mixer_decode_timing] (it times both paths itself, so the switch does not matter
# there), then bench_decode 27B q4 (batch 1,8, depth 512,8192) and 35B-A3B q4 (depth 8192) with
# NINFER_GDN_DECODE unset and =2 alternated, all under one deadline (LIMIT s, default 400).
# Usage (repository root on the GPU machine): OUT=dir [NINFER_GPU_BIN=.deps/gdn5] [LIMIT=400]
# bash tests/gpu/gdn5.sh, where $NINFER_GPU_BIN/bin.tar.xz holds stripped test_gpu, bench_decode
# and libsimdjson.so.14.
set -uo pipefail
T0=$(date +%s)
LIMIT=${LIMIT:-400}
D=${NINFER_GPU_BIN:-.deps/gdn5}
mkdir -p "$D/bin" && tar xJf "$D/bin.tar.xz" -C "$D/bin"
BIN=$D/bin
[ -x "$BIN/test_gpu" ] || BIN=$D/bin/bin # archives packed with a top-level bin/
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD" # fixtures of this copy, wherever the binaries were built
unset NINFER_GDN_DECODE
mkdir -p "$OUT"
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((LIMIT - ($(date +%s) - T0))); }
cap() { local l; l=$(left); l=$((l - 3)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
say "gdn5: device $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
run_test() { # name, cap seconds, filter, then optional VAR=value settings
    local start t r name=$1 c=$2 filter=$3; shift 3; start=$(date +%s); t=$(cap "$c")
    if [ "$t" -lt 5 ]; then say "test $name: SKIPPED (deadline)"; return; fi
    if env "$@" timeout "$t" "$BIN/test_gpu" "$filter" >"$OUT/test_$name.log" 2>&1; then r=PASS; else r="FAIL rc $?"; fi
    say "test $name: $r in $(($(date +%s) - start)) s (limit $t); $(grep -E '^(All tests passed|test cases:)' "$OUT/test_$name.log" | head -1)"
    case "$r" in FAIL*) grep -E -B4 -A14 'FAILED|failed|with expansion' "$OUT/test_$name.log" | head -60 >>"$S" ;; esac
    grep -E '^RESULT ' "$OUT/test_$name.log" >>"$S"
}
run_test gdn_decode 90 "[gdn_decode]" &
run_test cuda_backend_wide4 120 "[cuda_backend]" NINFER_GDN_DECODE=2 &
wait
run_test mixer_gdn_timing 60 "decode mixers: GDN time per layer*"
say "tests done at $(($(date +%s) - T0)) s"
i=0
bench() { # cap seconds, NINFER_GDN_DECODE value ("" = unset), bench_decode arguments
    i=$((i + 1)); local start t; start=$(date +%s); t=$(cap "$1")
    if [ "$t" -lt 10 ]; then say "bench NINFER_GDN_DECODE=${2:-unset} ${*:3}: SKIPPED (deadline)"; return; fi
    if [ -n "$2" ]; then
        NINFER_GDN_DECODE=$2 timeout "$t" "$BIN/bench_decode" "${@:3}" >"$OUT/bench_$i.log" 2>&1 || say "bench $i: rc $?"
    else
        timeout "$t" "$BIN/bench_decode" "${@:3}" >"$OUT/bench_$i.log" 2>&1 || say "bench $i: rc $?"
    fi
    say "bench NINFER_GDN_DECODE=${2:-unset} ${*:3} ($(($(date +%s) - start)) s):"
    grep -E '^(decode|weights|copy)' "$OUT/bench_$i.log" >>"$S"
}
# Alternated (same machine, same minutes), so that drift hits both settings alike; one full pair of
# each model first, so a deadline cut still leaves an A/B of both.
B27="--synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16 --decode-only"
B35="--synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 8192 --gen 16 --decode-only"
for round in 1 2; do
    for v in "" 2; do bench 70 "$v" $B27; done
    for v in "" 2; do bench 40 "$v" $B35; done
done
say "done at $(($(date +%s) - T0)) s"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
cat "$S"
