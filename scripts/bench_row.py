#!/usr/bin/env python3
"""One line of gpu-check's table from a `loom bench --json` file: each test's median t/s, its
energy where read, and for decode rows with --ceiling what the run achieved of the memory's
rate (the device's copy rate on cuda) (bytes a token x t/s); then peak RSS and device memory."""
import json
import sys

j = json.load(open(sys.argv[1]))
ceil = {c["test"]: c for c in (j.get("ceiling") or {}).get("tg", [])}
depth = f"@d{j['depth']}" if j.get("depth") else ""
parts = []
for t in j["tests"]:
    s = f"{t['test']}{depth} {t['loom_tps']['median']:.1f} t/s"
    e = t.get("energy")
    if isinstance(e, dict):
        s += f" ({e['joules_per_token']:.3f} J/tok, {e['mean_power_w']:.0f} W)"
    c = ceil.get(t["test"])
    if c:
        what = "copy" if j["ceiling"].get("bandwidth", "").startswith("device copy") else "read"
        s += (f" [{c['loom_achieved_gbs']:.0f} GB/s, {100 * c['loom_of_ceiling']:.0f}% of the"
              f" {j['ceiling']['read_bandwidth_gbs']:.0f} GB/s {what}]")
    parts.append(s)
print(" ".join(parts), f"peak RSS {j['peak_rss_mib']:.0f} MiB, peak device {j.get('peak_device_mib', 0):.0f} MiB")
