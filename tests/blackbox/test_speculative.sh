#!/bin/bash
# ninfer - speculative decoding from the outside: `ninferctl run --speculative ... --stats` gives the
# plain greedy ids and its stats line, and refuses mtp:K without a head; then ninferd --speculative
# over HTTP (node/speculative.js): greedy output unchanged, the per-request field, 400s, /metrics'
# spec_decode counters, timings.draft_n, ninferctl status and start-up refusals.
set -euo pipefail
BIN=${NINFER_BIN:?}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
"$BIN/ctl/ninferctl" convert --synthetic tiny "$W/mtp.ninfer" --components text,mtp > "$W/convert.log" 2>&1 ||
    { cat "$W/convert.log" >&2; exit 1; }
export NINFER_MTP_ARTIFACT="$W/mtp.ninfer"

C="$BIN/ctl/ninferctl"
failed=0
fail() { echo "FAIL $*"; failed=1; }
prompt="The cat sat on the mat. The cat sat on the mat. The cat"
want=$("$C" run "$W/mtp.ninfer" --prompt "$prompt" --greedy --max-new 32 --print-token-ids 2>/dev/null)
[ -n "$want" ] || fail "run: plain greedy ids"
for s in mtp:3 ngram:3 mtp:5; do
    got=$("$C" run "$W/mtp.ninfer" --prompt "$prompt" --greedy --max-new 32 --print-token-ids --speculative "$s" --stats \
        2>"$W/err") || fail "run --speculative $s exits 0: $(tail -2 "$W/err")"
    [ "$got" = "$want" ] && echo "ok   run --speculative $s: the plain greedy ids" || fail "run --speculative $s: $got != $want"
    grep -Eq "^speculative $s: [1-9][0-9]* rounds, [0-9]+ drafted, [0-9]+ accepted \([0-9.]+%\), [0-9.]+ tokens per round$" "$W/err" &&
        echo "ok   run --speculative $s --stats: the stats line" || fail "run --stats: $(cat "$W/err")"
done
"$C" convert --synthetic tiny "$W/plain.ninfer" > "$W/convert.log" 2>&1 || { cat "$W/convert.log" >&2; exit 1; }
if "$C" run "$W/plain.ninfer" --prompt hi --speculative mtp:2 > /dev/null 2> "$W/err"; then
    fail "run --speculative mtp:2 without a head succeeded"
else
    grep -q "needs the artifact's MTP head" "$W/err" && echo "ok   run: mtp:K without a head is refused" || fail "$(cat "$W/err")"
fi
if "$C" run "$W/mtp.ninfer" --prompt hi --speculative mtp:6 > /dev/null 2> "$W/err"; then
    fail "run --speculative mtp:6 succeeded"
else
    grep -q "'mtp:6' is not off, mtp:K or ngram:K" "$W/err" && echo "ok   run: a bad value is refused" || fail "$(cat "$W/err")"
fi
[ $failed = 0 ] || exit 1
"$(dirname "$0")/daemon_env.sh" speculative
