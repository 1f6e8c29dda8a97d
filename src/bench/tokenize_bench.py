#!/usr/bin/env python3
"""Tokenizer throughput, Loom vs llama.cpp, on >= 1 MB of English text.

Text: the Debian licence texts (/usr/share/common-licenses, regular files in name order)
concatenated and repeated until at least 1 MB (the text is generated, not stored). Loom's figure
comes from `loom tokenize --bench` (times encode() only, fresh tokenizer per repetition so the
BPE word cache starts cold); llama.cpp's from llama-cpp-python `Llama(vocab_only=True).tokenize`
in this process, timing only the tokenize call. Both must produce identical ids.

Usage: tokenize_bench.py LOOM_BIN MODEL.gguf [MODEL.gguf ...] [--repeat N] [--parse-special]
"""
import argparse
import json
import pathlib
import subprocess
import tempfile
import time

LICENSES = pathlib.Path("/usr/share/common-licenses")
MIN_BYTES = 1_000_000


def bench_text():
    files = sorted(p for p in LICENSES.iterdir() if p.is_file() and not p.is_symlink())
    unit = b"".join(p.read_bytes() for p in files)
    if not unit:
        raise SystemExit(f"no licence texts under {LICENSES}")
    reps = -(-MIN_BYTES // len(unit))
    return unit * reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loom")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parse-special", action="store_true")
    a = ap.parse_args()
    import llama_cpp

    text = bench_text()
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    mb = len(text) / 1e6
    for model in a.models:
        cmd = [a.loom, "tokenize", "-m", model, "--bench", path, "--repeat", str(a.repeat)]
        if a.parse_special:
            cmd.append("--parse-special")
        loom = json.loads(subprocess.run(cmd, capture_output=True, check=True, text=True).stdout)
        llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
        times, ids = [], None
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            ids = llm.tokenize(text, add_bos=True, special=a.parse_special)
            times.append(time.perf_counter() - t0)
        ids_loom = subprocess.run([a.loom, "tokenize", "-m", model, "--file", path, "--ids"]
                                  + (["--parse-special"] if a.parse_special else []),
                                  capture_output=True, check=True, text=True).stdout.split()
        same = [int(x) for x in ids_loom] == ids
        res = {
            "model": pathlib.Path(model).name, "bytes": len(text), "tokens": len(ids), "repeat": a.repeat,
            "loom_mb_s_best": round(loom["mb_per_s_best"], 2), "loom_mb_s_mean": round(loom["mb_per_s_mean"], 2),
            "llama_cpp_mb_s_best": round(mb / min(times), 2), "llama_cpp_mb_s_mean": round(mb / (sum(times) / len(times)), 2),
            "ids_identical": same,
        }
        res["speedup_best"] = round(res["loom_mb_s_best"] / res["llama_cpp_mb_s_best"], 2)
        print(json.dumps(res))
    pathlib.Path(path).unlink()


if __name__ == "__main__":
    main()
