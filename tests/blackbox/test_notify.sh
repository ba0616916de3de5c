#!/bin/bash
# ninfer - ninferd's sd_notify protocol against a fake NOTIFY_SOCKET (no systemd needed):
# STATUS= and EXTEND_TIMEOUT_USEC= while loading, READY=1 before the first /health 200, WATCHDOG=1
# pings (WATCHDOG_PID = the daemon's own pid, so the sh wrapper execs it), RELOADING=1 with a
# plausible MONOTONIC_USEC then READY=1 on SIGHUP, no STOPPING=1 before SIGTERM and STOPPING=1
# after it, exit 0. Also: one "request, finished" stderr line per request, without the prompt text.
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
daemon=$BIN/daemon/ninferd
demo=$BIN/packaging/demo.ninfer
for f in "$daemon" "$demo"; do [ -e "$f" ] || { echo "test_notify: $f not built" >&2; exit 1; }; done
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
: > "$T/empty.conf"

python3 - "$daemon" "$demo" "$T" <<'EOF'
import json, os, re, signal, socket, subprocess, sys, threading, time, urllib.error, urllib.request

daemon, demo, T = sys.argv[1:4]
notify_path = os.path.join(T, "notify.sock")
listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
listener.bind(notify_path)
listener.setblocking(False)
messages = []  # (monotonic seconds, datagram text), in arrival order

def drain():
    while True:
        try:
            messages.append((time.monotonic(), listener.recv(4096).decode()))
        except BlockingIOError:
            return

def fail(why):
    print("test_notify: FAIL:", why)
    print("notify messages:", [m for _, m in messages])
    print("daemon stderr:\n" + "".join(stderr_lines))
    proc.kill()
    sys.exit(1)

def seen(pattern, since=0):
    return [m for m in messages[since:] if re.search(pattern, m[1], re.M)]

env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTEN_", "JOURNAL_STREAM", "WATCHDOG_"))}
env.update(NOTIFY_SOCKET=notify_path, WATCHDOG_USEC="1000000")
prompt_marker = "zebra-quartz-violin"
proc = subprocess.Popen(
    ["sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$0" "$@"', daemon,
     "--config", os.path.join(T, "empty.conf"), "--artifact", demo, "--device", "cpu",
     "--host", "127.0.0.1", "--port", "0", "--control-socket", os.path.join(T, "ctl.sock"),
     "--state-dir", os.path.join(T, "state"), "--max-context", "256", "--max-concurrency", "1"],
    env=env, stderr=subprocess.PIPE, text=True)
stderr_lines = []
port_found = threading.Event()
port = [0]
def read_stderr():
    for line in proc.stderr:
        stderr_lines.append(line)
        m = re.search(r"listening on [0-9.]+:(\d+)", line)
        if m and not port[0]:
            port[0] = int(m.group(1))
            port_found.set()
threading.Thread(target=read_stderr, daemon=True).start()
if not port_found.wait(60):
    fail("no 'listening on' line")
base = f"http://127.0.0.1:{port[0]}"

def health():
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

deadline = time.monotonic() + 120
while True:
    drain()
    status = health()
    if status == 200:
        break
    if time.monotonic() > deadline or proc.poll() is not None:
        fail(f"/health never 200 (last {status})")
    time.sleep(0.02)
drain()
ready = seen(r"^READY=1$")
if not ready:
    fail("READY=1 was not sent before the first /health 200")
t_ready = ready[0][0]
if not [m for m in seen(r"^STATUS=loading") if m[0] <= t_ready]:
    fail("no STATUS=loading... before READY=1")
if not [m for m in seen(r"^EXTEND_TIMEOUT_USEC=\d+$") if m[0] <= t_ready]:
    fail("no EXTEND_TIMEOUT_USEC= while loading")
if not seen(r"^STATUS=serving "):
    fail("no STATUS=serving ... with READY=1")

# One finished request: a single log line with its figures and without the prompt.
body = json.dumps({"messages": [{"role": "user", "content": prompt_marker}], "max_tokens": 4}).encode()
req = urllib.request.Request(base + "/v1/chat/completions", data=body, headers={"content-type": "application/json"})
with urllib.request.urlopen(req, timeout=60) as r:
    if r.status != 200:
        fail(f"chat completion status {r.status}")

# Watchdog: WATCHDOG_USEC=1 s, so a ping every 0.5 s while idle.
n_before = len(seen(r"^WATCHDOG=1$"))
time.sleep(3)
drain()
n_pings = len(seen(r"^WATCHDOG=1$")) - n_before
if n_pings < 4:
    fail(f"{n_pings} WATCHDOG=1 pings in 3 s, want >= 4")
if seen(r"STOPPING=1"):
    fail("STOPPING=1 before SIGTERM")

mark = len(messages)
t_hup_us = time.monotonic_ns() // 1000
proc.send_signal(signal.SIGHUP)
deadline = time.monotonic() + 20
while not seen(r"^READY=1$", mark + 1) or not seen(r"RELOADING=1", mark):
    if time.monotonic() > deadline:
        fail("no RELOADING=1 then READY=1 after SIGHUP")
    time.sleep(0.05)
    drain()
reloading = seen(r"RELOADING=1", mark)[0][1]
m = re.search(r"^MONOTONIC_USEC=(\d+)$", reloading, re.M)
if not m:
    fail("RELOADING=1 without MONOTONIC_USEC=")
if abs(int(m.group(1)) - t_hup_us) > 5_000_000:
    fail(f"MONOTONIC_USEC={m.group(1)} is not CLOCK_MONOTONIC now ({t_hup_us})")
if seen(r"STOPPING=1"):
    fail("STOPPING=1 after SIGHUP")

proc.send_signal(signal.SIGTERM)
try:
    rc = proc.wait(30)
except subprocess.TimeoutExpired:
    fail("no exit within 30 s of SIGTERM")
time.sleep(0.2)
drain()
if not seen(r"^STOPPING=1"):
    fail("no STOPPING=1 after SIGTERM")
if rc != 0:
    fail(f"exit status {rc} after SIGTERM")
request_lines = [l for l in stderr_lines if "request, finished" in l]
if len(request_lines) != 1:
    fail(f"{len(request_lines)} 'request, finished' lines for one request")
if not re.search(r"op=request .*prompt_tokens=\d+ .*completion_tokens=\d+ .*total_ms=", request_lines[0]):
    fail("request line lacks its figures: " + request_lines[0])
if any(prompt_marker in l for l in stderr_lines):
    fail("the prompt text reached the log")
print(f"test_notify: ok ({n_pings} watchdog pings in 3 s, {len(messages)} messages)")
EOF
