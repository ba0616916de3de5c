#!/bin/bash
# ninfer - artifact payload checksums end to end: `ninferctl inspect --verify` passes an intact
# artifact and fails (exit 1, the tensor named) once one payload byte is flipped; `ninferd
# --verify-artifact` refuses to start on the corrupt copy with the same message and logs the
# figures on the intact one; an artifact without checksums is refused by both.
set -euo pipefail
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT
CTL="$BIN/ctl/ninferctl"
fail() { echo "FAIL $*"; exit 1; }
"$CTL" convert --synthetic tiny "$T/ok.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }

"$CTL" inspect --verify "$T/ok.ninfer" > "$T/ok.txt" 2>&1 || fail "inspect --verify of an intact artifact: $(cat "$T/ok.txt")"
grep -q "every CRC-32C matches" "$T/ok.txt" || fail "inspect --verify printed no result"
echo "ok   inspect --verify passes the intact artifact"

# Flip one bit in the middle of the payload (inside the token embedding, the largest tensor).
python3 - "$T/ok.ninfer" "$T/bad.ninfer" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read()); b[len(b) // 2] ^= 0x04; open(sys.argv[2], 'wb').write(b)
PY
rc=0; "$CTL" inspect --verify "$T/bad.ninfer" > "$T/bad.txt" 2>&1 || rc=$?
[ $rc = 1 ] || fail "inspect --verify of a corrupt artifact exited $rc"
grep -q "payload checksum mismatch: tensor .* (bound as .*): stored crc32c [0-9a-f]\{8\}, computed" "$T/bad.txt" ||
    fail "inspect --verify did not name the tensor: $(cat "$T/bad.txt")"
"$CTL" inspect "$T/bad.ninfer" > /dev/null 2>&1 || fail "plain inspect (no --verify) refused the corrupt copy"
echo "ok   inspect --verify names the corrupt tensor and exits 1; plain inspect does not read payload"

daemon() { # daemon ARTIFACT LOG: runs ninferd --verify-artifact; returns its exit status or 0 once listening
    "$BIN/daemon/ninferd" --artifact "$1" --verify-artifact --host 127.0.0.1 --port 0 --threads 1 \
        --control-socket "$T/ctl.sock" --state-dir "$T/state" > "$2" 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
        if grep -q "listening on" "$2"; then kill $pid; wait $pid || true; return 0; fi
        if ! kill -0 $pid 2>/dev/null; then wait $pid; return $?; fi
        sleep 0.1
    done
    kill $pid; return 124
}
rc=0; daemon "$T/bad.ninfer" "$T/d-bad.log" || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "ninferd --verify-artifact started on a corrupt artifact (rc $rc)"
grep -q "payload checksum mismatch: tensor" "$T/d-bad.log" || fail "ninferd did not say why: $(tail -3 "$T/d-bad.log")"
daemon "$T/ok.ninfer" "$T/d-ok.log" || fail "ninferd --verify-artifact refused the intact artifact: $(tail -3 "$T/d-ok.log")"
grep -q "payload verified: [0-9]* objects" "$T/d-ok.log" || fail "ninferd logged no verification figures"
echo "ok   ninferd --verify-artifact refuses the corrupt copy (exit $rc) and serves the intact one"

# Without the member (whitespace in its place, as an older writer's file): nothing to verify.
python3 - "$T/ok.ninfer" "$T/none.ninfer" <<'PY'
import re, sys
b = bytearray(open(sys.argv[1], 'rb').read())
m = re.search(rb'"payload_crc32c":\{[^}]*\},', bytes(b[:1 << 20]))
b[m.start():m.end()] = b' ' * (m.end() - m.start()); open(sys.argv[2], 'wb').write(b)
PY
rc=0; "$CTL" inspect --verify "$T/none.ninfer" > "$T/none.txt" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "records no payload checksums" "$T/none.txt" || fail "inspect --verify without checksums: rc $rc, $(cat "$T/none.txt")"
rc=0; daemon "$T/none.ninfer" "$T/d-none.log" || rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "records no payload checksums" "$T/d-none.log" || fail "ninferd --verify-artifact without checksums: rc $rc"
echo "ok   an artifact without checksums: both refuse, saying nothing could be verified"
