#!/bin/bash
# ninfer - the control socket against raw frames and unusual peers: a ~1 MiB error reply still
# arrives (cut), status refuses trailing bytes, half-closed (SHUT_WR) peers get their replies,
# ninferctl waits while the listen backlog is full, exit 3 for "cannot connect"; as root: the
# socket directory's group, admin rights from the peer's real groups (SO_PEERGROUPS), ENOSPC as
# status -28 and logged (control_attacks.py).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
chmod 755 "$T" # setpriv'd peers (uid 65534) must reach the socket below it
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }
exec python3 "$SRC/tests/blackbox/control_attacks.py" "$BIN" "$T" "$SRC"
