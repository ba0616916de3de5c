#!/usr/bin/env python3
# ninfer - report of one decode step's probe CSV (ninfer/kernels/probe.h: a -DNINFER_GPU_PROBE=ON build,
# bench_decode with NINFER_PROBE_OUT=prefix writes prefix_b<batch>_d<depth>.csv).
#
# Per launch (one %gridid): when its blocks started (before their PDL wait), when their waits
# returned, its gap = its first wait return to the next launch's first wait return (its share of
# the step's chain: from when its predecessor ended to when it ended, give or take the boundary),
# and its late blocks = blocks that started only after its wait had returned (their loads before the
# wait then sit on the chain). Then per launch shape (blocks x threads): count, mean gap, total.
# Times in us from the step's first wait return. Marks (events with threads = 0, probe.cuh's
# probe_mark in a scratch build; their tag in t_wait) are kept apart: per launch shape and tag, the
# min / median / max over a launch's blocks of the mark's time after that launch's first wait
# return, averaged over the launches of that shape.
#
# Usage: python3 probe_report.py step.csv [rows=40]    |    python3 probe_report.py --selftest
import collections
import csv
import io
import statistics
import sys


def launches(rows):
    by_grid = collections.defaultdict(list)
    for r in rows:
        if int(r["threads"]) != 0:  # marks (threads 0) are not block starts
            by_grid[int(r["grid"])].append({k: int(v) for k, v in r.items()})
    out = []
    for gid, blocks in by_grid.items():
        go = [b["t_go"] for b in blocks]
        start = [b["t_start"] for b in blocks]
        out.append({"grid": gid, "shape": f"{blocks[0]['nblocks']}x{blocks[0]['threads']}", "blocks": blocks,
                    "start_first": min(start), "start_last": max(start), "go_first": min(go), "go_last": max(go)})
    out.sort(key=lambda x: x["go_first"])
    for i, x in enumerate(out):
        x["gap"] = out[i + 1]["go_first"] - x["go_first"] if i + 1 < len(out) else x["go_last"] - x["go_first"]
        late = [b["t_start"] - x["go_first"] for b in x["blocks"] if b["t_start"] > x["go_first"]]
        x["late"] = len(late)
        x["late_mean"] = sum(late) / len(late) if late else 0
    return out


def marks(rows, ls):
    """{(shape, tag): (mean min, mean median, mean max, launches)} in ns after each launch's first wait return."""
    by_launch = {x["grid"]: x for x in ls}
    per = collections.defaultdict(lambda: collections.defaultdict(list))  # (shape, tag) -> grid -> times
    for r in rows:
        if int(r["threads"]) == 0 and int(r["grid"]) in by_launch:
            x = by_launch[int(r["grid"])]
            per[(x["shape"], int(r["t_wait"]))][x["grid"]].append(int(r["t_go"]) - x["go_first"])
    out = {}
    for key, grids in per.items():
        stats = []
        for ts in grids.values():
            ts.sort()
            stats.append((ts[0], statistics.median(ts), ts[-1]))
        out[key] = tuple(sum(s[i] for s in stats) / len(stats) for i in range(3)) + (len(stats),)
    return out


def report(rows, limit, out):
    ls = launches(rows)
    if not ls:
        print("no events", file=out)
        return ls
    t0 = ls[0]["go_first"]
    span = ls[-1]["go_last"] - t0
    print(f"launches {len(ls)}, first to last wait return {span / 1e3:.1f} us", file=out)
    print("  # shape        blocks start_first start_last  go_first   go_last    gap  late (mean us)", file=out)
    for i, x in enumerate(ls[:limit]):
        print(f"{i:3d} {x['shape']:12s} {len(x['blocks']):6d} {(x['start_first'] - t0) / 1e3:11.2f} "
              f"{(x['start_last'] - t0) / 1e3:10.2f} {(x['go_first'] - t0) / 1e3:9.2f} {(x['go_last'] - t0) / 1e3:9.2f} "
              f"{x['gap'] / 1e3:6.2f} {x['late']:5d} ({x['late_mean'] / 1e3:.2f})", file=out)
    shapes = collections.defaultdict(list)
    for x in ls:
        shapes[x["shape"]].append(x)
    print("per shape: launches, mean gap us, total gap us, mean late blocks", file=out)
    for shape, xs in sorted(shapes.items(), key=lambda kv: -sum(x["gap"] for x in kv[1])):
        total = sum(x["gap"] for x in xs)
        print(f"  {shape:12s} {len(xs):4d} {total / len(xs) / 1e3:7.2f} {total / 1e3:8.1f} "
              f"{sum(x['late'] for x in xs) / len(xs):6.1f}", file=out)
    ms = marks(rows, ls)
    if ms:
        print("marks: shape, tag, launches, us after the launch's first wait return (min median max over its blocks)",
              file=out)
        for (shape, tag), (lo, med, hi, n) in sorted(ms.items()):
            print(f"  {shape:12s} {tag:4d} {n:4d} {lo / 1e3:7.2f} {med / 1e3:7.2f} {hi / 1e3:7.2f}", file=out)
    return ls


def selftest():
    # Three launches: A (2 blocks) releases at 1000 ns, B (3 blocks, one started after its release)
    # at 4000, C (1 block) at 4500 and its last wait returns at 6000.
    table = """grid,block,nblocks,threads,smid,t_start,t_wait,t_go
7,0,2,256,0,100,200,1000
7,1,2,256,1,150,210,1100
9,0,3,128,2,500,600,4000
9,1,3,128,3,520,610,4100
9,2,3,128,4,4300,4310,4400
11,0,1,512,5,3000,3100,4500
9,0,3,0,2,0,5,4300
9,2,3,0,4,0,5,4900
9,1,3,0,3,0,5,4600
"""
    ls = launches(list(csv.DictReader(io.StringIO(table))))
    got = [(x["shape"], x["gap"], x["late"], x["late_mean"]) for x in ls]
    want = [("2x256", 3000, 0, 0), ("3x128", 500, 1, 300), ("1x512", 0, 0, 0)]
    buf = io.StringIO()
    report(list(csv.DictReader(io.StringIO(table))), 10, buf)
    # Launch 9's tag 5 marks: 300, 600, 900 ns after its first wait return (4000).
    ms = marks(list(csv.DictReader(io.StringIO(table))), ls)
    ok = (got == want and "launches 3, first to last wait return 3.5 us" in buf.getvalue() and
          ms == {("3x128", 5): (300, 600, 900, 1)} and "3x128           5    1    0.30    0.60    0.90" in buf.getvalue())
    print("probe_report selftest:", "ok" if ok else f"FAILED: {got} vs {want}\n{buf.getvalue()}")
    return ok


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--selftest":
        sys.exit(0 if selftest() else 1)
    if len(sys.argv) < 2:
        sys.exit(__doc__ or "usage: probe_report.py step.csv [rows]")
    with open(sys.argv[1]) as f:
        report(list(csv.DictReader(f)), int(sys.argv[2]) if len(sys.argv) > 2 else 40, sys.stdout)
