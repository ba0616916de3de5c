#!/usr/bin/env bash
# ninfer - the serving benchmark on the GPU machine (issue 27): per model, a synthetic artifact
# converted here, `ninferctl bench --json` of that artifact (the engine's speed: same weights, same
# run), then ninferd on it under tests/gpu/serve_load.py's scenarios, every figure beside the bench's.
# $OUT/serve_summary.txt: the phase times and one table per model and server variant;
# $OUT/serve_logs.tar.gz: the results JSON, bench JSON, convert/bench/ninferd/load logs.
#
# Usage (repository root): OUT=/some/dir NINFER_GPU_BIN=.deps/serve tests/gpu/serve_bench.sh
#   NINFER_GPU_BIN=dir        ninferd and ninferctl (CUDA builds), the shared libraries Ubuntu lacks
#                             and tokenizer/ (tests/gpu/serve_pack.sh makes it), or dir/serve.tar.xz
#                             holding them
#   NINFER_SERVE_MODELS       shapes (default "qwen3.6-35b-a3b qwen3.6-27b")
#   NINFER_SERVE_RECIPE       convert recipe (default q4); NINFER_SERVE_CONVERT_ARGS more options
#   NINFER_SERVE_SCENARIOS    serve_load.py scenarios (default decode,ttft,streams,steady,mixed,short,constrained)
#   NINFER_SERVE_LOAD_ARGS    more serve_load.py options (counts, lengths, --temperature)
#   NINFER_SERVE_VARIANTS     "label[@bindir][:ninferd options];..." servers measured on each
#                             artifact (default "serve"), e.g. "base;nocache:--host-cache-mib 0" or
#                             "before@.deps/old;after@.deps/new" (bindir as NINFER_GPU_BIN); on an
#                             artifact with the MTP head (--components ...,mtp) ninferd's default
#                             --speculative auto speculates (mtp:3): a plain baseline names
#                             "off:--speculative off"
#   NINFER_SERVE_ARGS         ninferd options for every variant
#   NINFER_SERVE_CONCURRENCY, NINFER_SERVE_MAX_CONTEXT  (default 8 and 40960, the issue's settings)
#   NINFER_SERVE_BENCH=0      no ninferctl bench; NINFER_SERVE_BENCH_ARGS its options (default
#                             --prompt-len 512,1024,8192,32768 --batch 1,2,4,8 --gen 32)
#   NINFER_SERVE_MEDIA        images / videos (paths) each variant's server also gets, one at a time,
#                             through tests/gpu/media_ttft.py (a streamed chat request's first token,
#                             median of NINFER_SERVE_MEDIA_REPS, default 3) after its scenarios, with
#                             the /metrics media decode and tower seconds per item; the artifact needs
#                             its vision tower (NINFER_SERVE_CONVERT_ARGS="--components text,vision")
#                             and the server FFmpeg (NINFER_FFMPEG_DIR, tests/gpu/build_min_ffmpeg.sh)
#   NINFER_SERVE_DEVICE       cuda (default) or cpu (the CI smoke run)
#   NINFER_SERVE_ARTIFACTS    a folder whose MODEL.ninfer is used as it is when present (converted
#                             beforehand with the same recipe, e.g. while GPU tests run), kept
#   NINFER_SERVE_DIR          where artifacts are written (default /dev/shm when it has 40 GB
#                             free, else /tmp); NINFER_SERVE_LOGDIR keeps the logs there instead
#                             of only in the tarball
# Exit status 1 when a conversion, bench, server start or scenario failed (the rest still runs).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/serve-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY=$OUT/serve_summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
status=0
fail() { say "$*"; status=1; }

space_kb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
ART_DIR=${NINFER_SERVE_DIR:-}
if [ -z "$ART_DIR" ]; then
    ART_DIR=/tmp
    [ "$(space_kb /dev/shm || echo 0)" -gt 41943040 ] 2>/dev/null && ART_DIR=/dev/shm
