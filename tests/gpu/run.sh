#!/usr/bin/env bash
# ninfer - on the GPU machine: build (or take carried binaries), run every GPU test and the GEMV
# benchmark, write $OUT/summary.txt (and logs beside it). Finishes well under 10 minutes.
#
# Usage (repository root): OUT=/some/dir tests/gpu/run.sh
#   NINFER_GPU_BIN=dir   use prebuilt test_gpu and bench_gpu from dir (default build-gpu/tests,
#                        built here with -DNINFER_CUDA=ON -DNINFER_ONLY_GPU_TESTS=ON and carried)
#   NINFER_GPU_REBUILD=1 build on the GPU machine from the Debian packages in .deps/debs
#                        (apt-get download libsimdjson-dev libsimdjson14 libpcre2-dev
#                        libpcre2-8-0 catch2), unpacked with dpkg -x into .deps/root.
#   NINFER_GPU_SANITIZE=1 also run compute-sanitizer memcheck over the small tests.
#   NINFER_GPU_BENCH_DECODE="args;args" bench_decode runs (default: 27B and 35B-A3B shapes, q4,
#                        batch 1 and 8); shared libraries carried beside the binaries are used.
#   NINFER_GPU_TAGS="a b" test tags to run (default: all of them, below).
#   NINFER_GPU_MICROBENCH=0 skip bench_gpu (GEMV) and bench_gemm (GEMM, dequant).
#   NINFER_GPU_LOGDIR=dir per-test and per-bench logs there (default $OUT); summary.txt stays in
#                        $OUT (the device tool brings back at most 8 files: tar the logs).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
BIN=${NINFER_GPU_BIN:-build-gpu/tests}
export LD_LIBRARY_PATH="$PWD/$BIN:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD" # fixtures of this copy, wherever the binaries were built

# Carried binaries need only test_gpu; the benches run when they are there.
if [ "${NINFER_GPU_REBUILD:-0}" = 1 ] || [ ! -x "$BIN/test_gpu" ]; then
    say "build: on this machine (no carried binaries or NINFER_GPU_REBUILD=1)"
    mkdir -p .deps/root
    for f in .deps/debs/*.deb; do dpkg -x "$f" .deps/root; done
    start=$(date +%s)
    if ! { cmake -S . -B build-gpu-device -G Ninja -DNINFER_CUDA=ON -DNINFER_CUDA_ARCH=90a \
            -DNINFER_ONLY_GPU_TESTS=ON -DNINFER_DEPS_ROOT="$PWD/.deps/root" -DCMAKE_BUILD_TYPE=Release &&
           cmake --build build-gpu-device --target test_gpu bench_gpu bench_gemm bench_decode -j16; } >"$OUT/build.log" 2>&1; then
        say "build: FAILED (see build.log)"
        tail -30 "$OUT/build.log"
        exit 1
    fi
    say "build: ok in $(($(date +%s) - start)) s"
    BIN=build-gpu-device/tests
else
    say "build: carried binaries from $BIN"
fi

say "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
status=0
ALL_TAGS="gemv gemv_pipe gemm rmsnorm gdn_decode attention_decode mixers_f32 gdn_prefill attention_prefill sample sample_timing cuda_sampling cuda_backend moe_prefill moe_decode prefill_runner weight_decode formats_e2e mixer_decode_timing"
LOGS=${NINFER_GPU_LOGDIR:-$OUT}
mkdir -p "$LOGS"
for tag in ${NINFER_GPU_TAGS:-$ALL_TAGS}; do
    start=$(date +%s)
    if timeout 300 "$BIN/test_gpu" "[$tag]" >"$LOGS/test_$tag.log" 2>&1; then
        result=PASS
    else
        result=FAIL
        status=1
    fi
    say "test $tag: $result in $(($(date +%s) - start)) s; $(grep -E '^(All tests passed|test cases:)' "$LOGS/test_$tag.log" | head -1)"
    [ "$result" = FAIL ] && grep -E -B3 -A12 'FAILED|failed' "$LOGS/test_$tag.log" | head -60
    grep -E '^RESULT ' "$LOGS/test_$tag.log" | tee -a "$SUMMARY"
done

if [ "${NINFER_GPU_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for tag in rmsnorm gdn_decode sample; do
        timeout 120 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/test_gpu" "[$tag]" >"$LOGS/memcheck_$tag.log" 2>&1
        say "memcheck $tag: rc $? $(grep -m1 -E 'ERROR SUMMARY' "$LOGS/memcheck_$tag.log")"
    done
fi

if [ "${NINFER_GPU_MICROBENCH:-1}" != 0 ] && [ -x "$BIN/bench_gpu" ]; then
say "bench:"
timeout 300 "$BIN/bench_gpu" "$SUMMARY" >"$LOGS/bench.log" 2>&1 || { status=1; say "bench: FAILED"; tail -5 "$LOGS/bench.log"; }
fi
if [ "${NINFER_GPU_MICROBENCH:-1}" != 0 ] && [ -x "$BIN/bench_gemm" ]; then # prefill GEMM, dequant and the bf16 tensor-core peak
    timeout 200 "$BIN/bench_gemm" "$SUMMARY" >"$LOGS/bench_gemm.log" 2>&1 || { status=1; say "bench_gemm: FAILED"; tail -5 "$LOGS/bench_gemm.log"; }
fi
if [ -x "$BIN/bench_decode" ]; then
    sets=${NINFER_GPU_BENCH_DECODE:---synthetic qwen3.6-27b --recipe q4 --batch 1,8 --prompt-len 512,8192 --gen 16;--synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 --prompt-len 8192 --gen 8}
    i=0
    IFS=';' read -ra arg_sets <<<"$sets"
    for args in "${arg_sets[@]}"; do
        i=$((i + 1))
        say "bench_decode $args:"
        # shellcheck disable=SC2086
        timeout 200 "$BIN/bench_decode" $args >"$LOGS/bench_decode_$i.log" 2>&1 || { status=1; say "bench_decode: FAILED"; }
        cat "$LOGS/bench_decode_$i.log" >>"$SUMMARY"
    done
fi
cat "$SUMMARY"
exit $status
