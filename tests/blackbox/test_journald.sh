#!/bin/bash
# ninfer - ninferd's native journal entries, read back from a private systemd-journald.
# In a private mount namespace a tmpfs covers /run (so nothing reaches the host's journal), a
# journald of our own listens on /run/systemd/journal/socket, and the daemon runs with
# JOURNAL_STREAM set to the device:inode of its stderr file, as systemd would set it. Checked:
# PRIORITY, CODE_FILE/LINE/FUNC, MESSAGE_ID of the catalogued "model loaded" and "snapshot saved"
# (ninferctl slot save) events, one request entry with NINFER_REQUEST_ID, NINFER_SLOT and
# NINFER_OP=request, no prompt text, and no log lines on stderr (the journal branch replaces
# them). A second daemon runs with NINFER_FAULT=engine_step:3: its engine failure is one
# engine-failed entry (MESSAGE_ID 349cb30e..., PRIORITY 3) naming the fault and the exit status,
# which is 3. Needs root (unshare -m).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
daemon=$BIN/daemon/ninferd
ctl=$BIN/ctl/ninferctl
demo=$BIN/packaging/demo.ninfer
for f in "$daemon" "$ctl" "$demo"; do [ -e "$f" ] || { echo "test_journald: $f not built" >&2; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "test_journald: needs root (private mount namespace)" >&2; exit 1; }
[ -s /etc/machine-id ] || { echo "test_journald: journald needs /etc/machine-id" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
: > "$T/empty.conf"
export daemon ctl demo T SRC

unshare --mount --propagation private bash -euo pipefail -c '
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/journal /run/log/journal
/lib/systemd/systemd-journald & J=$!
trap "kill $J 2>/dev/null || true" EXIT
for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
[ -S /run/systemd/journal/socket ] || { echo "test_journald: journald did not start"; exit 1; }

# start NAME: ninferd with its stderr in $T/NAME.err (JOURNAL_STREAM names it) and its own socket and
# state; sets D to its pid and port once /health answers 200.
start() {
    : > "$T/$1.err"
    JOURNAL_STREAM=$(stat -c %d:%i "$T/$1.err") "$daemon" --config "$T/empty.conf" --artifact "$demo" \
        --device cpu --host 127.0.0.1 --port 0 --control-socket "$T/$1.sock" --state-dir "$T/$1.state" \
        --max-context 256 --max-concurrency 1 2>>"$T/$1.err" & D=$!
    port=
    for _ in $(seq 600); do
        port=$(sed -n "s/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p" "$T/$1.err" | head -1)
        [ -n "$port" ] && [ "$(curl -s -o /dev/null -w %{http_code} "http://127.0.0.1:$port/health")" = 200 ] && break
        sleep 0.1
    done
}
start daemon
curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H "content-type: application/json" \
    -d "{\"messages\":[{\"role\":\"user\",\"content\":\"zebra-quartz-violin\"}],\"max_tokens\":4}" >/dev/null
"$ctl" --socket "$T/daemon.sock" --timeout 20 slot save 0 journald-test > "$T/slot.out" 2>&1 \
    || { echo "test_journald: ninferctl slot save failed:"; cat "$T/slot.out"; exit 1; }
kill -TERM $D
wait $D
echo $D > "$T/pid.first"

export NINFER_FAULT=engine_step:3
start fault
unset NINFER_FAULT
echo $D > "$T/pid.fault"
curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/v1/completions" -H "content-type: application/json" \
    -d "{\"prompt\":\"a b c\",\"max_tokens\":32,\"ignore_eos\":true}" > "$T/fault.http"
rc=0
wait $D || rc=$?
echo $rc > "$T/fault.rc"
sleep 0.3
journalctl -D /run/log/journal -o json --no-pager > "$T/journal.json"
'

python3 - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
entries = [json.loads(l) for l in open(f"{T}/journal.json") if l.strip()]
first, fault = (open(f"{T}/pid.{n}").read().strip() for n in ("first", "fault"))
faulted = [e for e in entries if e.get("SYSLOG_IDENTIFIER") == "ninferd" and e.get("_PID") == fault]
ours = [e for e in entries if e.get("SYSLOG_IDENTIFIER") == "ninferd" and e.get("_PID") == first]
def fail(why):
    print("test_journald: FAIL:", why)
    for e in ours:
        print({k: v for k, v in e.items() if not k.startswith(("__", "_"))})
    print("daemon stderr:", open(f"{T}/daemon.err").read())
    sys.exit(1)
if not ours:
    fail("no entries from ninferd in the private journal")
for e in ours:
    if e.get("PRIORITY") not in {"3", "4", "6", "7"}:
        fail("entry without a syslog PRIORITY: " + e.get("MESSAGE", ""))
    if not e.get("CODE_FILE", "").endswith((".cpp", ".h")) or not e.get("CODE_LINE", "").isdigit() \
            or not e.get("CODE_FUNC"):
        fail("entry without CODE_FILE/CODE_LINE/CODE_FUNC: " + e.get("MESSAGE", ""))
    if "zebra-quartz-violin" in e.get("MESSAGE", ""):
        fail("the prompt text reached the journal")
loaded = [e for e in ours if e.get("MESSAGE_ID") == "57deee9d411f4123b8265e9ccc225398"]
if len(loaded) != 1 or loaded[0]["PRIORITY"] != "6" or not loaded[0]["CODE_FILE"].endswith("server.cpp"):
    fail("want one model-loaded entry (MESSAGE_ID 57deee9d..., PRIORITY 6, from server.cpp)")
requests = [e for e in ours if e.get("NINFER_OP") == "request"]
if len(requests) != 1:
    fail(f"{len(requests)} NINFER_OP=request entries for one request")
r = requests[0]
if not r.get("NINFER_REQUEST_ID", "").isdigit() or not r.get("NINFER_SLOT", "").isdigit():
    fail("request entry without NINFER_REQUEST_ID / NINFER_SLOT")
for word in ("prompt_tokens=", "completion_tokens=", "reason=", "total_ms="):
    if word not in r["MESSAGE"]:
        fail("request entry lacks " + word)
saved = [e for e in ours if e.get("MESSAGE_ID") == "a4855475419643c2bfbf49c4de64486b"]
if len(saved) != 1 or saved[0].get("NINFER_SLOT") != "0" or saved[0].get("NINFER_OP") != "slot-save":
    fail("want one snapshot-saved entry (MESSAGE_ID a4855475..., NINFER_SLOT=0, NINFER_OP=slot-save)")
err = open(f"{T}/daemon.err").read()
if "info " in err or "request, finished" in err:
    fail("log lines went to stderr although JOURNAL_STREAM matched it")
failed = [e for e in faulted if e.get("MESSAGE_ID") == "349cb30e62aa4328822706244b97dac4"]
if len(failed) != 1 or failed[0]["PRIORITY"] != "3" or \
        "cpu: NINFER_FAULT=engine_step:3: injected device fault" not in failed[0]["MESSAGE"] or \
        "exiting with status 3" not in failed[0]["MESSAGE"]:
    ours = faulted
    fail("want one engine-failed entry (MESSAGE_ID 349cb30e..., PRIORITY 3) naming the fault and the exit status")
code, http = open(f"{T}/fault.rc").read().strip(), open(f"{T}/fault.http").read().strip()
if code != "3" or http != "503":
    fail(f"the faulted daemon: exit {code} (want 3), HTTP {http} (want 503)")
print(f"test_journald: ok ({len(ours)} entries; request entry: {r['MESSAGE']}; engine failure: {failed[0]['MESSAGE']})")
EOF
