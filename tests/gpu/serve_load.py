#!/usr/bin/env python3
# ninfer - serving load generator: streams POST /v1/completions from ninferd over raw HTTP/1.1
# (asyncio, Python 3 stdlib only, so it runs on the GPU machine as is) and measures what a client
# sees: TTFT, inter-token latency, decode and aggregate tok/s, wall time (serve_report.py).
#
# Every request sends a prompt of exact length as token ids (random ids, a fresh draw each, so no
# prefix-cache or lane reuse), "ignore_eos": true (random weights would end early on a sampled
# end-of-sequence id) and stream_options.continuous_usage_stats, so each chunk carries the tokens
# generated so far: the tokens behind a chunk are known even when one brings several.
#
# Scenarios (--scenarios, comma-separated; each failure is recorded and the others still run):
#   decode   one stream: --decode-depth prompt tokens, --decode-gen generated
#   ttft     idle server, one prompt of each --ttft-lens length at a time, max_tokens 1, --ttft-reps times
#   streams  for N in --streams: N concurrent requests of --streams-shape PROMPT:GEN
#   steady   --steady N:PROMPT:GEN (the "while all decode" rate of long generations)
#   mixed    --mixed-decoders streams decoding while a --mixed-long prompt arrives every
#            --mixed-every-s, --mixed-arrivals times; the decoders' ITL between the first arrival
#            and the last long request's end, then the decoders are cancelled (connection closed)
#   short    a --short-long prompt, then after --short-delay-s a --short-len prompt: its TTFT
#            against the same short request on the idle server
#   constrained  one request with --constrained-schema as llama.cpp's `json_schema` field (its
#            grammar compiled: the "cold" TTFT), then for N in --constrained-streams: N free streams
#            of --constrained-shape PROMPT:GEN, then the same N with the schema: what a token mask
#            costs a batch (issue 32), beside the free rate. The
#            default schema (an integer array of at least 1,000 items) cannot end within GEN tokens,
#            so every constrained request also ends by length with exactly GEN tokens.
# A warm-up (--warmup-streams concurrent short requests) runs first: graph capture and first-use
# costs stay out of the figures. Every request must return 200, its prompt token count and
# exactly max_tokens tokens (finish "length"), else the scenario is marked failed and exit is 1.
#
# Usage: serve_load.py --url http://127.0.0.1:8080 --json out.json [--summary out.txt]
#                      [--bench bench.json] [--label NAME] [scenario options]   |   --selftest
import argparse
import asyncio
import json
import random
import sys
import time
import urllib.parse

import serve_report as report


class Dechunker:
    """HTTP/1.1 chunked transfer decoding, fed in arbitrary pieces; returns whole chunks' bytes."""

    def __init__(self):
        self.buf, self.need, self.ended = b"", None, False

    def feed(self, data):
        self.buf += data
        out = []
        while not self.ended:
            if self.need is None:
                eol = self.buf.find(b"\r\n")
                if eol < 0:
                    break
                size = int(self.buf[:eol].split(b";")[0], 16)
                self.buf = self.buf[eol + 2:]
                if size == 0:
                    self.ended = True
                    break
                self.need = size
            if len(self.buf) < self.need + 2:
                break
            out.append(self.buf[:self.need])
            self.buf, self.need = self.buf[self.need + 2:], None
        return b"".join(out)


