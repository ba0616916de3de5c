#!/bin/sh
# ninfer black-box test - `ninferctl bench ARTIFACT --media FILE | --image WxH` (ctl/bench_vision.h)
# on a tiny synthetic artifact with a vision tower: the JSON report's TTFT is the sum of the measured
# stages and the prompt holds the placeholder expansion; without FFmpeg (NINFER_FFMPEG_DIR pointing
# at an empty directory, as on the GPU machine) the synthetic form still times tower and prefill
# and says why preprocessing was not measured, and --media fails with how to measure without it.
set -eu
: "${NINFER_BIN:?build directory}" "${NINFER_SOURCE_DIR:?source directory}"
CTL="$NINFER_BIN/ctl/ninferctl"
MEDIA="$NINFER_SOURCE_DIR/tests/fixtures/media"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# check JSON_FILE PYTHON_EXPR: the expression over the report r must hold.
check() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)" "$@" \
          || fail "$2 on $(cat "$1")"; }
SUM='abs(r["ttft_best_ms"] - sum(r[s]["best_ms"] for s in ("preprocess","tower","prefill") if r[s]["measured"])) < 0.01'

"$CTL" convert --synthetic tiny "$WORK/tiny.ninfer" --components text,vision >/dev/null 2>&1 || fail "convert --synthetic tiny"

if "$CTL" bench "$WORK/tiny.ninfer" --media "$MEDIA/grad.png" --repeat 2 --json >"$WORK/png.json" 2>"$WORK/err"; then
    # 64x64 is scaled to 256x256 (the 65536 px minimum): 64 merged tokens, all in the prompt.
    check "$WORK/png.json" 'r["kind"] == "image" and r["merged_tokens"] == 64 and r["vision_tokens"] == 64'
    check "$WORK/png.json" 'r["preprocess"]["measured"] and r["tower"]["measured"] and r["prefill"]["measured"]'
    check "$WORK/png.json" "$SUM"
    "$CTL" bench "$WORK/tiny.ninfer" --media "$MEDIA/clip.mp4" --repeat 2 --json >"$WORK/mp4.json" 2>/dev/null \
        || fail "bench --media clip.mp4"
    check "$WORK/mp4.json" 'r["kind"] == "video" and r["frames"] == 4 and r["vision_tokens"] == 8'
    check "$WORK/mp4.json" "$SUM"
else
    grep -q "cannot load FFmpeg" "$WORK/err" || fail "bench --media: $(cat "$WORK/err")"
    echo "SKIPPED --media: FFmpeg's libraries are not installed"
fi

# As if FFmpeg were missing: the synthetic form still reports tower + prefill.
mkdir "$WORK/no-ffmpeg"
NINFER_FFMPEG_DIR="$WORK/no-ffmpeg" "$CTL" bench "$WORK/tiny.ninfer" --image 64x32 --repeat 2 >"$WORK/text" 2>/dev/null \
    || fail "bench --image without FFmpeg"
grep -q "preprocess not measured: no FFmpeg" "$WORK/text" || fail "no 'not measured' line: $(cat "$WORK/text")"
grep -q "tower + prefill: preprocessing not included" "$WORK/text" || fail "TTFT line: $(cat "$WORK/text")"
NINFER_FFMPEG_DIR="$WORK/no-ffmpeg" "$CTL" bench "$WORK/tiny.ninfer" --image 64x32 --repeat 2 --json >"$WORK/syn.json" \
    2>/dev/null || fail "bench --image --json"
check "$WORK/syn.json" 'not r["preprocess"]["measured"] and r["preprocess_note"].startswith("no FFmpeg")'
check "$WORK/syn.json" 'r["merged_tokens"] == 2 and r["vision_tokens"] == 2'
check "$WORK/syn.json" "$SUM"
if NINFER_FFMPEG_DIR="$WORK/no-ffmpeg" "$CTL" bench "$WORK/tiny.ninfer" --media "$MEDIA/grad.png" >/dev/null 2>"$WORK/err"; then
    fail "bench --media without FFmpeg succeeded"
fi
grep -q "times the tower and the prefill" "$WORK/err" || fail "no hint without FFmpeg: $(cat "$WORK/err")"

# Usage errors: two items, a size off the 32 px grid.
"$CTL" bench "$WORK/tiny.ninfer" --image 64x64 --video 2 >/dev/null 2>"$WORK/err" && fail "two items accepted"
grep -q "one item at a time" "$WORK/err" || fail "two items: $(cat "$WORK/err")"
"$CTL" bench "$WORK/tiny.ninfer" --image 60x64 >/dev/null 2>"$WORK/err" && fail "60x64 accepted"
grep -q "multiples of 32 px" "$WORK/err" || fail "60x64: $(cat "$WORK/err")"
echo "PASS"
