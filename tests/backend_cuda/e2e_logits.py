#!/usr/bin/env python3
"""End-to-end logits of the CUDA backend against the CPU reference backend on one model file.

Teacher-forced: the same token ids through `loom logits --backend cpu-ref` and `--backend cuda`,
once as one prefill batch, once in steps of 5 rows (-b 5: multi-row graph replays; the tiled f16
kernel for the 8B's down and the output heads of 1,002 tiles, tiled_split.h), once in
steps of 32 (-b 32: graph replays whose attention is the tensor-core prompt kernel writing
q8_1 codes, and whose matmuls are on tensor cores: the int8 kernels for q/k/v and o, the tiled f16
kernel for gate/up, down and the output (mma_tiles, tiled_split.h); again in steps of 64, and in
steps of 64 with mma_tiles = false, every matmul on the int8 kernels), once one
decode step per token (-b 1: the decode fusion and programmatic launch, on by default), and once
more per token with both off (the ported program with those schedule keys set to false), so the
op-by-op path a program can still choose stays checked; the prefill again with the f32 attention
kernel (attention_mma = false); the prefill again with f16 weight copies
made at compile (gemm_f16_weights), which must give the same bits; last, not gated, the fast CPU backend
against the same reference as a control (what the CPU path reaches on the same file), and the
reference with an f32 KV cache (how far the file's logits move under rounding alone). Gates (issue 11's contract
for the GPU path): mean KL(ref || cuda) <= 0.01 over all positions, and every logit finite.
Prints one JSON line per run and exits non-zero when a gate fails.

  e2e_logits.py LOOM_BIN MODEL.gguf [--tokens N] [--seed S]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

# The oracle tests' KL, one definition: beside this script where gpu-check staged both, else in
# the tree's tests/python.
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from logit_stats import kl_rows  # noqa: E402


def logits(loom, model, tokens_file, backend, batch, out, program=None, kv_type=None, sequences=1):
    cmd = [loom, "logits", "-m", program or model, "--tokens", tokens_file, "--backend", backend, "--out", out]
    if sequences > 1:
        cmd += ["--sequences", str(sequences)]
    if kv_type:
        cmd += ["--kv-type", kv_type]
    if program:
        cmd += ["--gguf", model]
    if batch:
        cmd += ["-b", str(batch)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:  # loom's own message (an op the backend lacks, a device error) names the cause
        raise RuntimeError(f"{backend}: " + (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1])
    for line in r.stderr.splitlines():  # a schedule key the plan could not honour ran another path
        if line.startswith("warning: the schedule asks for"):
            raise RuntimeError(f"{backend}: {line}")
    return np.fromfile(out, dtype=np.float32)


def compare(ref, got, n_tokens):
    ref = ref.reshape(n_tokens, -1).astype(np.float64)
    got = got.reshape(n_tokens, -1).astype(np.float64)
    finite = bool(np.isfinite(got).all())
    kl = kl_rows(ref, got)
    return {
        "finite": finite,
        "mean_kl": float(kl.mean()),
        "max_kl": float(kl.max()),
        "top1": float((ref.argmax(1) == got.argmax(1)).mean()),
        "max_abs_dlogit": float(np.abs(ref - got).max()),
        "ref_logit_std": float(ref.std()),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loom")
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=49152)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    ids = rng.integers(0, a.vocab, size=a.tokens)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        tf = f"{d}/tokens.txt"
        with open(tf, "w") as f:
            f.write(" ".join(map(str, ids)))
        try:
            ref = logits(a.loom, a.model, tf, "cpu-ref", 0, f"{d}/ref.f32")
        except RuntimeError as e:
            print(json.dumps({"model": a.model, "mode": "reference", "error": str(e), "pass": False}))
            sys.exit(1)
        def program(name, schedule):  # the ported program with one schedule line appended
            path = f"{d}/{name}.loom"
            subprocess.run([a.loom, "port", a.model, "-o", path], check=True, stdout=subprocess.DEVNULL)
            with open(path, "a") as f:
                f.write(f"  schedule {{ {schedule} }}\n")
            return path

        unfused = program("unfused", "decode_fusion = false, programmatic_launch = false")
        f32_attention = program("f32attn", "attention_mma = false")
        merged = program("merged", "decode_merge_in_kernel = true")
        staged = program("staged", "attention_mma_shared = true")
        persistent = program("persistent", "decode_persistent = true")
        untiled = program("untiled", "mma_tiles = false")
        prefill = decode = None
        runs = ((0, None, "prefill"), (5, None, "steps of 5"), (32, None, "steps of 32"), (1, None, "decode"),
                (1, unfused, "decode unfused"), (1, merged, "decode, decode_merge_in_kernel = true"),
                (0, f32_attention, "prefill, attention_mma = false"), (0, staged, "prefill, attention_mma_shared = true"),
                (32, staged, "steps of 32, attention_mma_shared = true"),
                (64, None, "steps of 64"), (64, untiled, "steps of 64, mma_tiles = false"))
        for batch, program_file, mode in runs:
            try:
                got = logits(a.loom, a.model, tf, "cuda", batch, f"{d}/cuda.f32", program_file)
            except RuntimeError as e:
                print(json.dumps({"model": a.model, "mode": mode, "error": str(e), "pass": False}))
                ok = False
                continue
            if batch == 0 and program_file is None:
                prefill = got
            if batch == 1 and program_file is None:
                decode = got
            r = compare(ref, got, a.tokens)
            r.update(model=a.model, mode=mode, tokens=a.tokens)
            r["pass"] = r["finite"] and r["mean_kl"] <= 0.01
            ok &= r["pass"]
            print(json.dumps(r))
        # The persistent decode step (decode_persistent) computes what the launched kernels do, in
        # their order: the decode's logits, bit for bit (and within the gate, like every mode).
        mode = "decode, decode_persistent = true: the decode's bits"
        try:
            got = logits(a.loom, a.model, tf, "cuda", 1, f"{d}/persistent.f32", persistent)
            r = compare(ref, got, a.tokens)
            same = decode is not None and bool(np.array_equal(got, decode))
            r.update(model=a.model, mode=mode, tokens=a.tokens, same_bits=same,
                     max_abs_vs_decode=float(np.max(np.abs(got - decode))) if decode is not None else None)
            r["pass"] = same and r["finite"] and r["mean_kl"] <= 0.01
        except RuntimeError as e:
            r = {"model": a.model, "mode": mode, "error": str(e), "pass": False}
        ok &= r["pass"]
        print(json.dumps(r))
        # Rows of three sequences sharing steps as a server's do (each step a decode row of the
        # first beside chunks of up to 19 rows of the other two: the attention's tiles of runs of
        # one sequence, a step of 39 rows launched plainly and one of 27 from a graph), against the
        # reference run the same way (each part a fresh sequence; the reference's parts give the
        # bits they give alone).
        mode = "3 sequences side by side, steps of 40"
        try:
            ref3 = logits(a.loom, a.model, tf, "cpu-ref", 40, f"{d}/ref3.f32", sequences=3)
            r = compare(ref3, logits(a.loom, a.model, tf, "cuda", 40, f"{d}/cuda3.f32", sequences=3), a.tokens)
            r.update(model=a.model, mode=mode, tokens=a.tokens)
            r["pass"] = r["finite"] and r["mean_kl"] <= 0.01
            print(json.dumps(r))
        except RuntimeError as e:
            r = {"model": a.model, "mode": mode, "error": str(e), "pass": False}
            print(json.dumps(r))
        ok &= r["pass"]
        # f16 copies of the weights made at compile (schedule key gemm_f16_weights) feed the
        # prefill GEMM the values its per-step dequantization makes: the same logits, bit for bit.
        f16w = program("f16w", "gemm_f16_weights = true")
        mode = "prefill, gemm_f16_weights = true: the prefill's bits"
        try:
            got = logits(a.loom, a.model, tf, "cuda", 0, f"{d}/f16w.f32", f16w)
            same = prefill is not None and bool(np.array_equal(got, prefill))
            dmax = float(np.abs(got.astype(np.float64) - prefill).max()) if prefill is not None else None
            print(json.dumps({"model": a.model, "mode": mode, "tokens": a.tokens, "max_abs_dlogit": dmax, "pass": same}))
        except RuntimeError as e:
            same = False
            print(json.dumps({"model": a.model, "mode": mode, "error": str(e), "pass": False}))
        ok &= same
        # The control: the fast CPU backend (q8 activations too) against the same reference on the
        # same tokens — what the CPU path reaches on this file, printed beside the gated rows.
        # The file's own sensitivity: the reference again with only its KV cache in f32 rather
        # than f16 (a change toward exact arithmetic). A random-weight file whose logits move
        # this much under that change cannot tell a backend's rounding from a defect at the
        # gate's level; printed beside the gated rows, not gated.
        controls = (("control: cpu fast backend (not gated)", "cpu", None),
                    ("sensitivity: cpu-ref with an f32 KV cache (not gated)", "cpu-ref", "f32"))
        for mode, backend, kv in controls:
            try:
                r = compare(ref, logits(a.loom, a.model, tf, backend, 0, f"{d}/control.f32", kv_type=kv), a.tokens)
                r.update(model=a.model, mode=mode, tokens=a.tokens)
                print(json.dumps(r))
            except RuntimeError as e:  # a control: its failure is reported, not gated
                print(json.dumps({"mode": mode, "error": str(e)}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
