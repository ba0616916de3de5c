#!/usr/bin/env bash
# ninfer - on the GPU machine: the decode mixers v3 A/B (kernels/PERF_NOTES.md "Decode mixers v3"):
# the tests of the folded attention and the early GDN state (their switches are off by default),
# the runner's bit tests with the switches on, then bench_decode with each switch off and on.
# Usage (repository root): OUT=/some/dir NINFER_GPU_BIN=dir bash tests/gpu/mixers_v3.sh
#   (dir: stripped test_gpu and bench_decode of a Release CUDA 90a build, libsimdjson.so.14 beside them)
#   MIXV3_PARTS="tests bench" (default both): run one part per device call if the whole is too long.
#   "sanitize" (not in the default): compute-sanitizer memcheck and racecheck over the folded
#   attention's test case (the counters in the scratch tail, the shared-memory reuse of o_sh).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
BIN=${NINFER_GPU_BIN:-build-gpu/tests}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD"
status=0

# test TAG LABEL [VAR=VALUE...]: one test_gpu tag under the given environment.
test_tag() {
    local tag=$1 label=$2
    shift 2
    local start log="$OUT/test_${tag}_$label.log"
    start=$(date +%s)
    if env "$@" timeout 300 "$BIN/test_gpu" "[$tag]" >"$log" 2>&1; then
        say "test $tag ($label): PASS in $(($(date +%s) - start)) s; $(grep -E '^(All tests passed|test cases:)' "$log" | head -1)"
    else
        status=1
        say "test $tag ($label): FAIL; $(grep -E '^(test cases:)' "$log" | head -1)"
        grep -E -B3 -A12 'FAILED' "$log" | head -60 | tee -a "$SUMMARY"
    fi
    grep -E '^RESULT ' "$log" | tee -a "$SUMMARY"
}

PARTS=${MIXV3_PARTS:-tests bench}
if [[ " $PARTS " == *" tests "* ]]; then
test_tag attention_decode default
test_tag gdn_decode default
test_tag mixer_decode_timing default
# The runner's graph == eager and batch 8 == 8 singles bit checks, and the fp8 / int8 KV paths, with
# every switch on (the folds must not change a bit of them).
test_tag cuda_backend switches NINFER_ATTN_FOLD=3 NINFER_GDN_EARLY_STATE=1
test_tag formats_e2e switches NINFER_ATTN_FOLD=3 NINFER_GDN_EARLY_STATE=1
test_tag cuda_backend fold2 NINFER_ATTN_FOLD=2
# The fixtures plan 512-token lanes (<= 8 chunks): merge max 16 would never reach the combine kernel;
# 1 sends every lane past 64 tokens there and merges the shorter ones in the fold (both in one batch).
test_tag cuda_backend fold3_m1 NINFER_ATTN_FOLD=3 NINFER_ATTN_FOLD_MERGE_MAX=1
test_tag cuda_backend fold1 NINFER_ATTN_FOLD=1
fi

if [[ " $PARTS " == *" sanitize "* ]] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        timeout 280 compute-sanitizer --tool "$tool" --print-limit 5 "$BIN/test_gpu" "folded attention decode*" \
            >"$OUT/${tool}_attention_fold.log" 2>&1
        rc=$?
        [ "$rc" = 0 ] || status=1
        say "$tool folded attention decode: rc $rc $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${tool}_attention_fold.log")"
    done
fi

# bench MODEL GEN LABEL [VAR=VALUE...]
bench() {
    local model=$1 gen=$2 label=$3
    shift 3
    local log="$OUT/bench_${model}_$label.log"
    say "bench_decode $model ($label: ${*:-switches off}):"
    env "$@" timeout 200 "$BIN/bench_decode" --synthetic "$model" --recipe q4 --batch 1,8 --prompt-len 512,8192 \
        --gen "$gen" >"$log" 2>&1 || { status=1; say "bench_decode: FAILED"; tail -5 "$log"; }
    cat "$log" >>"$SUMMARY"
}
if [[ " $PARTS " == *" bench "* ]]; then
bench qwen3.6-35b-a3b 8 off
bench qwen3.6-35b-a3b 8 fold1 NINFER_ATTN_FOLD=1
bench qwen3.6-35b-a3b 8 fold2 NINFER_ATTN_FOLD=2
bench qwen3.6-35b-a3b 8 fold3 NINFER_ATTN_FOLD=3
bench qwen3.6-35b-a3b 8 fold3_gdn NINFER_ATTN_FOLD=3 NINFER_GDN_EARLY_STATE=1
bench qwen3.6-35b-a3b 8 fold3_gdn_m16 NINFER_ATTN_FOLD=3 NINFER_ATTN_FOLD_MERGE_MAX=16 NINFER_GDN_EARLY_STATE=1
bench qwen3.6-27b 8 off
bench qwen3.6-27b 8 fold3_gdn NINFER_ATTN_FOLD=3 NINFER_GDN_EARLY_STATE=1
bench qwen3.6-27b 8 fold3_gdn_m16 NINFER_ATTN_FOLD=3 NINFER_ATTN_FOLD_MERGE_MAX=16 NINFER_GDN_EARLY_STATE=1
bench qwen3.6-27b 8 fold1 NINFER_ATTN_FOLD=1
fi
cat "$SUMMARY"
exit $status