class SseProtocol(asyncio.Protocol):
    """One streaming request: records arrival times of the chunks that raise the token count."""

    def __init__(self, request, rec, done):
        self.request, self.rec, self.done = request, rec, done
        self.head, self.body, self.sse, self.dechunk = b"", b"", b"", None
        self.in_body = False
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data):
        t = time.perf_counter()
        try:
            self.feed(data, t)
        except Exception as e:  # a malformed answer is the server's fault: record it, stop reading
            self.finish(f"client: cannot parse the answer: {e!r}")

    def feed(self, data, t):
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.head[:end].decode("latin-1").split("\r\n")
            self.rec["status"] = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.dechunk = Dechunker()
            self.in_body, data = True, self.head[end + 4:]
        if self.dechunk:
            data = self.dechunk.feed(data)
        if self.rec["status"] != 200:
            self.body += data
            return
        self.sse += data
        while b"\n\n" in self.sse:
            event, self.sse = self.sse.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    self.on_data(line[5:].strip(), t)

    def on_data(self, payload, t):
        rec = self.rec
        if payload == b"[DONE]":
            rec["done"] = True
            return self.finish(None)
        obj = json.loads(payload)
        if "error" in obj:
            return self.finish(f"in-band error: {json.dumps(obj['error'])[:300]}")
        choices, usage = obj.get("choices"), obj.get("usage")
        if choices:
            rec["n_chunks"] += 1
            if choices[0].get("finish_reason"):
                rec["finish_reason"] = choices[0]["finish_reason"]
        if usage:
            n = usage["completion_tokens"]
            if not choices:
                rec["usage"] = usage
            if n > (rec["marks"][-1][1] if rec["marks"] else 0):
                rec["marks"].append((t, n))

    def finish(self, error):
        if error and not self.rec["error"]:
            self.rec["error"] = error
        if self.transport:
            self.transport.close()

    def connection_lost(self, exc):
        rec = self.rec
        rec["t_end"] = time.perf_counter()
        if rec["status"] is None and not rec["error"]:
            rec["error"] = f"connection closed before an answer ({exc})"
        elif rec["status"] not in (None, 200) and not rec["error"]:
            rec["error"] = f"HTTP {rec['status']}: {self.body[:300].decode('utf-8', 'replace')}"
        elif not rec["done"] and not rec["error"] and not rec["cancelled"]:
            rec["error"] = "stream ended without [DONE]"
        if not self.done.done():
            self.done.set_result(rec)


