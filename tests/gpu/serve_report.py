#!/usr/bin/env python3
# ninfer - the serving benchmark's arithmetic and table (used by serve_load.py; Python 3 stdlib).
#
# Figures from per-request stream records (serve_load.StreamResult: t_send, marks = [(arrival time s,
# completion tokens so far)] one per SSE chunk that raised the count, t_end):
# - TTFT: first mark - t_send. Decode tok/s: (last count - first count) / (last mark - first mark).
# - ITL: a chunk that brings k tokens after a gap g counts k inter-token latencies of g / k (a
#   token whose text is an incomplete UTF-8 sequence arrives with the next one; random weights
#   sample such tokens ~1% of the time). Chunk gaps: the raw g, one per chunk.
# - All-decode tok/s of N streams: tokens arriving between the last stream's first token and the
#   first stream's last token, over that window (every stream decoding; no prefill but joins).
# - Against `ninferctl bench --json` of the same artifact and run: decode rows by batch and the
#   depth nearest the scenario's mean depth, prefill rows by the nearest prompt length; the wall
#   floor of N streams = N prefills (bench TTFT) + (gen - 1) steps at batch N.
#
# Usage: python3 serve_report.py RESULT.json [BENCH.json]   (prints the table)
#        python3 serve_report.py --selftest
import json
import math
import sys


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def itl_per_token(marks):
    """Inter-token latencies (s) from [(t, count so far)]: a chunk of k tokens after g gives k x g/k."""
    out = []
    for (t0, n0), (t1, n1) in zip(marks, marks[1:]):
        k = n1 - n0
        if k > 0:
            out.extend([(t1 - t0) / k] * k)
    return out


def chunk_gaps(marks):
    return [t1 - t0 for (t0, _), (t1, _) in zip(marks, marks[1:])]


def ttft(rec):
    return rec["marks"][0][0] - rec["t_send"] if rec["marks"] else None


def decode_rate(rec):
    m = rec["marks"]
    if len(m) < 2 or m[-1][0] <= m[0][0]:
        return None
    return (m[-1][1] - m[0][1]) / (m[-1][0] - m[0][0])


def tokens_in_window(marks, t0, t1):
    """Tokens whose chunk arrived in (t0, t1]; a chunk's tokens all count at its arrival."""
    n, prev = 0, 0
    for t, count in marks:
        if t0 < t <= t1:
            n += count - prev
        prev = count
    return n


def all_decode_rate(recs):
    """Aggregate tok/s while every stream decodes, or None when the windows do not overlap."""
    if any(len(r["marks"]) < 2 for r in recs):
        return None
    t0 = max(r["marks"][0][0] for r in recs)
    t1 = min(r["marks"][-1][0] for r in recs)
    if t1 <= t0:
        return None
    return sum(tokens_in_window(r["marks"], t0, t1) for r in recs) / (t1 - t0)


def ms(s):
    return None if s is None else 1000.0 * s


class Bench:
    """`ninferctl bench --json` rows: decode by (batch, nearest depth), prefill by nearest length."""

    def __init__(self, doc):
        self.doc = doc or {}

    def decode(self, batch, depth):
        rows = [r for r in self.doc.get("decode", []) if r["batch"] == batch]
        return min(rows, key=lambda r: abs(r["depth"] - depth)) if rows else None

    def prefill(self, length):
        rows = self.doc.get("prefill", [])
        return min(rows, key=lambda r: abs(r["prompt_len"] - length)) if rows else None


def fmt(v, digits=1):
    if v is None:
        return "-"
    return f"{v:.{digits}f}"


