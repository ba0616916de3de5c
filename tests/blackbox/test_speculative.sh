#!/bin/bash
# ninfer - ninferd --speculative over HTTP (node/speculative.js): greedy output unchanged, the
# per-request field, 400s, /metrics' spec_decode counters, timings.draft_n and start-up refusals.
set -euo pipefail
BIN=${NINFER_BIN:?}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
"$BIN/ctl/ninferctl" convert --synthetic tiny "$W/mtp.ninfer" --components text,mtp > "$W/convert.log" 2>&1 ||
    { cat "$W/convert.log" >&2; exit 1; }
export NINFER_MTP_ARTIFACT="$W/mtp.ninfer"
"$(dirname "$0")/daemon_env.sh" speculative
