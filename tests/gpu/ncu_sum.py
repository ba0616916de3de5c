# Sums an `ncu --csv --metrics gpu__time_duration.sum` log per kernel (tests/gpu/run.sh NINFER_GPU_NCU=1): count, total us, share.
import csv, sys, collections
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
tot = collections.OrderedDict()
n_all = 0; t_all = 0.0
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    name = r["Kernel Name"].split("(")[0]
    name = name.replace("ninfer::kernels::detail::", "")
    key = name[:60] + " " + r.get("Grid Size", "")
    v = float(r["Metric Value"].replace(",", "")) / 1e3  # ns -> us
    c = tot.setdefault(key, [0, 0.0]); c[0] += 1; c[1] += v
    n_all += 1; t_all += v
print(f"kernels {n_all}, sum of isolated durations {t_all:.1f} us")
agg = collections.defaultdict(lambda: [0, 0.0])
for k, (n, t) in tot.items():
    agg[k.split(" ")[0].split("<")[0]][0] += n; agg[k.split(" ")[0].split("<")[0]][1] += t
for k, (n, t) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"  {k:40s} n={n:5d} {t:9.1f} us {100*t/t_all:5.1f}%")
print("per launch shape (top 25):")
for k, (n, t) in sorted(tot.items(), key=lambda x: -x[1][1])[:25]:
    print(f"  {k:75s} n={n:4d} {t:8.1f} us  {t/n:7.2f} us each")