def table(result, bench_doc=None):
    """The readable table: one row per figure, serve beside bench where the bench has one."""
    bench = Bench(bench_doc)
    rows = []

    def row(scenario, figure, serve, ref="", ratio=None):
        rows.append((scenario, figure, serve, ref, "" if ratio is None else f"{ratio:.3f}"))

    def vs_decode(scenario, figure, rate, batch, depth):
        b = bench.decode(batch, depth)
        ref = f"{b['tokens_per_s']:.1f} (b{batch} d{b['depth']})" if b else ""
        row(scenario, figure, fmt(rate), ref, rate / b["tokens_per_s"] if b and rate else None)

    failed = []
    for name, sc in result.get("scenarios", {}).items():
        if sc.get("error"):
            failed.append(f"scenario {name} FAILED: {sc['error']}")
            continue
        for part in sc.get("parts", []):
            label, kind = part["label"], part["kind"]
            if kind == "decode":
                vs_decode(label, "decode tok/s", part["decode_tok_s"], 1, part["mean_depth"])
                b = bench.decode(1, part["mean_depth"])
                row(label, "TTFT ms", fmt(ms(part["ttft_s"])))
                row(label, "ITL p50 / p99 ms", f"{fmt(ms(part['itl_p50_s']), 2)} / {fmt(ms(part['itl_p99_s']), 2)}",
                    f"{b['step_ms']:.2f} step" if b else "", part["itl_p99_s"] * 1000 / b["step_ms"] if b and part["itl_p99_s"] else None)
            elif kind == "ttft":
                p = bench.prefill(part["prompt_tokens"])
                ref = f"{p['tokens_per_s']:.0f} ({p['prompt_len']})" if p else ""
                row(label, "prefill tok/s (len/TTFT)", fmt(part["prefill_tok_s"], 0), ref,
                    part["prefill_tok_s"] / p["tokens_per_s"] if p and part["prefill_tok_s"] else None)
                row(label, "TTFT ms", fmt(ms(part["ttft_s"])), f"{p['ttft_ms']:.1f}" if p else "")
            elif kind == "streams":
                n = part["streams"]
                vs_decode(label, "all-decode tok/s", part["all_decode_tok_s"], n, part["mean_depth"])
                row(label, "aggregate tok/s (tokens/wall)", fmt(part["aggregate_tok_s"]))
                floor = None
                b, p = bench.decode(n, part["mean_depth"]), bench.prefill(part["prompt_tokens"])
                if b and p:
                    floor = (n * p["ttft_ms"] + (part["gen_tokens"] - 1) * b["step_ms"]) / 1000.0
                row(label, "wall s (vs bench floor)", fmt(part["wall_s"], 2), fmt(floor, 2),
                    part["wall_s"] / floor if floor else None)
                row(label, "TTFT p50 / p99 ms", f"{fmt(ms(part['ttft_p50_s']))} / {fmt(ms(part['ttft_p99_s']))}")
                row(label, "ITL p50 / p99 ms", f"{fmt(ms(part['itl_p50_s']), 2)} / {fmt(ms(part['itl_p99_s']), 2)}",
                    f"{b['step_ms']:.2f} step" if b else "", part["itl_p99_s"] * 1000 / b["step_ms"] if b and part["itl_p99_s"] else None)
                if "cold_ttft_s" in part:  # the constrained scenario's masked streams
                    row(label, "cold request TTFT ms (compiles)", fmt(ms(part["cold_ttft_s"])))
                if part.get("vs_free"):
                    row(label, "all-decode tok/s vs free streams", fmt(part["vs_free"], 3))
            elif kind == "mixed":
                b = bench.decode(part["decoders"], part["mean_depth"])
                row(label, "decoders ITL p50 / p99 ms", f"{fmt(ms(part['itl_p50_s']), 2)} / {fmt(ms(part['itl_p99_s']), 2)}",
                    f"{b['step_ms']:.2f} step (b{b['batch']})" if b else "",
                    part["itl_p99_s"] * 1000 / b["step_ms"] if b and part["itl_p99_s"] else None)
                row(label, "decoders ITL max ms", fmt(ms(part["itl_max_s"]), 2))
                row(label, "decoders tok/s in window", fmt(part["decoders_tok_s"]))
                p = bench.prefill(part["long_tokens"])
                row(label, "long TTFT p50 / max ms", f"{fmt(ms(part['long_ttft_p50_s']))} / {fmt(ms(part['long_ttft_max_s']))}",
                    f"{p['ttft_ms']:.1f} ({p['prompt_len']})" if p else "")
            elif kind == "short":
                row(label, "short TTFT idle ms", fmt(ms(part["short_idle_ttft_s"])))
                row(label, f"short TTFT during long ms", fmt(ms(part["short_during_ttft_s"])), "",
                    part["short_during_ttft_s"] / part["short_idle_ttft_s"] if part["short_idle_ttft_s"] and part["short_during_ttft_s"] else None)
                row(label, "long TTFT ms (short sent at)", f"{fmt(ms(part['long_ttft_s']))} ({fmt(ms(part['short_delay_s']))})")
        h = sc.get("host")
        if h:  # the daemon's own counters over the scenario (serve_load.host_figures)
            row(name, "host CPU µs/token: engine / loop", f"{h['report_cpu_us_per_token']:.1f} / {h['loop_cpu_us_per_token']:.1f}")
            row(name, "socket writes / bytes per token", f"{h['writes_per_token']:.2f} / {h['bytes_per_token']:.0f}")
            taken, skipped = (h.get("checkpoints") or [None, None])[:2]
            if taken is not None and skipped is not None:
                row(name, "cache checkpoints taken / skipped", f"{taken:.0f} / {skipped:.0f}")
            if h.get("prefill_slices"):
                row(name, "prefill slices between decode steps", f"{h['prefill_slices']:.0f}")
            drafted, accepted, pauses = (h.get("speculation") or [None, None, None])[:3]
            if drafted:  # only where the server speculated
                row(name, "drafts: proposed / accepted / lane pauses",
                    f"{drafted:.0f} / {accepted or 0:.0f} / {pauses or 0:.0f}")
    head = ("scenario", "figure", "serve", "bench (same run)", "serve/bench")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    lines = [f"ninfer serving benchmark: {result.get('label', '')} ({result.get('url', '')}), "
             f"temperature {result.get('temperature')}, wall {fmt(result.get('wall_s'))} s"]
    for r in [head] + rows:
        lines.append("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    lines.append("ratios: tok/s serve/bench (1 = the engine's speed), ITL p99 / bench step, wall / floor, "
                 "short TTFT during / idle")
    return "\n".join(lines + failed)


def selftest():
    assert percentile([], 50) is None
    assert percentile([3, 1, 2], 50) == 2
    assert abs(percentile([1, 2, 3, 4], 99) - 3.97) < 1e-9
    assert percentile([5], 99) == 5
    marks = [(1.0, 1), (1.01, 2), (1.03, 4), (1.04, 4), (1.05, 5)]
    itl = itl_per_token(marks)
    assert len(itl) == 4 and all(abs(a - b) < 1e-12 for a, b in zip(itl, [0.01, 0.01, 0.01, 0.01])), itl
    assert [round(g, 6) for g in chunk_gaps(marks)] == [0.01, 0.02, 0.01, 0.01]
    rec = {"t_send": 0.5, "marks": marks}
    assert abs(ttft(rec) - 0.5) < 1e-12 and abs(decode_rate(rec) - 4 / 0.05) < 1e-9
    a = {"marks": [(1.0, 1), (2.0, 11), (3.0, 21)]}
    b = {"marks": [(1.5, 1), (2.5, 11), (4.0, 31)]}
    # window (1.5, 3.0]: a brings 10 (t 2.0) + 10 (t 3.0), b brings 10 (t 2.5): 30 tokens over 1.5 s
    assert abs(all_decode_rate([a, b]) - 20.0) < 1e-9
    assert all_decode_rate([a, {"marks": [(3.5, 1), (4.0, 2)]}]) is None
    bench = Bench({"decode": [{"batch": 1, "depth": 512, "step_ms": 5, "tokens_per_s": 200},
                              {"batch": 1, "depth": 8192, "step_ms": 6, "tokens_per_s": 166.7}],
                   "prefill": [{"prompt_len": 1024, "tokens_per_s": 9000, "ttft_ms": 113.8}]})
    assert bench.decode(1, 640)["depth"] == 512 and bench.decode(1, 8300)["depth"] == 8192
    assert bench.decode(8, 512) is None and bench.prefill(900)["prompt_len"] == 1024
    part = {"label": "decode 1x8192+256", "kind": "decode", "decode_tok_s": 150.0, "mean_depth": 8320,
            "ttft_s": 0.9, "itl_p50_s": 0.0066, "itl_p99_s": 0.0072}
    text = table({"label": "t", "scenarios": {"decode": {"parts": [part]}, "x": {"error": "boom"}}}, bench.doc)
    assert "166.7 (b1 d8192)" in text and "0.900" in text and "scenario x FAILED: boom" in text, text
    print("serve_report selftest: ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
    elif len(sys.argv) in (2, 3):
        res = json.load(open(sys.argv[1]))
        print(table(res, json.load(open(sys.argv[2])) if len(sys.argv) == 3 else res.get("bench")))
    else:
        sys.exit("usage: serve_report.py RESULT.json [BENCH.json] | --selftest")
