#!/usr/bin/env bash
# ninfer - on the GPU machine: the MoE decode v4 A/B (kernels/PERF_NOTES.md "MoE decode v4").
# [moe_decode] with NINFER_MOE_V4=0 (V3 cases, the explicit V4/V4Cluster cases, RESULT lines of all
# three paths) and =2 (the q4 default cases through the switch); [cuda_backend] with =2 (its fixtures
# are not all-q4 MoE: V3 must still pass); bench_decode 35B-A3B q4 with =0, 1, 2; then, while time is
# left, an ncu step sum (batch 1 and 8, V4Cluster), ncu MoE kernel details and memcheck of the v4 case.
# Usage (repository root): OUT=/some/dir NINFER_GPU_BIN=dir bash tests/gpu/moe_v4.sh
#   (dir: stripped test_gpu and bench_decode of a Release CUDA 90a build, libsimdjson.so.14 beside
#   them; files named *.xz there are unpacked first). At most ~9.5 minutes; $OUT/summary.txt and
#   $OUT/logs.tgz.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
B=${NINFER_GPU_BIN:-build-gpu/tests}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B:${LD_LIBRARY_PATH:-}"
export NINFER_SOURCE_DIR="$PWD"
for f in test_gpu bench_decode; do
    if [ -f "$B/$f.xz" ] && [ ! -x "$B/$f" ]; then xz -dc "$B/$f.xz" >"$B/$f" && chmod +x "$B/$f"; fi
done
L=$(mktemp -d /tmp/moe_v4.XXXX)
S=$OUT/summary.txt
: >"$S"
T0=$(date +%s)
status=0
say() { echo "$*" | tee -a "$S"; }
left() { echo $(($1 - ($(date +%s) - T0))); } # seconds to go before mark $1 (seconds from the start)
say "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1)"

# test TAG NINFER_MOE_V4 RESULT-FILTER
test_tag() {
    local st log=$L/test_$1_v$2.log rc
    st=$(date +%s)
    NINFER_MOE_V4=$2 timeout 150 "$B/test_gpu" "[$1]" >"$log" 2>&1
    rc=$?
    [ $rc != 0 ] && status=1
    say "test $1 (NINFER_MOE_V4=$2): rc $rc in $(($(date +%s) - st)) s; $(grep -E '^(All tests passed|test cases:)' "$log" | head -1)"
    [ $rc != 0 ] && grep -E -B4 -A14 'FAILED' "$log" | head -40 | tee -a "$S"
    grep -E '^RESULT ' "$log" | grep -E "$3" | head -14 | tee -a "$S"
}
test_tag moe_decode 0 moe
test_tag moe_decode 2 moe
test_tag cuda_backend 2 "cosine|differing"

for v in 0 1 2; do
    NINFER_MOE_V4=$v timeout 120 "$B/bench_decode" --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8 \
        --prompt-len 512,8192 --gen 8 >"$L/bench_v$v.log" 2>&1
    rc=$?
    [ $rc != 0 ] && status=1
    say "bench_decode NINFER_MOE_V4=$v: rc $rc at $(($(date +%s) - T0)) s"
    grep -E 'decode|copy' "$L/bench_v$v.log" | head -6 | tee -a "$S"
done

if command -v ncu >/dev/null; then
    for b in 1 8; do
        [ "$(left 400)" -gt 0 ] || break
        NINFER_MOE_V4=2 NINFER_PDL=0 timeout 100 ncu --profile-from-start off --clock-control none --cache-control none \
            --metrics gpu__time_duration.sum --csv --print-units base "$B/bench_decode" --synthetic qwen3.6-35b-a3b \
            --recipe q4 --batch $b --prompt-len 512 --gen 2 >"$L/ncu_step_b$b.csv" 2>"$L/ncu_step_b$b.err"
        say "ncu step batch $b (V4Cluster): rc $? at $(($(date +%s) - T0)) s"
        python3 tests/gpu/ncu_sum.py "$L/ncu_step_b$b.csv" 2>&1 | head -24 | tee -a "$S"
    done
    if [ "$(left 450)" -gt 0 ]; then
        NINFER_MOE_V4=2 NINFER_PDL=0 timeout 100 ncu --profile-from-start off -k regex:moe_ --launch-count 3 \
            --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats "$B/bench_decode" \
            --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1 --prompt-len 512 --gen 2 >"$L/ncu_moe.txt" 2>&1
        say "ncu moe details (V4Cluster, batch 1): rc $? at $(($(date +%s) - T0)) s"
        grep -E "moe_|Duration|Registers Per|Block Limit Reg|Issued Warp|Achieved Active" "$L/ncu_moe.txt" | tee -a "$S"
    fi
fi
if command -v compute-sanitizer >/dev/null && [ "$(left 500)" -gt 0 ]; then
    timeout "$(left 560)" compute-sanitizer --tool memcheck --print-limit 5 "$B/test_gpu" "moe decode v4*" >"$L/memcheck.log" 2>&1
    say "memcheck moe decode v4: rc $? $(grep -m1 -E 'ERROR SUMMARY' "$L/memcheck.log")"
fi
tar czf "$OUT/logs.tgz" -C "$L" .
say "total $(($(date +%s) - T0)) s"
exit $status
