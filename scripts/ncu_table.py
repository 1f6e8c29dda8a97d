#!/usr/bin/env python3
# Nsight Compute's CSV (gpu-check --ncu) as one row per kernel and grid: launches, time, DRAM
# read rate, occupancy. ncu serialises kernels, so the total is the work without overlap.
import collections, csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
h = rows[0]
name, unit, val, metric, ident, grid = (h.index(c) for c in ("Kernel Name", "Metric Unit", "Metric Value", "Metric Name", "ID", "Grid Size"))
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "byte": 1.0,
         "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9, "%": 1.0}
per = collections.defaultdict(dict)
for r in rows[1:]:
    k = re.sub(r"\(.*", "", r[name].replace("(anonymous namespace)::", "")).split("::")[-1] + " grid " + r[grid]
    per[(r[ident], k)][r[metric]] = float(r[val].replace(",", "")) * scale.get(r[unit], 1.0)
t = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for (i, k), m in per.items():
    a = t[k]; a[0] += 1; a[1] += m.get("gpu__time_duration.sum", 0); a[2] += m.get("dram__bytes_read.sum", 0)
    a[3] += m.get("sm__warps_active.avg.pct_of_peak_sustained_active", 0)
print("| kernel, grid | launches | total us | mean us | DRAM read GB/s | mean occupancy % |\n|---|---|---|---|---|---|")
for k, a in sorted(t.items(), key=lambda kv: -kv[1][1]):
    print(f"| {k[:60]} | {a[0]} | {a[1]:.1f} | {a[1] / a[0]:.2f} | {a[2] / (a[1] * 1e-6) / 1e9 if a[1] else 0:.0f} | {a[3] / a[0]:.0f} |")
n = sum(a[0] for a in t.values())
print(f"\n{n} kernels, {sum(a[1] for a in t.values()):.1f} us in all")
