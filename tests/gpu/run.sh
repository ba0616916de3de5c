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
#   NINFER_GPU_JOBS=n    test cases run as n processes side by side (default 8; timing tags alone
#                        afterwards); 1 = one process per tag, in order.
#   NINFER_GPU_MICROBENCH=0 skip bench_gpu (GEMV), bench_gemm (GEMM, dequant), bench_mem
#                        (memory bursts by access pattern, TLB misses) and bench_chain (a
#                        dependent stage's hand-off: PDL launches vs flags in one kernel).
#   NINFER_GPU_SERVE=1   also run the serving benchmark (tests/gpu/serve_bench.sh; ninferd and
#                        ninferctl from NINFER_SERVE_BIN, default the binaries' folder).
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
           cmake --build build-gpu-device --target test_gpu bench_gpu bench_gemm bench_mem bench_chain bench_decode -j16; } >"$OUT/build.log" 2>&1; then
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
ALL_TAGS="gemv gemv_pipe gemv_q4a8 int8_x real_shape gemm rmsnorm gdn_decode gdn_window attention_decode mrope_prep mixers_f32 gdn_prefill attention_prefill sample sample_timing cuda_sampling cuda_deferred_sample cuda_sliced_prefill cuda_backend cuda_verify cuda_round cuda_speculative cuda_multimodal vision_tower_gpu vision_flash cuda_mtp cuda_mtp_diag cuda_mtp_images cuda_mtp_multimodal moe_prefill moe_decode prefill_runner weight_decode formats_e2e mixer_decode_timing vision_tower_timing"
LOGS=${NINFER_GPU_LOGDIR:-$OUT}
mkdir -p "$LOGS"
# report TAG RESULT DETAIL LOG: one tag's summary line, its failures and RESULT lines.
report() {
    say "test $1: $2$3"
    [ "$2" = FAIL ] && grep -E -B3 -A12 'FAILED|failed' "$4" | head -60
    grep -E '^RESULT ' "$4" | tee -a "$SUMMARY"
}
run_tag() { # one whole tag in one process
    local start result=PASS
    start=$(date +%s)
    timeout 300 "$BIN/test_gpu" "[$1]" >"$LOGS/test_$1.log" 2>&1 || { result=FAIL; status=1; }
    report "$1" $result " in $(($(date +%s) - start)) s; $(grep -E '^(All tests passed|test cases:)' "$LOGS/test_$1.log" | head -1)" \
        "$LOGS/test_$1.log"
}
# Tags whose RESULT lines are timings run alone, after everything else; the others are mostly host
# work (encoding weights, fp64 references), so with NINFER_GPU_JOBS > 1 their test cases run as
# separate processes side by side and each tag is summed up afterwards in ALL_TAGS order.
TIMED_TAGS=" sample_timing mixer_decode_timing moe_decode vision_tower_timing "
JOBS=${NINFER_GPU_JOBS:-8}
TAGS=${NINFER_GPU_TAGS:-$ALL_TAGS}
if [ "$JOBS" -gt 1 ]; then
    start=$(date +%s)
    rm -rf "$LOGS/cases" && mkdir -p "$LOGS/cases" # one log per test case; test_<tag>.log gathers them
    for tag in $TAGS; do
        [[ "$TIMED_TAGS" == *" $tag "* ]] && continue
        i=0
        while IFS= read -r name; do
            [ -n "$name" ] || continue
            i=$((i + 1))
            # A test spec stops at a comma: match the name up to its first comma as a prefix.
            spec=$name
            [[ "$name" == *,* ]] && spec="${name%%,*}*"
            while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
            # <tag>.<i>: a dot, never part of a tag, so one tag's glob cannot take another's cases
            # (gemv_* matched gemv_pipe's and gemv_q4a8's logs, counting them twice).
            ( s0=$(date +%s); timeout 300 "$BIN/test_gpu" "$spec" >"$LOGS/cases/${tag}.$i.log" 2>&1
              echo "$? $(($(date +%s) - s0))" >"$LOGS/cases/${tag}.$i.rc" ) &
        done < <("$BIN/test_gpu" --list-test-names-only "[$tag]" 2>/dev/null)
    done
    wait
    say "side by side ($JOBS jobs): $(($(date +%s) - start)) s"
    for tag in $TAGS; do
        [[ "$TIMED_TAGS" == *" $tag "* ]] && continue
        log=$LOGS/test_$tag.log result=PASS longest=0 cases=0 asserts=0
        : >"$log"
        for rc in "$LOGS"/cases/"${tag}".*.rc; do
            [ -e "$rc" ] || { result=FAIL; echo "no test case listed" >>"$log"; break; }
            read -r code secs <"$rc"
            cases=$((cases + 1))
            [ "$secs" -gt "$longest" ] && longest=$secs
            [ "$code" = 0 ] || result=FAIL
            cat "${rc%.rc}.log" >>"$log"
            n=$(grep -o -E '(All tests passed \(|^assertions: +)[0-9]+' "${rc%.rc}.log" | tail -1 | grep -o -E '[0-9]+$')
            asserts=$((asserts + ${n:-0}))
        done
        [ "$result" = FAIL ] && status=1
        report "$tag" $result ", $cases test cases side by side (longest $longest s), $asserts assertions" "$log"
    done
    for tag in $TAGS; do [[ "$TIMED_TAGS" == *" $tag "* ]] && run_tag "$tag"; done
else
    for tag in $TAGS; do run_tag "$tag"; done
fi

if [ "${NINFER_GPU_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for tag in rmsnorm gdn_decode gdn_window sample; do
        timeout 120 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/test_gpu" "[$tag]" >"$LOGS/memcheck_$tag.log" 2>&1
        say "memcheck $tag: rc $? $(grep -m1 -E 'ERROR SUMMARY' "$LOGS/memcheck_$tag.log")"
    done
fi

# A microbenchmark: $BIN/NAME with the summary file, its output in $LOGS/LOG.log, unless
# NINFER_GPU_MICROBENCH=0 or the binary is absent; a failure fails the run.
microbench() { # NAME LOG TIMEOUT_S
    [ "${NINFER_GPU_MICROBENCH:-1}" != 0 ] && [ -x "$BIN/$1" ] || return 0
    timeout "$3" "$BIN/$1" "$SUMMARY" >"$LOGS/$2.log" 2>&1 || { status=1; say "$2: FAILED"; tail -5 "$LOGS/$2.log"; }
}
[ "${NINFER_GPU_MICROBENCH:-1}" != 0 ] && [ -x "$BIN/bench_gpu" ] && say "bench:"
microbench bench_gpu bench 300          # decode GEMVs against the copy roofline
microbench bench_gemm bench_gemm 200    # prefill GEMM, dequant and the bf16 tensor-core peak
microbench bench_mem bench_mem 120      # what the memory system gives a burst
microbench bench_chain bench_chain 120  # a dependent stage's hand-off
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
# The serving benchmark (ninferd over HTTP beside ninferctl bench; its table in serve_summary.txt):
# ninferd and ninferctl from NINFER_SERVE_BIN (default the binaries' folder), settings as
# tests/gpu/serve_bench.sh documents.
if [ "${NINFER_GPU_SERVE:-0}" = 1 ]; then
    OUT="$OUT" NINFER_GPU_BIN="${NINFER_SERVE_BIN:-$BIN}" bash tests/gpu/serve_bench.sh >"$LOGS/serve_bench.log" 2>&1 ||
        { status=1; say "serve bench: FAILED"; }
    say "serve bench: $(tail -1 "$LOGS/serve_bench.log") (serve_summary.txt)"
fi
cat "$SUMMARY"
exit $status