fi
WORK=$(mktemp -d "$ART_DIR/ninfer-serve.XXXXXX") || { echo "serve_bench: cannot make a folder in $ART_DIR" >&2; exit 1; }
LOGS=${NINFER_SERVE_LOGDIR:-$WORK/logs}
mkdir -p "$LOGS"
DAEMON_PID=
cleanup() {
    [ -n "$DAEMON_PID" ] && kill -KILL "$DAEMON_PID" 2>/dev/null
    (cd "$LOGS" && tar -czf "$OUT/serve_logs.tar.gz" .) 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
# Long steps run in the background under `wait`, which a signal interrupts (a foreground child would
# delay the trap until it ended): a timeout still stops the step and the server and keeps the logs.
CHILD=
run_child() {
    "$@" &
    CHILD=$!
    wait "$CHILD"
    local rc=$?
    CHILD=
    return $rc
}
trap '[ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null; exit 143' TERM INT

# bin_dir DIR: DIR itself, or where DIR/serve.tar.xz was unpacked; absolute.
n_unpacked=0
bin_dir() {
    local d
    d=$(cd "$1" 2>/dev/null && pwd) || { echo "serve_bench: no folder $1" >&2; return 1; }
    if [ ! -x "$d/ninferd" ] && [ -f "$d/serve.tar.xz" ]; then
        n_unpacked=$((n_unpacked + 1))
        mkdir -p "$WORK/bin$n_unpacked" && tar -xJf "$d/serve.tar.xz" -C "$WORK/bin$n_unpacked" || return 1
        d=$WORK/bin$n_unpacked
    fi
    for f in ninferd ninferctl; do [ -x "$d/$f" ] || { echo "serve_bench: $d has no $f" >&2; return 1; }; done
    local missing
    missing=$(LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" ldd "$d/ninferd" "$d/ninferctl" 2>&1 | grep 'not found' | sort -u)
    [ -z "$missing" ] || { echo "serve_bench: libraries missing beside $d: $missing" >&2; return 1; }
    echo "$d"
}
BIN=$(bin_dir "${NINFER_GPU_BIN:-build-gpu/tests}") || { say "serve_bench: FAILED: no usable binaries"; exit 1; }
TOKENIZER=${NINFER_SERVE_TOKENIZER:-}
[ -z "$TOKENIZER" ] && [ -f "$BIN/tokenizer/tokenizer.json" ] && TOKENIZER=$BIN/tokenizer
DEVICE=${NINFER_SERVE_DEVICE:-cuda}
RECIPE=${NINFER_SERVE_RECIPE:-q4}
SCENARIOS=${NINFER_SERVE_SCENARIOS:-decode,ttft,streams,steady,mixed,short,constrained}
words() { read -r -d '' -a "$1" <<<"$2" || true; } # words ARRAY TEXT: TEXT split at blanks and newlines
words convert_args "${NINFER_SERVE_CONVERT_ARGS:-}"
words bench_args "${NINFER_SERVE_BENCH_ARGS:---prompt-len 512,1024,8192,32768 --batch 1,2,4,8 --gen 32}"
words load_args "${NINFER_SERVE_LOAD_ARGS:-}"
words common_args "${NINFER_SERVE_ARGS:-}"
IFS=';' read -r -a variants <<<"${NINFER_SERVE_VARIANTS:-serve}"
[ -n "$TOKENIZER" ] && convert_args+=(--tokenizer "$TOKENIZER")
: >"$WORK/empty.conf"
say "serve_bench: device $DEVICE, binaries $BIN, artifacts in $ART_DIR, scenarios $SCENARIOS"
command -v nvidia-smi >/dev/null && say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"

# start_daemon LOG BINDIR ARTIFACT OPTIONS...: sets DAEMON_PID and PORT once /health answers 200.
start_daemon() {
    local log=$1 bin=$2 artifact=$3 start=$SECONDS
    shift 3
    LD_LIBRARY_PATH="$bin:${LD_LIBRARY_PATH:-}" "$bin/ninferd" --config "$WORK/empty.conf" --artifact "$artifact" \
        --device "$DEVICE" --host 127.0.0.1 --port 0 --control-socket "$WORK/control.sock" --state-dir "$WORK/state" \
        --max-concurrency "${NINFER_SERVE_CONCURRENCY:-8}" --max-context "${NINFER_SERVE_MAX_CONTEXT:-40960}" \
        "$@" >"$log" 2>&1 &
    DAEMON_PID=$! PORT=
    while [ $((SECONDS - start)) -lt 300 ]; do
        kill -0 "$DAEMON_PID" 2>/dev/null || { DAEMON_PID=; return 1; }
        [ -z "$PORT" ] && PORT=$(sed -n -E 's/.*listening on 127\.0\.0\.1:([0-9]+).*/\1/p' "$log" 2>/dev/null | head -1)
        if [ -n "$PORT" ] && python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
            "http://127.0.0.1:$PORT/health" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}
stop_daemon() {
    [ -n "$DAEMON_PID" ] || return 0
    kill -TERM "$DAEMON_PID" 2>/dev/null
    for _ in $(seq 120); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$DAEMON_PID" 2>/dev/null
    wait "$DAEMON_PID" 2>/dev/null
    DAEMON_PID=
}

for model in ${NINFER_SERVE_MODELS:-qwen3.6-35b-a3b qwen3.6-27b}; do
    artifact=$WORK/$model.ninfer
    t=$SECONDS
    prebuilt=${NINFER_SERVE_ARTIFACTS:+$NINFER_SERVE_ARTIFACTS/$model.ninfer}
    if [ -n "$prebuilt" ] && [ -f "$prebuilt" ]; then
        artifact=$prebuilt
        say "artifact $model: $prebuilt, converted beforehand ($(($(stat -c %s "$artifact") >> 20)) MiB)"
    else
        run_child timeout 600 env LD_LIBRARY_PATH="$BIN:${LD_LIBRARY_PATH:-}" "$BIN/ninferctl" convert --synthetic "$model" "$artifact" --recipe "$RECIPE" "${convert_args[@]}" \
            >"$LOGS/convert_$model.log" 2>&1
        rc=$?
        if [ $rc -ne 0 ]; then
            fail "convert $model: FAILED (exit $rc): $(tail -2 "$LOGS/convert_$model.log" | tr '\n' ' ')"
            rm -f "$artifact"
            continue
        fi
        say "convert $model --recipe $RECIPE: $(($(stat -c %s "$artifact") >> 20)) MiB in $((SECONDS - t)) s"
    fi
    bench_opt=()
    if [ "${NINFER_SERVE_BENCH:-1}" != 0 ]; then
        t=$SECONDS
        if run_child timeout 400 env LD_LIBRARY_PATH="$BIN:${LD_LIBRARY_PATH:-}" "$BIN/ninferctl" bench "$artifact" "${bench_args[@]}" --json >"$LOGS/bench_$model.json" \
            2>"$LOGS/bench_$model.log" && python3 -m json.tool "$LOGS/bench_$model.json" >/dev/null 2>&1; then
            say "bench $model ${bench_args[*]}: ok in $((SECONDS - t)) s"
            bench_opt=(--bench "$LOGS/bench_$model.json")
        else
            fail "bench $model: FAILED in $((SECONDS - t)) s: $(tail -3 "$LOGS/bench_$model.log" | tr '\n' ' ')"
        fi
    fi
    for variant in "${variants[@]}"; do
        spec=${variant%%:*} vargs=()
        [[ $variant == *:* ]] && words vargs "${variant#*:}"
        label=${spec%%@*} vbin=$BIN
        if [[ $spec == *@* ]]; then
            vbin=$(bin_dir "${spec#*@}") || { fail "$model $label: FAILED: no usable binaries in ${spec#*@}"; continue; }
        fi
        log=$LOGS/ninferd_${model}_$label.log
        t=$SECONDS
        if ! start_daemon "$log" "$vbin" "$artifact" "${common_args[@]}" "${vargs[@]}"; then
            fail "ninferd $model $label: FAILED to start (exited, or no /health 200 within 300 s): $(tail -3 "$log" | tr '\n' ' ')"
            stop_daemon
            continue
        fi
        say "ninferd $model $label ($vbin) ${common_args[*]} ${vargs[*]}: ready in $((SECONDS - t)) s"
        t=$SECONDS
        run_child timeout 900 python3 "$SRC/tests/gpu/serve_load.py" --url "http://127.0.0.1:$PORT" \
            --label "$model $RECIPE $label" --json "$LOGS/serve_${model}_$label.json" --summary "$SUMMARY" \
            --scenarios "$SCENARIOS" "${bench_opt[@]}" "${load_args[@]}" >"$LOGS/load_${model}_$label.log" 2>&1 ||
            fail "scenarios $model $label: FAILED (exit $?; see load_${model}_$label.log): $(grep -h 'FAILED' "$LOGS/load_${model}_$label.log" | head -3)"
        say "scenarios $model $label: $((SECONDS - t)) s"
        for media in ${NINFER_SERVE_MEDIA:-}; do
            if run_child timeout 600 python3 "$SRC/tests/gpu/media_ttft.py" --url "http://127.0.0.1:$PORT" --file "$media" \
                --reps "${NINFER_SERVE_MEDIA_REPS:-3}" --label "$model $label $(basename "$media")" >"$LOGS/media_$label.log" 2>&1; then
                say "$(grep -E '^RESULT|^  per item' "$LOGS/media_$label.log")"
            else
                fail "media $model $label $media: FAILED: $(tail -2 "$LOGS/media_$label.log" | tr '\n' ' ')"
            fi
        done
        stop_daemon
    done
    [ "$artifact" = "$WORK/$model.ninfer" ] && rm -f "$artifact"
done
say "serve_bench: done in $SECONDS s, status $status"
exit $status
