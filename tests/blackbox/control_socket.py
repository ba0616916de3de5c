# ninfer - the body of test_control_socket.sh (see there): drives ninferd and ninferctl.
import json, os, shutil, signal, subprocess, sys, urllib.error, urllib.request

BIN, T = sys.argv[1:3]
CTL = os.path.join(BIN, "ctl/ninferctl")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_harness import Harness

h = Harness(BIN, T, "test_control_socket")
fail, check, ctl, procs = h.fail, h.check, h.ctl, h.procs

def start(name, artifact, cache_mib):
    p = h.start(name, artifact, "--host-cache-mib", str(cache_mib))
    p.model = ctl_json(p, "status")["model_id"]
    return p

def ctl_json(p, *args):
    out = ctl(p, "--json", *args).stdout
    check(out.count("\n") == 1, f"{args}: --json printed more than one document: {out!r}")
    return json.loads(out)

def chat(p, messages, max_tokens=8, status=200):
    body = json.dumps({"model": p.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{p.port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            check(status == 200, f"chat answered 200, wanted {status}")
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        check(e.code == status, f"chat answered {e.code}, wanted {status}: {e.read()!r}")
        return None

def text_of(reply):
    m = reply["choices"][0]["message"]
    return (m.get("reasoning_content") or "", m.get("content") or "")

def lanes(p):
    return {l["id"]: l for l in ctl_json(p, "slot", "list")["slots"]}

cached = start("cached", os.path.join(T, "tiny.ninfer"), 64)
plain = start("plain", os.path.join(T, "tiny.ninfer"), 0)

# status and metrics (human and JSON); global options before or after the command.
st = ctl_json(cached, "status")
check(len(st["lanes"]) == 2 and st["memory_plan"]["host_store_bytes"] == 64 << 20, f"status: {st}")
check("model_id" in ctl(cached, "status").stdout, "status table")
check(json.loads(subprocess.run([CTL, "status", "--json", "--socket", cached.sock], capture_output=True,
                                text=True).stdout)["model_id"] == st["model_id"], "options after the command")
# status --settings: every option `ninferd --help` lists that a config file takes, with its running value.
settings = {s["name"]: s for s in ctl_json(cached, "status", "--settings")}
help_text = subprocess.run([h.daemon, "--help"], capture_output=True, text=True).stdout
listed = {l.split()[0][2:] for l in help_text.splitlines() if l.startswith("  --")}
actions = {"config", "check-config", "version", "help"}
check(set(settings) == listed - actions, f"status --settings vs --help: {sorted(set(settings) ^ (listed - actions))}")
check(settings["host-cache-mib"]["value"] == "64" and not settings["host-cache-mib"]["is_default"], f"{settings['host-cache-mib']}")
check(settings["log-level"]["is_reloadable"] and not settings["port"]["is_reloadable"], "reload flags in status --settings")
check("host-cache-mib = 64" in ctl(cached, "status", "--settings").stdout, "status --settings table")
check("requests_total" in ctl_json(cached, "metrics"), "metrics --json")
check("throughput" in ctl(cached, "metrics").stdout, "metrics table")
w = subprocess.Popen([CTL, "--socket", cached.sock, "--json", "metrics", "--watch", "1"], stdout=subprocess.PIPE, text=True)
watched = [w.stdout.readline(), w.stdout.readline()]
w.kill(); w.wait()
check(all("kv_capacity_tokens" in json.loads(l) for l in watched), f"metrics --watch: {watched}")

# A second conversation turn: cached tokens reported, same output as a daemon without the cache.
turn1 = [{"role": "user", "content": "Tell me about the sea and the sky."}]
r1 = chat(cached, turn1)
turn2 = turn1 + [{"role": "assistant", "content": text_of(r1)[1] or "ok"},
                 {"role": "user", "content": "And about the mountains?"}]
chat(cached, [{"role": "user", "content": "Something unrelated to fill the lanes."}])
chat(cached, [{"role": "user", "content": "Another unrelated prompt."}])
r2 = chat(cached, turn2)
ref2 = chat(plain, turn2)
n_cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
check(n_cached > 0, f"second turn reported no cached tokens: {r2['usage']}")
check(ref2["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "the cache-less daemon reused tokens")
check(text_of(r2) == text_of(ref2), f"cached turn differs: {text_of(r2)} vs {text_of(ref2)}")
check(ctl_json(cached, "metrics")["cache_hits"] >= 1, "metrics count no cache hit")
cl = ctl_json(cached, "cache", "list")
check(cl["entries"] and cl["used_bytes"] <= cl["budget_bytes"], f"cache list: {cl}")
check("KEY" in ctl(cached, "cache", "list").stdout, "cache list table")
key = cl["entries"][0]["key"]
check(ctl_json(cached, "cache", "evict", key)["evicted"] == 1, "cache evict KEY")
ctl(cached, "cache", "evict", key, rc=1)
check(ctl_json(cached, "cache", "evict", "--older-than", "100000")["evicted"] == 0, "evict --older-than")
ctl_json(cached, "cache", "evict", "--all")
check(ctl_json(cached, "cache", "list")["entries"] == [], "cache not empty after evict --all")

# Slots on the cache-less daemon: save, erase, restore; the restored lane is the saved one and
# the next request's greedy output equals the uninterrupted daemon's.
r1p = chat(plain, turn1)
busy = [i for i, l in lanes(plain).items() if l["tokens"] > 0]
check(busy, "no lane holds a sequence after a request")
lane = busy[0]
n_tokens = lanes(plain)[lane]["tokens"]
saved = ctl_json(plain, "slot", "save", str(lane), "conv-1")
check(saved["tokens"] == n_tokens and os.path.exists(os.path.join(plain.dir, "state/slots/conv-1.nslot")), f"save: {saved}")
check(oct(os.stat(os.path.join(plain.dir, "state/slots")).st_mode & 0o777) == "0o750", "slots dir mode")
check("conv-1" in ctl_json(plain, "slot", "list")["saved"], "slot list names the file")
ctl(plain, "slot", "erase", str(lane))
check(lanes(plain)[lane]["tokens"] == 0, "erase left tokens")
r = ctl(plain, "slot", "save", str(lane), "empty", rc=1)
check(f"slot {lane} is empty" in r.stderr, f"empty save message: {r.stderr}")
ctl(plain, "slot", "restore", str(lane), "conv-1")
check(lanes(plain)[lane]["tokens"] == n_tokens, "restore did not bring the tokens back")
after = chat(plain, turn2)
check(text_of(after) == text_of(ref2), "output after restore differs from the uninterrupted one")
ctl(plain, "slot", "restore", str(lane), "missing", rc=1)
ctl(plain, "slot", "save", "9", "x", rc=1)

# Refused slot files: corrupted, truncated, foreign model. The lane stays usable.
slots = os.path.join(plain.dir, "state/slots")
good = open(os.path.join(slots, "conv-1.nslot"), "rb").read()
bad = bytearray(good); bad[-5] ^= 0xFF
open(os.path.join(slots, "corrupt.nslot"), "wb").write(bad)
open(os.path.join(slots, "short.nslot"), "wb").write(good[:len(good) // 2])
other = start("other", os.path.join(T, "other.ninfer"), 0)
chat(other, turn1)
olane = [i for i, l in lanes(other).items() if l["tokens"] > 0][0]
ctl(other, "slot", "save", str(olane), "foreign")
shutil.copy(os.path.join(other.dir, "state/slots/foreign.nslot"), slots)
for name, words in [("corrupt", "checksum"), ("short", "truncated"), ("foreign", "another model")]:
    r = ctl(plain, "slot", "restore", str(lane), name, rc=1)
    check(words in r.stderr, f"{name}: {r.stderr}")
check(chat(plain, turn1) is not None, "lane unusable after refusals")

# drain / resume, log-level, reload.
ctl(plain, "drain")
check(ctl_json(plain, "status")["draining"], "status does not say draining")
chat(plain, turn1, status=503)
ctl(plain, "resume")
check(chat(plain, turn1) is not None, "resume did not reopen admission")
ctl(plain, "log-level", "debug")
ctl(plain, "log-level", "loud", rc=1)
ctl(plain, "reload")

# Rights: a peer that is not root, the daemon's user or in ninfer-admin reads but cannot change.
if os.geteuid() == 0 and shutil.which("setpriv"):
    os.chmod(os.path.dirname(plain.sock), 0o755)
    os.chmod(plain.sock, 0o666)
    ctl(plain, "status", user="65534")
    r = ctl(plain, "slot", "erase", str(lane), user="65534", rc=1)
    check("needs admin rights" in r.stderr, f"nobody: {r.stderr}")
    r = ctl(plain, "drain", user="65534", rc=1)
else:
    print("test_control_socket: not root or no setpriv: permission refusal not tested")

# Usage errors and no daemon.
ctl(plain, "slot", "save", "0", "bad/name", rc=2)
r = subprocess.run([CTL, "--socket", os.path.join(T, "none.sock"), "--timeout", "1", "status"], capture_output=True)
check(r.returncode == 3, "no daemon: exit code")

for p in procs:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        fail("daemon did not stop")
check(not os.path.exists(plain.sock), "socket left behind")
print("test_control_socket: OK (second turn cached", n_cached, "tokens)")
