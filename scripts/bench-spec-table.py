#!/usr/bin/env python3
"""The table of scripts/bench-spec from the files it leaves in OUT: per model and prompt, Loom's
arms (from `loom bench --spec --json`) and llama.cpp's (llama-bench's tg at the prompt's depth
as its plain decode; llama-lookup's and llama-speculative's own "decoded ... speed" and
acceptance lines, median over the repetitions). Ratios are to each system's own plain decode.
Then Loom's verify step cost per run: a step of R rows (all with logits) against a 1-row step."""
import glob
import json
import os
import re
import statistics
import sys

GROUNDED = {"summarise", "edit", "code"}


def parse_llama_log(path):
    text = open(path, errors="replace").read()
    speed = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", text)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", text)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", text)
    if not speed:
        return None
    return {"tps": float(speed.group(3)), "drafted": int(drafted.group(1)) if drafted else 0,
            "accepted": int(accepted.group(1)) if accepted else 0}


def main(out):
    rows = []
    for lj in sorted(glob.glob(os.path.join(out, "*.loom.json"))):
        base = lj[: -len(".loom.json")]
        label, prompt = os.path.basename(base).split("-", 1)
        kind = "grounded" if prompt in GROUNDED else "open chat"
        d = json.load(open(lj))
        plain = d["arms"][0]["decode_tps"]
        for a in d["arms"]:
            r = a.get("ratio")
            ratio = f"{r['median']:.2f}x [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r else "1"
            acc = f"{100 * a['acceptance']:.0f}%" if "acceptance" in a else "-"
            length = f"{a['mean_accepted_length']:.2f}" if "mean_accepted_length" in a else "1"
            method = "loom " + ("plain" if a["drafter"] == "plain" else a["drafter"].split("/")[-1])
            rows.append([label, prompt, kind, method, f"{a['decode_tps']:.1f}", ratio, acc, length,
                         "yes" if a["identical"] else "NO"])
        llama_plain = None
        lb = base + ".llama-bench.json"
        if os.path.exists(lb):
            try:
                recs = json.load(open(lb))
                llama_plain = statistics.median(r["avg_ts"] for r in recs if r.get("n_gen", 0) > 0)
                rows.append([label, prompt, kind, "llama.cpp plain (llama-bench tg)", f"{llama_plain:.1f}", "1", "-", "1",
                             "-"])
            except (ValueError, KeyError, statistics.StatisticsError):
                pass
        for tool in ("llama-lookup", "llama-speculative"):
            runs = [p for p in (parse_llama_log(f) for f in sorted(glob.glob(f"{base}.{tool}.*.log"))) if p]
            if not runs:
                continue
            tps = statistics.median(r["tps"] for r in runs)
            drafted, accepted = sum(r["drafted"] for r in runs), sum(r["accepted"] for r in runs)
            ratio = f"{tps / llama_plain:.2f}x" if llama_plain else "-"
            acc = f"{100 * accepted / drafted:.0f}%" if drafted else "-"
            rows.append([label, prompt, kind, f"llama.cpp {tool}", f"{tps:.1f}", ratio, acc, "-", "-"])
    head = ["model", "prompt", "kind", "method", "decode t/s", "vs own plain", "accepted", "tokens/step", "identical"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    # The price of a drafted token: Loom's verify step of R rows against a 1-row step, per run.
    steps = []
    for lj in sorted(glob.glob(os.path.join(out, "*.loom.json"))):
        vs = json.load(open(lj)).get("verify_step")
        if vs:
            steps.append((os.path.basename(lj)[: -len(".loom.json")], vs))
    if steps:
        print()
        head = ["run"] + [f"{v['rows']} rows" for v in steps[0][1]]
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for name, vs in steps:
            print("| " + " | ".join([name] + [f"{v['vs_one_row']:.2f}x" for v in vs]) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/bench-spec")