class Client:
    def __init__(self, url, api_key, temperature, seed, timeout_s):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.api_key, self.temperature, self.timeout_s = api_key, temperature, timeout_s
        self.rng = random.Random(seed)

    def prompt(self, n):
        return [self.rng.randrange(256, 151000) for _ in range(n)]  # regular vocabulary ids

    def start(self, prompt_tokens, max_tokens, extra=None):
        """Sends one streaming request (extra: more body fields); returns (record, awaitable finishing
        it, cancel function)."""
        body = json.dumps({"prompt": self.prompt(prompt_tokens), "max_tokens": max_tokens, "stream": True,
                           "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                           "ignore_eos": True, "temperature": self.temperature, **(extra or {})}).encode()
        auth = f"Authorization: Bearer {self.api_key}\r\n" if self.api_key else ""
        request = (f"POST /v1/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{auth}"
                   "Connection: close\r\n\r\n").encode() + body
        rec = {"prompt_tokens": prompt_tokens, "max_tokens": max_tokens, "t_send": time.perf_counter(),
               "t_end": None, "status": None, "error": None, "done": False, "cancelled": False, "marks": [],
               "n_chunks": 0, "usage": None, "finish_reason": None}
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        holder = {}

        async def run():
            try:
                transport, _ = await loop.create_connection(lambda: SseProtocol(request, rec, done), self.host, self.port)
                holder["transport"] = transport
                await asyncio.wait_for(asyncio.shield(done), self.timeout_s)
            except asyncio.TimeoutError:
                rec["error"] = f"no end within {self.timeout_s} s"
                holder.get("transport") and holder["transport"].close()
            except OSError as e:
                rec["error"] = f"cannot connect: {e}"
            rec["t_end"] = rec["t_end"] or time.perf_counter()
            return rec

        def cancel():
            rec["cancelled"] = True
            if holder.get("transport"):
                holder["transport"].close()

        return rec, asyncio.ensure_future(run()), cancel

    async def one(self, prompt_tokens, max_tokens, extra=None):
        _, task, _ = self.start(prompt_tokens, max_tokens, extra)
        return await task


def check(recs, allow_cancelled=False):
    """Raises ValueError naming the first request that errored or returned the wrong counts."""
    for i, r in enumerate(recs):
        if r["error"]:
            raise ValueError(f"request {i}: {r['error']}")
        if r["cancelled"] and allow_cancelled:
            if not r["marks"]:
                raise ValueError(f"request {i}: cancelled before its first token")
            continue
        u = r["usage"] or {}
        if u.get("prompt_tokens") != r["prompt_tokens"] or u.get("completion_tokens") != r["max_tokens"]:
            raise ValueError(f"request {i}: usage {u} for {r['prompt_tokens']} prompt tokens, "
                             f"max_tokens {r['max_tokens']}")
        if r["finish_reason"] != "length" or r["marks"][-1][1] != r["max_tokens"]:
            raise ValueError(f"request {i}: finish {r['finish_reason']}, last count {r['marks'][-1][1]}")


def summary(r):
    """A request's figures for the JSON (not its per-chunk marks)."""
    itl = report.itl_per_token(r["marks"])
    return {"prompt_tokens": r["prompt_tokens"], "completion_tokens": r["marks"][-1][1] if r["marks"] else 0,
            "ttft_s": report.ttft(r), "total_s": r["t_end"] - r["t_send"], "decode_tok_s": report.decode_rate(r),
            "itl_p50_s": report.percentile(itl, 50), "itl_p99_s": report.percentile(itl, 99),
            "n_chunks": r["n_chunks"], "finish_reason": r["finish_reason"], "cancelled": r["cancelled"],
            "error": r["error"]}


def pooled(recs, figure):
    return [x for r in recs for x in figure(r["marks"])]


async def streams_part(client, label, n, prompt, gen, extra=None):
    recs = await asyncio.gather(*(client.one(prompt, gen, extra) for _ in range(n)))
    check(recs)
    itl, ttfts = pooled(recs, report.itl_per_token), [report.ttft(r) for r in recs]
    wall = max(r["t_end"] for r in recs) - min(r["t_send"] for r in recs)
    return {"label": label, "kind": "streams", "streams": n, "prompt_tokens": prompt, "gen_tokens": gen,
            "mean_depth": prompt + gen // 2, "wall_s": wall, "aggregate_tok_s": n * gen / wall,
            "all_decode_tok_s": report.all_decode_rate(recs), "ttft_p50_s": report.percentile(ttfts, 50),
            "ttft_p99_s": report.percentile(ttfts, 99), "itl_p50_s": report.percentile(itl, 50),
            "itl_p99_s": report.percentile(itl, 99), "chunk_gap_p99_s": report.percentile(pooled(recs, report.chunk_gaps), 99),
            "requests": [summary(r) for r in recs]}


async def scenario_decode(client, a, _):
    r = await client.one(a.decode_depth, a.decode_gen)
    check([r])
    itl = report.itl_per_token(r["marks"])
    return [{"label": f"decode 1x{a.decode_depth}+{a.decode_gen}", "kind": "decode", "mean_depth": a.decode_depth + a.decode_gen // 2,
             "decode_tok_s": report.decode_rate(r), "ttft_s": report.ttft(r), "itl_p50_s": report.percentile(itl, 50),
             "itl_p99_s": report.percentile(itl, 99), "requests": [summary(r)]}]


async def scenario_ttft(client, a, state):
    parts = []
    for length in a.ttft_lens:
        recs = [await client.one(length, 1) for _ in range(a.ttft_reps)]
        check(recs)
        t = report.percentile([report.ttft(r) for r in recs], 50)
        state[f"ttft_{length}"] = t
        parts.append({"label": f"ttft {length}", "kind": "ttft", "prompt_tokens": length, "ttft_s": t,
                      "prefill_tok_s": length / t, "requests": [summary(r) for r in recs]})
    return parts


async def scenario_streams(client, a, _):
    prompt, gen = a.streams_shape
    return [await streams_part(client, f"streams {n}x{prompt}+{gen}", n, prompt, gen) for n in a.streams]


async def scenario_steady(client, a, _):
    n, prompt, gen = a.steady
    return [await streams_part(client, f"steady {n}x{prompt}+{gen}", n, prompt, gen)]


async def scenario_mixed(client, a, _):
    decoders = [client.start(a.mixed_prompt, a.mixed_decoder_max) for _ in range(a.mixed_decoders)]
    deadline = time.perf_counter() + client.timeout_s
    while not all(rec["marks"] or rec["error"] for rec, _, _ in decoders) and time.perf_counter() < deadline:
        await asyncio.sleep(0.005)
    longs = []
    for i in range(a.mixed_arrivals):
        if i:
            await asyncio.sleep(a.mixed_every_s)
        longs.append(client.start(a.mixed_long, a.mixed_long_gen))
    long_recs = await asyncio.gather(*(task for _, task, _ in longs))
    t0, t1 = long_recs[0]["t_send"], max(r["t_end"] for r in long_recs)
    for rec, _, cancel in decoders:
        cancel()
    dec_recs = await asyncio.gather(*(task for _, task, _ in decoders))
    check(long_recs)
    check(dec_recs, allow_cancelled=True)
    if any(r["done"] for r in dec_recs):
        raise ValueError("a decoder reached its max_tokens before the last long prompt ended: raise --mixed-decoder-max")
    window = [[(t, n) for t, n in r["marks"] if t0 <= t <= t1] for r in dec_recs]
    itl = [x for m in window for x in report.itl_per_token(m)]
    ttfts = [report.ttft(r) for r in long_recs]
    mean_tokens = sum(r["marks"][-1][1] for r in dec_recs) / len(dec_recs)
    return [{"label": f"mixed {a.mixed_decoders}x{a.mixed_prompt} + {a.mixed_long} every {a.mixed_every_s:g} s",
             "kind": "mixed", "decoders": a.mixed_decoders, "long_tokens": a.mixed_long, "window_s": t1 - t0,
             "mean_depth": a.mixed_prompt + mean_tokens / 2, "itl_p50_s": report.percentile(itl, 50),
             "itl_p99_s": report.percentile(itl, 99), "itl_max_s": max(itl) if itl else None,
             "decoders_tok_s": sum(report.tokens_in_window(r["marks"], t0, t1) for r in dec_recs) / (t1 - t0),
             "long_ttft_p50_s": report.percentile(ttfts, 50), "long_ttft_max_s": max(ttfts),
             "requests": [summary(r) for r in dec_recs + long_recs]}]


async def scenario_short(client, a, state):
    idle = await client.one(a.short_len, 1)
    check([idle])
    delay = a.short_delay_s
    if delay is None:  # a quarter into the long prefill when the ttft scenario timed that length
        delay = 0.25 * state.get(f"ttft_{a.short_long}", 1.0)
    _, long_task, _ = client.start(a.short_long, 1)
    await asyncio.sleep(delay)
    short = await client.one(a.short_len, 1)
    long_rec = await long_task
    check([short, long_rec])
    return [{"label": f"short {a.short_len} during {a.short_long}", "kind": "short", "short_delay_s": delay,
             "short_idle_ttft_s": report.ttft(idle), "short_during_ttft_s": report.ttft(short),
             "long_ttft_s": report.ttft(long_rec), "requests": [summary(r) for r in (idle, short, long_rec)]}]


async def scenario_constrained(client, a, _):
    prompt, gen = a.constrained_shape
    constraint = {"json_schema": json.loads(a.constrained_schema)}
    cold = await client.one(prompt, 16, constraint)  # compiles the grammar; later requests hit the cache
    check([cold])
    parts = []
    for n in a.constrained_streams:
        free = await streams_part(client, f"free {n}x{prompt}+{gen}", n, prompt, gen)
        masked = await streams_part(client, f"json_schema {n}x{prompt}+{gen}", n, prompt, gen, constraint)
        if not parts:
            masked["cold_ttft_s"] = report.ttft(cold)
        if free["all_decode_tok_s"] and masked["all_decode_tok_s"]:
            masked["vs_free"] = masked["all_decode_tok_s"] / free["all_decode_tok_s"]
        parts += [free, masked]
    return parts


SCENARIOS = {"decode": scenario_decode, "ttft": scenario_ttft, "streams": scenario_streams,
             "steady": scenario_steady, "mixed": scenario_mixed, "short": scenario_short,
             "constrained": scenario_constrained}


HOST_COUNTERS = ("ninfer_generation_tokens_total", "ninfer_token_report_cpu_seconds_total",
                 "ninfer_loop_engine_event_cpu_seconds_total", "ninfer_loop_engine_events_total",
                 "ninfer_http_socket_writes_total", "ninfer_http_socket_write_bytes_total")
CHECKPOINT_COUNTERS = ("ninfer_prefix_cache_checkpoints_total", "ninfer_prefix_cache_checkpoints_skipped_total")
SLICE_COUNTER = "ninfer_prefill_slices_total"  # --prefill-slice-layers: slices run between decode steps
# --speculative: draft tokens proposed and accepted, and lanes paused by the speculation gate
SPEC_COUNTERS = ("ninfer_spec_decode_num_draft_tokens_total", "ninfer_spec_decode_num_accepted_tokens_total",
                 "ninfer_spec_decode_lane_pauses_total")
# images and video: items decoded and the decoding's seconds, items through the tower and its seconds
MEDIA_COUNTERS = ("ninfer_media_items_decoded_total", "ninfer_media_decode_seconds_total",
                  "ninfer_vision_items_encoded_total", "ninfer_vision_encode_seconds_total")
SCRAPED = set(HOST_COUNTERS + CHECKPOINT_COUNTERS + SPEC_COUNTERS + MEDIA_COUNTERS + (SLICE_COUNTER,))


def scrape(url):
    """ninferd's /metrics counters named in SCRAPED, or {} if unreadable."""
    import urllib.request
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10) as f:
            text = f.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in SCRAPED:
            out[name] = float(value)
    return out


def host_figures(before, after):
    """Per generated token, between two scrapes: the engine thread's and the loop's CPU time (µs) and
    the socket writes and bytes. None when the daemon has no such counters or made no tokens."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in HOST_COUNTERS}
    tokens = d["ninfer_generation_tokens_total"]
    if not tokens or not all(k in after for k in HOST_COUNTERS):
        return None
    return {"tokens": tokens, "report_cpu_us_per_token": d["ninfer_token_report_cpu_seconds_total"] * 1e6 / tokens,
            "loop_cpu_us_per_token": d["ninfer_loop_engine_event_cpu_seconds_total"] * 1e6 / tokens,
            "events_per_token": d["ninfer_loop_engine_events_total"] / tokens,
            "writes_per_token": d["ninfer_http_socket_writes_total"] / tokens,
            "bytes_per_token": d["ninfer_http_socket_write_bytes_total"] / tokens,
            # prefix-cache checkpoints begun and skipped (copies busy) over the scenario; None if absent
            "checkpoints": [after[k] - before.get(k, 0.0) if k in after else None for k in CHECKPOINT_COUNTERS],
            # prefill chunk slices run between decode steps over the scenario; None if absent
            "prefill_slices": after[SLICE_COUNTER] - before.get(SLICE_COUNTER, 0.0) if SLICE_COUNTER in after else None,
            # drafted, accepted, gate pauses over the scenario; None if absent
            "speculation": [after[k] - before.get(k, 0.0) if k in after else None for k in SPEC_COUNTERS]}


async def run_all(a):
    client = Client(a.url, a.api_key, a.temperature, a.seed, a.timeout_s)
    result = {"label": a.label, "url": a.url, "temperature": a.temperature, "args": vars(a).copy(), "scenarios": {}}
    start, state = time.perf_counter(), {}
    if a.warmup_streams:
        t = time.perf_counter()
        warm = await asyncio.gather(*(client.one(a.warmup_prompt, a.warmup_gen) for _ in range(a.warmup_streams)))
        result["warmup"] = {"wall_s": time.perf_counter() - t, "errors": [r["error"] for r in warm if r["error"]]}
    for name in a.scenarios:
        t, before = time.perf_counter(), scrape(a.url)
        try:
            result["scenarios"][name] = {"parts": await SCENARIOS[name](client, a, state)}
        except Exception as e:
            result["scenarios"][name] = {"error": f"{type(e).__name__}: {e}"}
        result["scenarios"][name]["host"] = host_figures(before, scrape(a.url))
        result["scenarios"][name]["wall_s"] = time.perf_counter() - t
        print(f"serve_load: {name} {'FAILED ' + result['scenarios'][name]['error'] if 'error' in result['scenarios'][name] else 'ok'}"
              f" in {result['scenarios'][name]['wall_s']:.1f} s", file=sys.stderr, flush=True)
    result["wall_s"] = time.perf_counter() - start
    return result


def counts(text, n=None):
    v = [int(x) for x in text.split("," if n is None else ":")]
    if (n is not None and len(v) != n) or not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': want {'N,N,...' if n is None else ':'.join(['N'] * n)} of positive counts")
    return v


def positive(text):
    return counts(text, 1)[0]


def parse_args(argv):
    p = argparse.ArgumentParser(description="ninferd serving benchmark (see the header of this file)")
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--api-key", default="")
    p.add_argument("--label", default="")
    p.add_argument("--json", required=True, help="write the results here")
    p.add_argument("--summary", help="write the table here too")
    p.add_argument("--bench", help="`ninferctl bench --json` output of the same artifact, for the ratios")
    p.add_argument("--scenarios", default="decode,ttft,streams,steady,mixed,short,constrained",
                   type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy, as the bench")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=300.0, help="per request")
    p.add_argument("--warmup-streams", type=int, default=8, help="0 = no warm-up")
    p.add_argument("--warmup-prompt", type=positive, default=256)
    p.add_argument("--warmup-gen", type=positive, default=16)
    p.add_argument("--decode-depth", type=positive, default=8192)
    p.add_argument("--decode-gen", type=positive, default=256)
    p.add_argument("--ttft-lens", type=counts, default=[1024, 8192, 32768])
    p.add_argument("--ttft-reps", type=positive, default=1)
    p.add_argument("--streams", type=counts, default=[1, 2, 4, 8])
    p.add_argument("--streams-shape", type=lambda s: counts(s, 2), default=[512, 256], help="PROMPT:GEN")
    p.add_argument("--steady", type=lambda s: counts(s, 3), default=[8, 128, 1024], help="N:PROMPT:GEN")
    p.add_argument("--mixed-decoders", type=positive, default=4)
    p.add_argument("--mixed-prompt", type=positive, default=128)
    p.add_argument("--mixed-decoder-max", type=positive, default=16384, help="decoders' max_tokens (cancelled sooner)")
    p.add_argument("--mixed-long", type=positive, default=8192)
    p.add_argument("--mixed-long-gen", type=positive, default=8)
    p.add_argument("--mixed-every-s", type=float, default=2.0)
    p.add_argument("--mixed-arrivals", type=positive, default=4)
    p.add_argument("--short-long", type=positive, default=32768)
    p.add_argument("--short-len", type=positive, default=128)
    p.add_argument("--short-delay-s", type=float, default=None, help="default: a quarter of the idle TTFT")
    p.add_argument("--constrained-streams", type=counts, default=[1, 8])
    p.add_argument("--constrained-shape", type=lambda s: counts(s, 2), default=[128, 256], help="PROMPT:GEN")
    p.add_argument("--constrained-schema", default='{"type": "array", "items": {"type": "integer"}, "minItems": 1000}',
                   help="JSON schema of the constrained requests (must not end within GEN tokens)")
    a = p.parse_args(argv)
    unknown = [s for s in a.scenarios if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; known: {','.join(SCENARIOS)}")
    return a


def main(argv):
    a = parse_args(argv)
    result = asyncio.run(run_all(a))
    bench = None
    if a.bench:
        try:
            with open(a.bench) as f:
                bench = json.load(f)
        except (OSError, ValueError) as e:
            result["bench_error"] = f"cannot read {a.bench}: {e}"
    result["bench"] = bench
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    text = report.table(result, bench)
    print(text)
    if a.summary:
        with open(a.summary, "a") as f:
            f.write(text + "\n")
    return 1 if any("error" in s for s in result["scenarios"].values()) else 0


def selftest():
    d = Dechunker()
    stream = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
    got = b"".join(d.feed(stream[i:i + 3]) for i in range(0, len(stream), 3))
    assert got == b"hello world" and d.ended, got
    rec = {"status": None, "error": None, "done": False, "cancelled": False, "marks": [], "n_chunks": 0,
           "usage": None, "finish_reason": None, "t_end": None}

    class Done:
        def done(self):
            return False

        def set_result(self, r):
            pass
    proto = SseProtocol(b"", rec, Done())
    events = [b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n']
    for body in [b': ping\n\n', b'data: {"choices":[{"text":"a","finish_reason":null}],"usage":{"completion_tokens":1}}\n\n',
                 b'data: {"choices":[{"text":"bc","finish_reason":null}],"usage":{"completion_tokens":3}}\n\n',
                 b'data: {"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":3}}\n\n',
                 b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}\n\ndata: [DONE]\n\n']:
        events.append(b"%x\r\n" % len(body) + body + b"\r\n")
    for i, e in enumerate(events):
        proto.feed(e, float(i))
    assert rec["status"] == 200 and rec["done"] and rec["finish_reason"] == "length", rec
    assert rec["marks"] == [(2.0, 1), (3.0, 3)] and rec["n_chunks"] == 3 and rec["usage"]["prompt_tokens"] == 4, rec
    rec.update(prompt_tokens=4, max_tokens=3)
    check([rec])
    rec["usage"] = {"prompt_tokens": 4, "completion_tokens": 2}
    try:
        check([rec])
        raise AssertionError("check passed a short answer")
    except ValueError:
        pass
    print("serve_load selftest: ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
