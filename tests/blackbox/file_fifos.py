# ninfer - the body of test_file_fifos.sh (see there): FIFOs where ninferd's I/O thread and ninferctl
# open files by name (issue 30 item 6). Nobody ever writes these FIFOs: an open that blocks would
# hang the I/O thread (every later save, restore and upgrade) or the command.
import json, os, subprocess, sys, urllib.request

BIN, T = sys.argv[1:3]
CTL = os.path.join(BIN, "ctl/ninferctl")
ARTIFACT = os.path.join(T, "tiny.ninfer")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_harness import Harness

h = Harness(BIN, T, "test_file_fifos")
check, ctl = h.check, h.ctl

stop = h.stop

def fill_a_lane(p):  # a short completion; returns the lane that now holds its tokens
    req = urllib.request.Request(f"http://127.0.0.1:{p.port}/v1/completions",
                                 json.dumps({"prompt": "The sea and the sky", "max_tokens": 4}).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=60).read()
    lanes = json.loads(ctl(p, "--json", "slot", "list").stdout)["slots"]
    return next(str(l["id"]) for l in lanes if l["tokens"] > 0)

def offline(*args, stdin=None):
    try:
        return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=30, input=stdin)
    except subprocess.TimeoutExpired:
        h.fail(f"ninferctl {' '.join(args)} blocked")

# Daemon side: a FIFO slot file, a FIFO upgrade source, a FIFO among the persisted lanes.
a = h.start("fifos", ARTIFACT, "--persist-slots", "--host-cache-mib", "0")
slots, lanes = os.path.join(a.dir, "state", "slots"), os.path.join(a.dir, "state", "lanes")
os.makedirs(slots, exist_ok=True)
os.mkfifo(os.path.join(slots, "evil.nslot"))
lane = fill_a_lane(a)
other = "1" if lane == "0" else "0"
r = ctl(a, "slot", "restore", other, "evil", rc=1)
check("not a regular file (a FIFO)" in r.stderr, f"slot restore from a FIFO: {r.stderr}")
ctl(a, "slot", "save", lane, "good")  # the I/O thread still works
ctl(a, "slot", "restore", other, "good")
upgrade_fifo = os.path.join(T, "upgrade.fifo")
os.mkfifo(upgrade_fifo)
r = ctl(a, "artifact", "upgrade", upgrade_fifo, os.path.join(T, "out.ninfer"), rc=1)
check("not a regular file (a FIFO)" in r.stderr, f"daemon-side upgrade from a FIFO: {r.stderr}")
check(not os.path.exists(os.path.join(T, "out.ninfer")), "a refused upgrade left a file")
ctl(a, "slot", "save", lane, "after")
os.makedirs(lanes, exist_ok=True)
stop(a)  # --persist-slots: saving the lanes must still work
lane_file = os.path.join(lanes, f"lane-{other}.nslot")
if os.path.exists(lane_file):
    os.unlink(lane_file)
os.mkfifo(lane_file)
a = h.start("fifos", ARTIFACT, "--persist-slots", "--host-cache-mib", "0")  # start-up restores the lanes
check(h.logged(a, "not a regular file (a FIFO)"), "the FIFO lane file was not logged")
stop(a)

# ninferctl: a FIFO artifact or upgrade source is refused at once; its own inputs may be pipes.
r = offline("inspect", upgrade_fifo)
check(r.returncode != 0 and "not a regular file (a FIFO)" in r.stderr, f"inspect of a FIFO: {r.stderr}")
r = offline("--socket", os.path.join(T, "none.sock"), "artifact", "upgrade", "--offline", upgrade_fifo,
            os.path.join(T, "out2.ninfer"))
check(r.returncode != 0 and "not a regular file (a FIFO)" in r.stderr, f"offline upgrade of a FIFO: {r.stderr}")
r = offline("tokenize", ARTIFACT, "--file", "-", stdin="hello world")
piped = subprocess.run(["bash", "-c", f'"{CTL}" tokenize "{ARTIFACT}" --file <(printf "hello world")'],
                       capture_output=True, text=True, timeout=30)
check(r.returncode == 0 and piped.returncode == 0 and piped.stdout == r.stdout and r.stdout.strip(),
      f"tokenize --file from a pipe: {piped.stderr} {r.stderr}")
r = offline("tokenize", ARTIFACT, "--file", T)
check(r.returncode != 0 and "not a file or pipe (a directory)" in r.stderr, f"tokenize --file DIR: {r.stderr}")
print("test_file_fifos: OK")
