# ninfer - the body of test_control_attacks.sh (see there): raw control frames and unusual peers
# against the real ninferd (issue 30 item 7).
import json, os, socket, struct, subprocess, sys, time, urllib.request

BIN, T, SRC = sys.argv[1:4]
CTL = os.path.join(BIN, "ctl/ninferctl")
ARTIFACT = os.path.join(T, "tiny.ninfer")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_harness import Harness

h = Harness(BIN, T, "test_control_attacks")
check, ctl = h.check, h.ctl
ADMIN_GID = 64917  # ninfer-admin inside the daemon's mount namespace only (see below)
OP_STATUS, OP_SLOT_SAVE = 1, 5

# As root, the daemon runs in a private mount namespace where /etc/group has a ninfer-admin group
# (the machine's /etc/group is untouched) and its slots directory is a 64 KiB tmpfs (ENOSPC).
isolated = os.geteuid() == 0 and all(os.path.exists(p) for p in ("/usr/bin/unshare", "/usr/bin/setpriv"))
d = os.path.join(T, "attacks")
if isolated:
    group_file = os.path.join(T, "group")
    # A ninfer-admin group the machine already has (left by an installed package) is replaced:
    # getgrnam returns the first line of a name, and the test needs its own gid.
    with open("/etc/group") as src, open(group_file, "w") as out:
        kept = [line for line in src if not line.startswith("ninfer-admin:")]
        out.write("".join(kept) + f"ninfer-admin:x:{ADMIN_GID}:nobody\n")
    wrapper = os.path.join(T, "ninferd-isolated")
    with open(wrapper, "w") as w:
        w.write(f"""#!/bin/sh
exec unshare -m sh -c 'mount --make-rprivate / && mount --bind "{group_file}" /etc/group &&
  mkdir -p "{d}/state/slots" && mount -t tmpfs -o size=64k tmpfs "{d}/state/slots" &&
  exec "{h.daemon}" "$@"' ninferd "$@"
""")
    os.chmod(wrapper, 0o755)
    h.daemon = wrapper
else:
    print("test_control_attacks: not root or no unshare/setpriv: groups, socket directory and ENOSPC not tested")

p = h.start("attacks", ARTIFACT, "--host-cache-mib", "0")

def frame(op, payload=b"", request_id=7):
    return struct.pack("<IHHHHiQII", 0x5043494E, 1, op, 0, 0, 0, request_id, len(payload), 0) + payload

def slot_request(slot, name):
    return struct.pack("<II", slot, len(name)) + name

def read_reply(s):
    """(status, payload) of the next frame, or None if the daemon closed or stayed silent 20 s."""
    s.settimeout(20)
    data = b""
    try:
        while len(data) < 32 or len(data) < 32 + struct.unpack_from("<I", data, 24)[0]:
            chunk = s.recv(1 << 20)
            if not chunk:
                return None
            data += chunk
    except socket.timeout:
        return None
    return struct.unpack_from("<i", data, 12)[0], data[32:32 + struct.unpack_from("<I", data, 24)[0]]

