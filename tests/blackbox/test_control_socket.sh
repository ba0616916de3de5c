#!/bin/bash
# ninfer - every ninferctl control command over a real socket against the real ninferd on the tiny
# model: status, metrics (+ --watch), slot list/save/erase/restore (the restored lane holds the
# saved tokens and the next greedy output equals the uninterrupted one), a second conversation
# turn that reports cached tokens with the same output as a daemon without the cache, cache
# list/evict, drain/resume (503 while drained), log-level, reload; corrupted, truncated and
# foreign slot files refused with the lane still usable; admin ops refused for `nobody`
# (setpriv, when run as root); exit codes 2 (usage) and 3 (no daemon).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/other.ninfer" > "$T/convert2.log" 2>&1 || { cat "$T/convert2.log" >&2; exit 1; }
exec python3 "$SRC/tests/blackbox/control_socket.py" "$BIN" "$T"
