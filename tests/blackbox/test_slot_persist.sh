#!/bin/bash
# ninfer - lanes across a restart and the daemon-side artifact upgrade, against the real ninferd on
# the tiny model: with --persist-slots a SIGTERM saves the lanes and the next start restores them,
# and the next request that extends a lane's tokens (a raw /v1/completions prompt, so nothing of
# the reply is re-rendered away) reports them cached and gives the same greedy output as a daemon
# that never held them; the same for a lane filled by `slot restore` on another daemon; `ninferctl
# drain` saves the lanes once requests are done, so a SIGKILL after it loses nothing. `artifact
# upgrade` goes to the daemon when one answers (its refusal says ninferd) and runs offline
# otherwise or with --offline.
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }
exec python3 "$SRC/tests/blackbox/slot_persist.py" "$BIN" "$T"
