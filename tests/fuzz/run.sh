#!/bin/bash
# ninfer - run the libFuzzer targets (tests/fuzz/fuzz_*.cpp) over their committed seed corpora
# for a bounded time each; print executions, exec/s and coverage per target; fail on any crash.
# Build first: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DNINFER_FUZZ=ON
#              -DNINFER_TESTS=OFF && cmake --build build-fuzz --target fuzz_all
# Usage: tests/fuzz/run.sh [SECONDS_PER_TARGET (10)] [BUILD_DIR (build-fuzz)] [TARGET...]
# NINFER_FUZZ_RUNS=N also stops a target after N executions (the long campaign of issue 30:
# NINFER_FUZZ_RUNS=10000000 tests/fuzz/run.sh 1800 build-fuzz: 10^7 executions or 30 minutes each).
# New inputs go to $NINFER_FUZZ_WORK/<target>/ (default: a temp dir, removed), never into the
# committed corpus; a crash input is kept as $NINFER_FUZZ_WORK/crash-<target>-<hash> (kept).
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10}
build=${2:-build-fuzz}
shift $(( $# < 2 ? $# : 2 ))
work=${NINFER_FUZZ_WORK:-}
[ -n "$work" ] || { work=$(mktemp -d /tmp/ninfer-fuzz.XXXXXX); trap 'rm -rf "$work"' EXIT; }
mkdir -p "$work"

# target  max_len  dictionary
table="http 16384 http.dict
chat_request 8192 json.dict
responses_request 8192 json.dict
anthropic_request 8192 json.dict
completions_request 4096 json.dict
chat_template 8192 json.dict
config 4096 config.dict
control_frames 4096 -
artifact 16384 json.dict
slot_file 8192 -
tokenizer 2048 -"

failed=0
printf '%-20s %12s %10s %8s %6s  %s\n' target executions exec/s cov ft result
while read -r target max_len dict; do
    if [ $# -gt 0 ] && [[ " $* " != *" $target "* ]]; then continue; fi
    mkdir -p "$work/$target"
    if ! compgen -G "tests/fuzz/corpus/$target/*" > /dev/null; then
        printf '%-20s %12s %10s %8s %6s  %s\n' "$target" - - - - "FAILED (no seed corpus in tests/fuzz/corpus/$target/)"
        failed=1
        continue
    fi
    args=(-max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$work/crash-$target-")
    [ -n "${NINFER_FUZZ_RUNS:-}" ] && args+=(-runs="$NINFER_FUZZ_RUNS")
    [ "$dict" != - ] && args+=(-dict="tests/fuzz/$dict")
    log="$work/$target.log"
    "$build/tests/fuzz/fuzz_$target" "${args[@]}" "$work/$target" "tests/fuzz/corpus/$target" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    result=ok
    if [ $rc -ne 0 ]; then
        result="FAILED (exit $rc; log $log)"
        failed=1
        grep -E 'ERROR|SUMMARY|fuzz[_a-z]*:|Test unit written' "$log" | head -8 | sed 's/^/    /'
    fi
    printf '%-20s %12s %10s %8s %6s  %s\n' "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done <<<"$table"
[ $failed -eq 0 ] || { [ -z "${NINFER_FUZZ_WORK:-}" ] && trap - EXIT && echo "fuzz: inputs kept in $work"; exit 1; }
