# ninfer - a device fault while serving, end to end (issue 30, GPU faults), on the CPU (the tiny
# model, test_engine_fault.sh) or the GPU (tests/gpu/engine_fault.sh): ninferd runs with
# --persist-slots and NINFER_FAULT=engine_step:N (core/engine/fault_injection.h). Two streams run
# on the two lanes and a third request waits in the queue when the backend fails at step N (on
# CUDA a real sticky illegal-address error). Checks: each stream ends with an SSE error event
# (engine_unavailable) then [DONE]; the queued request gets 503 engine_unavailable naming the
# failure; ninferd exits with status 3 and its engine-failed line names the fault; each lane's
# file holds its prompt's host checkpoint (nothing read from the failed device); the next start
# restores both lanes (`ninferctl slot list`) and a request extending one is served from it.
#
# Usage: engine_fault.py NINFERD NINFERCTL ARTIFACT DEVICE TMPDIR [STEP]
import http.client, json, os, re, sys, threading

NINFERD, NINFERCTL, ARTIFACT, DEVICE, T = sys.argv[1:6]
STEP = int(sys.argv[6]) if len(sys.argv) > 6 else 400
if not 1 <= STEP <= 1500:
    sys.exit(f"engine_fault: step {STEP} out of 1..1500 (each stream must outlast it in 2048 tokens)")
EXIT_ENGINE_FAILED = 3  # daemon/server.h kExitEngineFailed
FAULT = re.escape(f"NINFER_FAULT=engine_step:{STEP}")
EXPECT = {"cpu": f"cpu: {FAULT}: injected device fault",
          "cuda": f"cuda: {FAULT}: an illegal memory access was encountered"}[DEVICE]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_harness import Harness, post, slot_file_tokens

h = Harness("", T, f"engine_fault ({DEVICE})")
h.daemon, h.ctl_bin, h.device = NINFERD, NINFERCTL, DEVICE
check = h.check
OPTIONS = ("--persist-slots", "--max-context", "2048", "--max-concurrency", "2")
GEN = STEP + 200  # more tokens than steps before the fault: neither stream ends first

def tokens(p, text):
    return post(p, "/tokenize", {"content": text})["tokens"]

