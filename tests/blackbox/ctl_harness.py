# ninfer - shared by the control-socket black-box tests (control_socket.py, slot_persist.py,
# engine_fault.py): starts ninferd on the tiny model (or another artifact, on `device`) with its own
# state dir and control socket, waits until /health answers, runs ninferctl, and on failure prints
# the daemons' last log lines; posts JSON to a daemon; reads a slot file's token ids.
import json, os, re, signal, struct, subprocess, sys, threading, time, urllib.error, urllib.request

def post(p, path, body):  # the JSON answer of a 2xx (HTTPError otherwise)
    req = urllib.request.Request(f"http://127.0.0.1:{p.port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())

def slot_file_tokens(path):  # slot_file.h: n_tokens (u64) at 104, token ids (i32) after the 4096-byte header
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data, 104)[0]
    return list(struct.unpack_from(f"<{n}i", data, 4096))

class Harness:
    def __init__(self, bin_dir, tmp, name):
        self.daemon, self.ctl_bin = os.path.join(bin_dir, "daemon/ninferd"), os.path.join(bin_dir, "ctl/ninferctl")
        self.tmp, self.name, self.procs = tmp, name, []
        self.device = "cpu"

    def fail(self, why):
        print(f"{self.name}: FAIL:", why)
        for p in self.procs:
            p.kill()
            print("daemon stderr:\n" + "".join(p.lines[-40:]))
        sys.exit(1)

    def check(self, cond, why):
        if not cond:
            self.fail(why)

    # ninferd --port 0 with 2 lanes of 512 tokens; `extra` adds or overrides options.
    def start(self, name, artifact, *extra):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "empty.conf"), "w").close()
        sock = os.path.join(d, "ctl", "control.sock")
        p = subprocess.Popen([self.daemon, "--config", os.path.join(d, "empty.conf"), "--artifact", artifact,
                              "--device", self.device, "--host", "127.0.0.1", "--port", "0", "--control-socket", sock,
                              "--state-dir", os.path.join(d, "state"), "--max-context", "512", "--max-concurrency",
                              "2", *extra], stderr=subprocess.PIPE, text=True)
        p.lines, p.port, p.sock, p.dir = [], 0, sock, d
        def pump():
            for line in p.stderr:
                p.lines.append(line)
                m = re.search(r"listening on [0-9.]+:(\d+)", line)
                if m and not p.port:
                    p.port = int(m.group(1))
        threading.Thread(target=pump, daemon=True).start()
        self.procs.append(p)
        deadline = time.time() + 60
        while time.time() < deadline:
            if p.port and os.path.exists(sock):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{p.port}/health", timeout=2) as r:
                        if r.status == 200:
                            return p
                except (urllib.error.URLError, ConnectionError):
                    pass
            self.check(p.poll() is None, f"{name} exited early")
            time.sleep(0.1)
        self.fail(f"{name} not ready")

    # Whether a line of p's log contains text within `timeout` seconds: the log arrives through a
    # pipe and a reader thread, so a line the daemon wrote before answering may not be read yet.
    def logged(self, p, text, timeout=10):
        deadline = time.time() + timeout
        while True:
            if any(text in l for l in list(p.lines)):
                return True
            if time.time() >= deadline:
                return False
            time.sleep(0.05)

    # SIGTERM, then exit status 0 within 30 s.
    def stop(self, p):
        p.send_signal(signal.SIGTERM)
        try:
            self.check(p.wait(timeout=30) == 0, "daemon exit status")
        except subprocess.TimeoutExpired:
            self.fail("the daemon did not stop on SIGTERM")
        self.procs.remove(p)

    def ctl(self, p, *args, rc=0, user=None):
        cmd = [self.ctl_bin, "--socket", p.sock, "--timeout", "20", *args]
        if user:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != rc:
            self.fail(f"ninferctl {' '.join(args)}: exit {r.returncode} (wanted {rc}): {r.stdout} {r.stderr}")
        return r
