# Where a decode step's time goes in the real graph (PDL overlap included): reads an `nsys stats
# --report cuda_gpu_trace --format csv` table of a bench_decode run (or cupti/cupti_trace.cpp's CSV,
# the same columns), cuts it into steps at each embedding kernel, groups the steps by their kernels'
# names (batch 1 and batch 8 steps differ), and prints per
# kernel name, medians over the steps of one group: launches per step, summed duration, and the
# critical-path share: how far each kernel moves the step's end (end minus the latest end before it;
# overlapped time counts for nobody), plus the idle time in which no kernel of the step ran.
# Usage: python3 trace_step.py trace_cuda_gpu_trace.csv [marker=embed_kernel]
import csv, sys, statistics, collections

path = sys.argv[1]
marker = sys.argv[2] if len(sys.argv) > 2 else "embed_kernel"
with open(path, errors="replace") as f:
    lines = [l for l in f if l.strip() and not l.startswith("NOTICE") and not l.startswith("Processing")]
reader = csv.reader(lines)
header = next(reader)
col = lambda prefix: next(i for i, h in enumerate(header) if h.strip('"').startswith(prefix))
i_start, i_dur, i_name = col("Start"), col("Duration"), col("Name")
kernels = []
for r in reader:
    if len(r) <= max(i_start, i_dur, i_name): continue
    name = r[i_name]
    if name.startswith("[CUDA"): continue  # copies and sets
    try:
        start, dur = float(r[i_start]), float(r[i_dur])
    except ValueError:
        continue
    full = name.replace("(anonymous namespace)::", "").split("(")[0].replace("ninfer::kernels::detail::", "")
    full = full.replace("ninfer::kernels::", "").replace("void ", "")
    short = full.split("<")[0]
    kernels.append((start, start + dur, short, full))
kernels.sort()
steps, cur = [], None
for k in kernels:
    if marker in k[2]:
        cur = []
        steps.append(cur)
    if cur is not None:
        cur.append(k)
# Steps group by their kernels' full names (template arguments included: batch 1 and batch 8 steps
# may launch as many kernels, e.g. moe_route_shared_kernel<1> vs <8>).
by_count = collections.defaultdict(list)
for s in steps:
    by_count[(len(s), hash(tuple(k[3] for k in s)))].append(s)
for (count, _), group in sorted(by_count.items(), key=lambda g: g[1][0][0][0]):
    if len(group) < 3: continue  # prefill chunks and one-offs
    spans, idles, per = [], [], collections.defaultdict(lambda: collections.defaultdict(list))
    for s in group:
        frontier, idle = s[0][0], 0.0
        acc = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for start, end, name, _ in s:
            idle += max(0.0, start - frontier)
            a = acc[name]
            a[0] += 1
            a[1] += end - start
            a[2] += max(0.0, end - max(frontier, start))
            frontier = max(frontier, end)
        spans.append(frontier - s[0][0])
        idles.append(idle)
        for name, (n, d, c) in acc.items():
            per[name]["n"].append(n); per[name]["dur"].append(d); per[name]["crit"].append(c)
    span = statistics.median(spans) / 1e3
    print(f"steps of {count} kernels: {len(group)}, median span {span:.1f} us, idle {statistics.median(idles) / 1e3:.1f} us")
    print(f"  {'kernel':44s} {'n/step':>7s} {'sum us':>9s} {'critical us':>12s} {'share':>6s}")
    rows = [(name, statistics.median(v["n"]), statistics.median(v["dur"]) / 1e3, statistics.median(v["crit"]) / 1e3)
            for name, v in per.items()]
    for name, n, d, c in sorted(rows, key=lambda r: -r[3]):
        print(f"  {name[:44]:44s} {n:7.0f} {d:9.1f} {c:12.1f} {100 * c / span:5.1f}%")