def exchange(payload_frame, half_close=False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(p.sock)
    s.sendall(payload_frame)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    r = read_reply(s)
    s.close()
    return r

def message_of(payload):
    n = struct.unpack_from("<I", payload, 0)[0]
    return payload[4:4 + n].decode()

# An error reply echoing a slot name as long as a request can hold (over 1 MiB with the words
# around it) still arrives, its message cut.
r = exchange(frame(OP_SLOT_SAVE, slot_request(0, b"a" * ((1 << 20) - 8))))
check(r is not None and r[0] == -22 and "bytes cut" in message_of(r[1]) and len(r[1]) < (1 << 17),
      f"a 1 MiB slot name: {r and (r[0], len(r[1]))}")
# status takes no payload: trailing bytes are a malformed request (PROTOCOL.md section 3).
r = exchange(frame(OP_STATUS, b"\0"))
check(r is not None and r[0] == -74, f"status with a trailing byte: {r and r[0]}")
check(exchange(frame(OP_STATUS))[0] == 0, "status")
# A peer that shuts down its sending side still gets its answers, synchronous and from the engine.
r = exchange(frame(OP_STATUS), half_close=True)
check(r is not None and r[0] == 0, f"status after SHUT_WR: {r}")
r = exchange(frame(OP_SLOT_SAVE, slot_request(0, b"empty")), half_close=True)
check(r is not None and r[0] != 0 and "empty" in message_of(r[1]), f"engine reply after SHUT_WR: {r}")

# A peer that sends status requests and never reads: the daemon stops reading it (output-buffer-kib),
# so its memory stays flat instead of queueing every reply (the issue saw 88 MB -> 1.33 GB in 20 s).
def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
flood.connect(p.sock)
flood.setblocking(False)
rss_before, sent, burst = rss_kib(p.pid), 0, frame(OP_STATUS) * 2048
deadline = time.time() + 3
while time.time() < deadline:
    try:
        sent += flood.send(burst)
    except BlockingIOError:
        time.sleep(0.01)
grown_mib = (rss_kib(p.pid) - rss_before) / 1024
print(f"figures: control flood: {sent >> 20} MiB of status requests taken in 3 s, daemon RSS +{grown_mib:.1f} MiB")
check(sent < (64 << 20) and grown_mib < 64, f"a non-reading control peer: {sent} bytes taken, RSS +{grown_mib:.0f} MiB")
flood.close()
check(exchange(frame(OP_STATUS))[0] == 0, "status after the flood")

# A full listen backlog: ninferctl waits instead of failing "Transport endpoint is not connected".
os.kill(p.pid, 19)  # SIGSTOP: nothing accepts
held = []
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(p.sock)
    except BlockingIOError:
        s.close()
        break
    held.append(s)
waiting = subprocess.Popen([CTL, "--socket", p.sock, "--timeout", "20", "status"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
time.sleep(1)
os.kill(p.pid, 18)  # SIGCONT
out, err = waiting.communicate(timeout=60)
check(waiting.returncode == 0 and "model_id" in out, f"ninferctl with a full backlog ({len(held)} held): {err}")
for s in held:
    s.close()

# Exit codes: "cannot connect" is 3, as ninferctl(8) says.
r = subprocess.run([CTL, "--socket", os.path.join(T, "none.sock"), "--timeout", "1", "status"], capture_output=True)
man = open(os.path.join(SRC, "man/ninferctl.8.scd")).read()
check(r.returncode == 3 and "3 when the daemon" in man, "cannot connect: exit 3, documented")

if isolated:
    # The socket directory the daemon made: group ninfer-admin, 0750, so members reach the socket.
    st = os.stat(os.path.dirname(p.sock))
    check(st.st_gid == ADMIN_GID and st.st_mode & 0o777 == 0o750, f"socket dir: gid {st.st_gid} mode {oct(st.st_mode)}")
    # Rights come from the peer's real groups (SO_PEERGROUPS), not from /etc/group's member list.
    def as_nobody(groups, *args):
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", *groups, CTL, "--socket", p.sock, *args],
                              capture_output=True, text=True, timeout=60)
    r = as_nobody([f"--groups={ADMIN_GID}"], "log-level", "info")
    check(r.returncode == 0, f"nobody with ninfer-admin among its groups is admin: {r.stderr}")
    os.chmod(os.path.dirname(p.sock), 0o755)  # let a peer outside the group connect at all
    os.chmod(p.sock, 0o666)
    r = as_nobody(["--clear-groups"], "log-level", "info")
    check(r.returncode == 1 and "needs admin rights" in r.stderr,
          f"nobody listed in /etc/group but without the group is not admin: {r.returncode} {r.stderr}")
    # A full disk: status -28 (ENOSPC) and a line in the log.
    req = urllib.request.Request(f"http://127.0.0.1:{p.port}/v1/completions",
                                 json.dumps({"prompt": "The sea and the sky " * 20, "max_tokens": 4}).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=60).read()
    lane = next(l["id"] for l in json.loads(ctl(p, "--json", "slot", "list").stdout)["slots"] if l["tokens"] > 0)
    r = exchange(frame(OP_SLOT_SAVE, slot_request(lane, b"full")))
    check(r is not None and r[0] == -28, f"slot save on a full disk: {r and (r[0], message_of(r[1]))}")
    check(h.logged(p, "slot-save failed") and h.logged(p, "No space left on device"), "ENOSPC was not logged")

h.stop(p)
check(not any("event loop did not close" in l for l in p.lines), "uv_loop_close failed: " + "".join(p.lines[-5:]))
print("test_control_attacks: OK")