class Stream(threading.Thread):
    """A streaming /v1/completions request: its data events in order and whether the body ended."""
    def __init__(self, port, prompt):
        super().__init__(daemon=True)
        self.port, self.prompt = port, prompt
        self.status, self.events, self.ended, self.error = 0, [], False, ""
        self.first_token = threading.Event()

    def run(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            c.request("POST", "/v1/completions", json.dumps({"prompt": self.prompt, "max_tokens": GEN, "stream": True,
                                                             "temperature": 0, "ignore_eos": True}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            self.status = r.status
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                self.events.append(data if data == "[DONE]" else json.loads(data))
                if isinstance(self.events[-1], dict) and self.events[-1].get("choices"):
                    self.first_token.set()
            self.ended = True
        except Exception as e:  # the checks below report it
            self.error = repr(e)
        self.first_token.set()

    def n_text_chunks(self):
        return sum(1 for e in self.events if isinstance(e, dict) and e.get("choices"))

class Queued(threading.Thread):
    """A non-streaming request that waits in the queue: its status and error body."""
    def __init__(self, port, prompt):
        super().__init__(daemon=True)
        self.port, self.prompt, self.status, self.body = port, prompt, 0, {}

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            c.request("POST", "/v1/completions", json.dumps({"prompt": self.prompt, "max_tokens": 4}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            self.status, self.body = r.status, json.loads(r.read() or b"{}")
        except Exception as e:
            self.body = {"exception": repr(e)}

def engine_error(event):
    err = event.get("error", {}) if isinstance(event, dict) else {}
    return err.get("code") == "engine_unavailable" and "engine failed" in err.get("message", "")

# 1. The fault: two streams on the two lanes, a third request queued behind them.
os.environ["NINFER_FAULT"] = f"engine_step:{STEP}"
p = h.start("fault", ARTIFACT, *OPTIONS)
del os.environ["NINFER_FAULT"]
check(h.logged(p, f"NINFER_FAULT=engine_step:{STEP} is set"), "no warning that the fault injection is armed")
prompts = [tokens(p, "The lighthouse keeper counted the ships that passed the rocks every night, one by one, "
                     "and wrote their names in a book that nobody else ever read."),
           tokens(p, "In the mountain village the baker rose before dawn to light the ovens, while snow fell "
                     "quietly on the roofs and the streets were still empty and dark.")]
check(all(len(x) > 16 for x in prompts), f"prompts too short for a checkpoint: {[len(x) for x in prompts]}")
streams = [Stream(p.port, x) for x in prompts]
for s in streams:
    s.start()
for s in streams:
    check(s.first_token.wait(120), "a stream got no token")
    check(s.n_text_chunks() > 0, f"a stream ended before its first token: {s.status} {s.error} {s.events[-3:]}")
queued = Queued(p.port, prompts[0][:20])
queued.start()
try:
    code = p.wait(timeout=180)
except Exception:
    h.fail(f"ninferd did not exit after the fault (step {STEP} never came?)")
h.procs.remove(p)
for t in (*streams, queued):
    t.join(60)
log = "".join(p.lines)
check(code == EXIT_ENGINE_FAILED, f"exit status {code}, wanted {EXIT_ENGINE_FAILED}:\n{log[-2000:]}")

# 2. What the clients got.
for i, s in enumerate(streams):
    tail = s.events[-2:]
    check(s.status == 200 and s.ended and not s.error, f"stream {i}: {s.status} ended={s.ended} {s.error}")
    check(len(tail) == 2 and engine_error(tail[0]) and tail[1] == "[DONE]",
          f"stream {i} does not end with an engine_unavailable error event then [DONE]: {tail}")
queued_message = queued.body.get("error", {}).get("message", "")  # Scheduler::fail_all's words for the queue
check(queued.status == 503 and engine_error(queued.body) and re.match("the engine failed: " + EXPECT, queued_message),
      f"the queued request: {queued.status} {queued.body}")

# 3. The log: the catalogued engine-failed event names the fault and the exit; the lanes were saved.
failed = [l for l in p.lines if "event=engine-failed" in l]
check(len(failed) == 1 and re.search(EXPECT, failed[0]) and f"exiting with status {EXIT_ENGINE_FAILED}" in failed[0],
      f"engine-failed line: {failed}\n{log[-2000:]}")
check(re.search(r"slots, saved from host checkpoints 2 lane\(s\)", log), f"lanes not saved:\n{log[-2000:]}")
for x in prompts:  # each running lane goes back to its prompt's checkpoint, and the log says so
    check(re.search(rf"slots, lane \d is saved from its host checkpoint of {len(x)} of the \d+ tokens it held", log),
          f"no note of the {len(x)}-token checkpoint saved:\n{log[-2000:]}")

# 4. The lane files hold the prompts' checkpoints (a running request goes back to its prompt).
lanes_dir = os.path.join(p.dir, "state", "lanes")
saved = {int(m.group(1)): slot_file_tokens(os.path.join(lanes_dir, f))
         for f in sorted(os.listdir(lanes_dir)) if (m := re.fullmatch(r"lane-(\d+)\.nslot", f))}
check(sorted(saved.values()) == sorted(prompts), f"lane files {[(k, len(v)) for k, v in saved.items()]}, "
                                                 f"prompts {[len(x) for x in prompts]}")

# 5. The next start (no fault) restores both lanes; a request extending one is served from it.
p = h.start("fault", ARTIFACT, *OPTIONS)
check(h.logged(p, "slots, restored 2 lane(s)"), "no restore summary")
listed = {l["id"]: l["tokens"] for l in json.loads(h.ctl(p, "--json", "slot", "list").stdout)["slots"]}
check(listed == {lane: len(ids) for lane, ids in saved.items()}, f"slot list {listed} after the restart")
follow = prompts[0] + tokens(p, " The book was lost in a storm.")
r = post(p, "/v1/completions", {"prompt": follow, "max_tokens": 4, "temperature": 0})
cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
check(cached == len(prompts[0]), f"after the restart: cached {cached}, wanted {len(prompts[0])}")
h.stop(p)
print("engine-failed line:", failed[0].strip())
print(f"engine_fault ({DEVICE}): OK (fault at step {STEP}: 2 streams ended with error events, the queued request got "
      f"503, exit {EXIT_ENGINE_FAILED}, lanes of {sorted(len(x) for x in prompts)} tokens saved from host checkpoints "
      f"and restored, {cached} tokens reused)")
