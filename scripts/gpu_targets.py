#!/usr/bin/env python3
"""gpu-check's last table: issue 11's targets against what one call measured, from the JSON files
the call left in its output folder (`gpu_targets.py OUTDIR [DEVICE]`). Each row puts Loom's median
beside llama.cpp's figure from the same call (when the peer ran), their ratio, the target, whether
it is met, and Loom's peak device memory. The targets are set for an H200; on another card the
table says so in its "met" column rather than judging.

Files read (each optional; a row whose Loom file is missing is left out):
  bench-SHAPE.json                     loom bench -p 512 -n 128: pp512, tg128
  bench-depth-SHAPE.json               loom bench -p 0 -n 128 -d 4096
  bench-parallel-SHAPE.json            loom bench --parallel 8,32,64 (S_TG, S_PP)
  bench-parallel-TAG.json              the same under another schedule (BATCH_AB; its line in
                                       bench-parallel-TAG.schedule), B = 64 rows
  llama-bench-SHAPE.json               llama-bench -p 512 -n 128
  llama-bench-depth.json, llama-batched-bench.jsonl   the peer's depth and batched rows, made
                                       on the shape of the bench-depth / bench-parallel file
"""
import glob
import json
import os
import sys

# Issue 11's targets (t/s on one H200): (shape, test) -> minimum.
TARGETS = {
    ("llama3-8b", "pp512"): 18500,
    ("llama3-8b", "tg128"): 650,
    ("llama3-8b", "tg128@d4096"): 600,
    ("llama3-8b", "S_TG B=64"): 9000,
    ("llama3.2-1b-untied", "tg128"): 2500,
    ("smollm2-135m-untied", "tg128"): 5000,
}
SHAPES = ("smollm2-135m-untied", "llama3.2-1b-untied", "llama3-8b")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def peer_bench(out, shape):
    """llama-bench's pp512 / tg128 of the shape: {test: t/s}."""
    rows = load(os.path.join(out, f"llama-bench-{shape}.json")) or []
    return {(f"pp{r['n_prompt']}" if r.get("n_prompt") else f"tg{r['n_gen']}"): r["avg_ts"] for r in rows}


def peer_depth(out):
    rows = load(os.path.join(out, "llama-bench-depth.json")) or []
    return {f"tg{r['n_gen']}@d{r.get('n_depth', 0)}": r["avg_ts"] for r in rows}


def peer_batched(out):
    """llama-batched-bench's S_TG and S_PP by B."""
    got = {}
    try:
        with open(os.path.join(out, "llama-batched-bench.jsonl")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    got[f"S_TG B={r['pl']}"] = r["speed_tg"]
                    got[f"S_PP B={r['pl']}"] = r["speed_pp"]
    except (OSError, ValueError):
        pass
    return got


def rows_of(out):
    """(shape, test, loom t/s, llama.cpp t/s or None, peak device MiB) for every figure found."""
    rows = []
    for shape in SHAPES:
        b = load(os.path.join(out, f"bench-{shape}.json"))
        peer = peer_bench(out, shape)
        for t in (b or {}).get("tests", []):
            rows.append((shape, t["test"], t["loom_tps"]["median"], peer.get(t["test"]), b.get("peak_device_mib")))
        d = load(os.path.join(out, f"bench-depth-{shape}.json"))
        if d:
            pd = peer_depth(out)
            for t in d.get("tests", []):
                test = f"{t['test']}@d{d.get('depth', 0)}"
                rows.append((shape, test, t["loom_tps"]["median"], pd.get(test), d.get("peak_device_mib")))
        p = load(os.path.join(out, f"bench-parallel-{shape}.json"))
        if p:
            pb = peer_batched(out)
            for t in p.get("tests", []):
                for what, key in (("S_TG", "loom_tps"), ("S_PP", "loom_pp_tps")):
                    test = f"{what} B={t['sequences']}"
                    if key in t:
                        rows.append((shape, test, t[key]["median"], pb.get(test), p.get("peak_device_mib")))
            # The same batched run under other schedules (BATCH_AB): their B = 64 decode row.
            for f in sorted(glob.glob(os.path.join(out, "bench-parallel-*.json"))):
                tag = os.path.basename(f)[len("bench-parallel-"):-len(".json")]
                if tag in SHAPES or tag == "base":
                    continue
                v = load(f)
                try:  # the schedule line, written beside the file by gpu-check
                    with open(f[:-len(".json")] + ".schedule") as s:
                        schedule = s.read().strip()
                except OSError:
                    schedule = tag
                for t in (v or {}).get("tests", []):
                    if t.get("sequences") == 64:
                        rows.append((shape, f"S_TG B=64 with {{ {schedule} }}", t["loom_tps"]["median"],
                                     pb.get("S_TG B=64"), v.get("peak_device_mib")))
    return rows


def target_of(shape, test):
    if test.startswith("S_TG B=64 with "):
        return TARGETS.get((shape, "S_TG B=64"))
    return TARGETS.get((shape, test))


def table(out, device=""):
    h200 = "H200" in device
    lines = ["| shape | test | Loom t/s | llama.cpp t/s | Loom / llama.cpp | target | met | peak device MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for shape, test, loom, peer, peak in rows_of(out):
        target = target_of(shape, test)
        ratio = f"{loom / peer:.2f}x" if peer else "-"
        if target is None:
            met = "-"
        elif not h200:
            met = "(targets are for an H200)"
        else:
            met = "yes" if loom >= target else f"no ({100 * loom / target:.0f}%)"
        lines.append(f"| {shape} | {test} | {loom:,.1f} | {f'{peer:,.1f}' if peer else '-'} | {ratio} | "
                     f"{f'>= {target:,}' if target else '-'} | {met} | {f'{peak:,.0f}' if peak else '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: gpu_targets.py OUTDIR [DEVICE]")
    print(table(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
