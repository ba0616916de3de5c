#!/bin/bash
# ninfer - the GPU machine's report scripts, on tables with known answers (they run there on real
# traces; here only their arithmetic): tests/gpu/probe_report.py (the step timeline probe's CSV) and
# tests/gpu/ab_bench.sh (A/B rounds of bench_decode by environment settings).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
python3 "$SRC/tests/gpu/probe_report.py" --selftest

# tests/gpu/ab_bench.sh with a stand-in bench_decode whose step time follows an environment setting:
# the rounds interleave the variants, each variant's settings reach only its own runs, the summary
# gives the means and the change against the first variant, and a failing run is reported.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/old"
cat >"$work/bin/bench_decode" <<'BENCH'
#!/bin/sh
[ "${FAKE_FAIL:-0}" = 1 ] && { echo "cuda: out of memory"; exit 3; }
ms=${FAKE_MS:-2.000}
echo "copy bandwidth (D2D 4 GiB, best of 10, read+write): 4300 GB/s"
echo "decode batch 1 depth 8192: $ms ms/step, 500.0 tok/s, 1.86 GB/step, 24.0% of roofline (median of 16 steps)"
echo "decode batch 8 depth 8192: 4.000 ms/step, 2000.0 tok/s, 7.22 GB/step, 35.0% of roofline (median of 16 steps)"
BENCH
cp "$work/bin/bench_decode" "$work/old/bench_decode"
chmod +x "$work/bin/bench_decode" "$work/old/bench_decode"
out=$(cd "$SRC" && NINFER_GPU_BIN="$work/bin" bash tests/gpu/ab_bench.sh --rounds 2 base fast:FAKE_MS=1.500 \
    "old@$work/old:FAKE_MS=3.000,UNUSED=1" -- --synthetic x)
echo "$out"
grep -q '^== base r1: b1 d8192 2.000 b8 d8192 4.000 $' <<<"$out"
grep -q '^== fast r2: b1 d8192 1.500 b8 d8192 4.000 $' <<<"$out"
grep -q '^== old r2: b1 d8192 3.000 ' <<<"$out"
[ "$(grep -c '^== ' <<<"$out")" = 6 ]
[ "$(sed -n 1,3p <<<"$out" | cut -d' ' -f2 | tr '\n' ' ')" = "base fast old " ] # interleaved
grep -q 'b1 d8192  *base 2.000  fast 1.500 (-25.0%)  old 3.000 (+50.0%)' <<<"$out"
grep -q 'b8 d8192  *base 4.000  fast 4.000 (+0.0%)' <<<"$out"
if fail=$(cd "$SRC" && NINFER_GPU_BIN="$work/bin" bash tests/gpu/ab_bench.sh --rounds 1 base bad:FAKE_FAIL=1 -- x); then
    echo "ab_bench: a failing run must fail the script" >&2
    exit 1
fi
grep -q '^== bad r1: FAILED (exit 3)' <<<"$fail"
grep -q 'out of memory' <<<"$fail"
if (cd "$SRC" && bash tests/gpu/ab_bench.sh base 2>/dev/null); then
    echo "ab_bench: no bench arguments must be a usage error" >&2
    exit 1
fi
echo "ab_bench: ok"
