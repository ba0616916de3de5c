#!/usr/bin/env python3
# ninfer - a multimodal request's time to first token over HTTP (issue 31): POSTs a streaming
# /v1/chat/completions with one image or video as a base64 data: URL (what a client sends), and
# times the first content chunk as the client sees it: body upload, FFmpeg decoding and resizing on
# the daemon's media workers, the vision tower, the prefill and the first token. Python 3 stdlib only,
# so it runs on the GPU machine as is.
#
# Each repetition starts its user message with a fresh text nonce, so the prefix cache (keyed on the
# tokens and media digests in order) never reuses an earlier repetition's vision rows or KV.
# Prints one line per repetition, a RESULT line (median and best) and, from /metrics before and
# after, the daemon's decoding and tower time per item; exit status 1 on any error or on a prompt
# token count that differs between repetitions by more than the nonce's few tokens.
#
# Usage: media_ttft.py --url http://127.0.0.1:8080 --file clip.mp4 [--kind video] [--reps 3]
import argparse
import base64
import http.client
import json
import mimetypes
import statistics
import sys
import time
import urllib.parse

from serve_load import MEDIA_COUNTERS, scrape

KINDS = {"image": "image_url", "video": "video_url"}


def guess_kind(path):
    mime = mimetypes.guess_type(path)[0] or ""
    return "video" if mime.startswith("video/") else "image"


def served_model(url, timeout_s):
    """The id /v1/models lists first (ninferd serves one)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout_s)
    conn.request("GET", "/v1/models")
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"GET /v1/models: HTTP {resp.status}")
    return json.loads(resp.read())["data"][0]["id"]


def one_request(url, model, part, nonce, max_tokens, timeout_s):
    """One streaming request; returns (ttft_s, total_s, prompt_tokens)."""
    u = urllib.parse.urlsplit(url)
    body = json.dumps({
        "model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"[{nonce}] Describe this."}, part]}],
    }).encode()
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout_s)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read(2000).decode(errors='replace')}")
    ttft, prompt_tokens = None, None
    for raw in resp:  # http.client undoes the chunked encoding; SSE events are lines
        line = raw.strip()
        if not line.startswith(b"data:") or line == b"data: [DONE]":
            continue
        event = json.loads(line[5:])
        if "error" in event:
            raise RuntimeError(f"stream error: {event['error']}")
        if ttft is None and any(c.get("delta", {}).get("content") or c.get("delta", {}).get("reasoning_content")
                                for c in event.get("choices", [])):
            ttft = time.perf_counter() - start
        if event.get("usage"):
            prompt_tokens = event["usage"]["prompt_tokens"]
    total = time.perf_counter() - start
    conn.close()
    if ttft is None:  # a first token that renders no text (an empty piece): the stream's end bounds it
        ttft = total
    return ttft, total, prompt_tokens


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--file", required=True, help="the image or video to send")
    p.add_argument("--kind", choices=sorted(KINDS), help="default: from the file name")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=1)
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--label", default="")
    a = p.parse_args(argv)
    kind = a.kind or guess_kind(a.file)
    with open(a.file, "rb") as f:
        data = f.read()
    mime = mimetypes.guess_type(a.file)[0] or ("video/mp4" if kind == "video" else "image/png")
    field = KINDS[kind]
    part = {"type": field, field: {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}
    model = served_model(a.url, a.timeout_s)
    before = scrape(a.url)
    ttfts, tokens = [], []
    for rep in range(a.reps):
        ttft, total, prompt_tokens = one_request(a.url, model, part, f"{time.time_ns()}-{rep}", a.max_tokens, a.timeout_s)
        ttfts.append(ttft)
        tokens.append(prompt_tokens)
        print(f"media_ttft {a.label or a.file}: rep {rep} TTFT {ttft * 1e3:.1f} ms, whole request {total * 1e3:.1f} ms, "
              f"prompt tokens {prompt_tokens}", flush=True)
    if None in tokens or max(tokens) - min(tokens) > 8:
        print(f"media_ttft: prompt token counts {tokens} (expected equal within the nonce's tokens)", file=sys.stderr)
        return 1
    print(f"RESULT media_ttft {a.label or a.file} kind {kind} bytes {len(data)} prompt_tokens {tokens[0]} "
          f"ttft_median_ms {statistics.median(ttfts) * 1e3:.1f} ttft_best_ms {min(ttfts) * 1e3:.1f}")
    after = scrape(a.url)
    decoded, decode_s, encoded, encode_s = (after.get(k, 0.0) - before.get(k, 0.0) for k in MEDIA_COUNTERS)
    per = lambda s, n: f"{1e3 * s / n:.1f} ms" if n else "-"
    print(f"  per item, /metrics: decode+resize {per(decode_s, decoded)} ({decoded:.0f} items), "
          f"tower {per(encode_s, encoded)} ({encoded:.0f} items)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, RuntimeError, ValueError) as e:
        print(f"media_ttft: {e}", file=sys.stderr)
        sys.exit(1)
