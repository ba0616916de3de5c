# ninfer - the body of test_slot_persist.sh (see there): drives ninferd and ninferctl.
import json, os, shutil, signal, subprocess, sys, time

BIN, T = sys.argv[1:3]
DAEMON, CTL = os.path.join(BIN, "daemon/ninferd"), os.path.join(BIN, "ctl/ninferctl")
ARTIFACT = os.path.join(T, "tiny.ninfer")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_harness import Harness, post, slot_file_tokens

h = Harness(BIN, T, "test_slot_persist")
check, ctl = h.check, h.ctl

def start(name, *extra):
    return h.start(name, ARTIFACT, "--host-cache-mib", "0", *extra)

stop = h.stop

def complete(p, ids):
    r = post(p, "/v1/completions", {"prompt": ids, "max_tokens": 8, "temperature": 0})
    return r["choices"][0]["text"], r["usage"]["prompt_tokens_details"]["cached_tokens"]

def lane_tokens(p):
    return {l["id"]: l["tokens"] for l in json.loads(ctl(p, "--json", "slot", "list").stdout)["slots"]}

# A conversation turn on a daemon that persists its lanes, then SIGTERM.
a = start("persist", "--persist-slots")
prompt = post(a, "/tokenize", {"content": "The sea and the sky meet at the horizon, far away."})["tokens"]
first, _ = complete(a, prompt)
held = {i: n for i, n in lane_tokens(a).items() if n > 0}
check(len(held) == 1, f"one lane should hold the turn: {held}")
lane, n_held = next(iter(held.items()))
stop(a)
saved = os.path.join(a.dir, "state", "lanes", f"lane-{lane}.nslot")
check(os.path.exists(saved), "no lane file after SIGTERM")
check(not os.path.exists(os.path.join(a.dir, "state", "lanes", f"lane-{1 - lane}.nslot")), "an empty lane was saved")
history = slot_file_tokens(saved)
check(len(history) == n_held and history[:len(prompt)] == prompt, "the lane file holds another sequence")

# Restart: the lane is back, and the next turn extending it is served from it.
a = start("persist", "--persist-slots")
check(lane_tokens(a)[lane] == n_held, f"lane {lane} not restored: {lane_tokens(a)}")
check(h.logged(a, "restored 1 lane"), "no restore summary in the log")
follow = history + post(a, "/tokenize", {"content": " Then the night came."})["tokens"]
after_restart, cached = complete(a, follow)
check(cached == len(history), f"after the restart: cached {cached}, wanted {len(history)}")

# The same request on a daemon that never held the sequence: nothing cached, the same output.
b = start("reference")
reference, cached = complete(b, follow)
check(cached == 0, "the reference daemon reused tokens")
check(after_restart == reference, f"output after the restart differs: {after_restart!r} vs {reference!r}")

# A lane filled by `slot restore` serves the next request that extends its tokens. Lane 0 of the
# reference daemon now holds a longer sequence that does not prefix the request; lane 1 gets the
# saved one.
os.makedirs(os.path.join(b.dir, "state", "slots"), exist_ok=True)
shutil.copy(saved, os.path.join(b.dir, "state", "slots", "turn-1.nslot"))
busy = [i for i, n in lane_tokens(b).items() if n > 0]
free = [i for i in (0, 1) if i not in busy][0]
ctl(b, "slot", "restore", str(free), "turn-1")
check(lane_tokens(b)[free] == len(history), "slot restore did not fill the lane")
restored, cached = complete(b, follow)
check(cached == len(history), f"after slot restore: cached {cached}, wanted {len(history)}")
check(restored == reference, f"output after slot restore differs: {restored!r} vs {reference!r}")

# `ninferctl drain` saves the lanes once the running requests are done: a SIGKILL after it loses nothing.
c = start("drained", "--persist-slots")
complete(c, prompt)
n_drained = max(lane_tokens(c).values())
ctl(c, "drain")
drained_file = os.path.join(c.dir, "state", "lanes", "lane-0.nslot")
deadline = time.time() + 30
while not (os.path.exists(drained_file) and len(slot_file_tokens(drained_file)) == n_drained):
    check(time.time() < deadline, "drain did not save the lane")
    time.sleep(0.1)
c.kill()
c.wait()
h.procs.remove(c)
c = start("drained", "--persist-slots")
check(max(lane_tokens(c).values()) == n_drained, f"lanes after drain + SIGKILL: {lane_tokens(c)}")
stop(c)

# artifact upgrade: the reachable daemon performs it (a V3 file is refused, by ninferd); with
# --offline or no daemon ninferctl does it itself.
r = ctl(b, "artifact", "upgrade", ARTIFACT, os.path.join(T, "out.ninfer"), rc=1)
check("ninferd: artifact upgrade" in r.stderr and "offline" not in r.stderr, f"daemon upgrade: {r.stderr}")
check(h.logged(b, "artifact upgrade " + ARTIFACT), "the daemon did not log the upgrade")
r = ctl(b, "artifact", "upgrade", "--offline", ARTIFACT, os.path.join(T, "out.ninfer"), rc=1)
check(r.stderr.startswith("ninferctl: artifact upgrade"), f"--offline upgrade: {r.stderr}")
r = subprocess.run([CTL, "--socket", os.path.join(T, "none.sock"), "artifact", "upgrade", ARTIFACT], capture_output=True,
                   text=True)
check(r.returncode == 1 and "upgrading offline" in r.stderr and "ninferd:" not in r.stderr, f"no daemon: {r.stderr}")
check(not os.path.exists(os.path.join(T, "out.ninfer")), "a refused upgrade left a file")

stop(a)
stop(b)
print(f"test_slot_persist: OK (lane {lane}: {len(history)} tokens restored after SIGTERM and reused)")
