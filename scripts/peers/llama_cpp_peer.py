#!/usr/bin/env python3
"""llama.cpp as a benchmark peer for `loom bench --vs llama.cpp`.

Loads one GGUF through llama-cpp-python's low-level API (the same calls llama-bench makes:
llama_decode on a batch of random tokens for pp, one token per llama_decode for tg, memory
cleared before each repetition) and answers JSON-line requests on stdin, one per line:

  {"op": "pp", "n": 512, "depth": 0}   -> {"seconds": 0.93}
  {"op": "tg", "n": 128, "depth": 0}   -> {"seconds": 1.6, "token_seconds": [...]}
  {"op": "batched", "n": 8, "pp": 128, "tg": 128}
                                       -> {"pp_seconds": 2.1, "tg_seconds": 5.3}
     (llama-batched-bench -npp 128 -ntg 128 -npl 8: the n prompts in one batch, n sequences
      of their own KV stream, then tg steps of one token per sequence)
  {"op": "info"}                       -> {"system": "...", "version": "..."}
  {"op": "quit"}

so the caller can interleave its own repetitions with these (A/B pairs in one process run).
"""
import argparse
import ctypes
import json
import random
import sys
import time

import llama_cpp as L


class Peer:
    def __init__(self, model_path, threads, n_ctx, n_batch, n_ubatch, flash_attn):
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        self.model = L.llama_model_load_from_file(model_path.encode(), mp)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {model_path}")
        self.threads, self.n_ubatch, self.flash_attn = threads, n_ubatch, flash_attn
        self.ctx = self._context(n_ctx, n_batch, 1)
        self.batched_ctx = {}  # (n_seq, n_ctx) -> context with n_seq KV streams
        self.n_batch = n_batch
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.rng = random.Random(1234)

    def _context(self, n_ctx, n_batch, n_seq):
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = n_ctx, n_batch, min(self.n_ubatch, n_batch)
        cp.n_seq_max = n_seq
        if hasattr(cp, "kv_unified"):
            cp.kv_unified = False  # llama-batched-bench's default: one KV stream per sequence
        cp.n_threads = cp.n_threads_batch = self.threads
        if hasattr(cp, "flash_attn_type") and self.flash_attn is not None:
            cp.flash_attn_type = 1 if self.flash_attn else 0
        ctx = L.llama_init_from_model(self.model, cp)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context of {n_ctx} for {n_seq} sequences")
        return ctx

    def _clear(self):
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)

    def _decode_rows(self, ctx, rows):
        """rows: (token, pos, seq, logits) in n_batch chunks, as llama-batched-bench's decode_helper."""
        for i in range(0, len(rows), self.n_batch):
            chunk = rows[i:i + self.n_batch]
            b = L.llama_batch_init(len(chunk), 0, 1)
            for j, (t, p, s, lg) in enumerate(chunk):
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = t, p, 1, lg
                b.seq_id[j][0] = s
            b.n_tokens = len(chunk)
            rc = L.llama_decode(ctx, b)
            L.llama_batch_free(b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        L.llama_synchronize(ctx)

    def batched(self, n, pp, tg):
        per_seq = (pp + tg + 255) // 256 * 256
        key = (n, per_seq)
        if key not in self.batched_ctx:
            self.batched_ctx[key] = self._context(n * per_seq, self.n_batch, n)
        ctx = self.batched_ctx[key]
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        prompt = [(t, p, s, 1 if p == pp - 1 else 0)
                  for s in range(n) for p, t in enumerate(self._random_tokens(pp))]
        t0 = time.perf_counter()
        self._decode_rows(ctx, prompt)
        t1 = time.perf_counter()
        for i in range(tg):
            self._decode_rows(ctx, [(self.rng.randrange(self.n_vocab), pp + i, s, 1) for s in range(n)])
        t2 = time.perf_counter()
        return {"pp_seconds": t1 - t0, "tg_seconds": t2 - t1}

    def _decode(self, tokens, pos0):
        """Decodes tokens at positions pos0.. in n_batch chunks; logits only for the last."""
        i = 0
        while i < len(tokens):
            chunk = tokens[i:i + self.n_batch]
            b = L.llama_batch_init(len(chunk), 0, 1)
            for j, t in enumerate(chunk):
                b.token[j] = t
                b.pos[j] = pos0 + i + j
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = 0
                b.logits[j] = 1 if (i + j == len(tokens) - 1) else 0
            b.n_tokens = len(chunk)
            rc = L.llama_decode(self.ctx, b)
            L.llama_batch_free(b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            i += len(chunk)
        L.llama_synchronize(self.ctx)

    def _random_tokens(self, n):
        return [self.rng.randrange(self.n_vocab) for _ in range(n)]

    def pp(self, n, depth=0):
        self._clear()
        if depth:
            self._decode(self._random_tokens(depth), 0)
        toks = self._random_tokens(n)
        t0 = time.perf_counter()
        self._decode(toks, depth)
        return {"seconds": time.perf_counter() - t0}

    def tg(self, n, depth=0):
        self._clear()
        if depth:
            self._decode(self._random_tokens(depth), 0)
        tok = self.rng.randrange(self.n_vocab)
        times = []
        t0 = time.perf_counter()
        for i in range(n):
            t = time.perf_counter()
            self._decode([tok], depth + i)
            times.append(time.perf_counter() - t)
        return {"seconds": time.perf_counter() - t0, "token_seconds": times}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--flash-attn", type=int, default=None)
    a = ap.parse_args()
    peer = Peer(a.model, a.threads, a.ctx, a.batch, a.ubatch, a.flash_attn)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "pp":
                out = peer.pp(int(req["n"]), int(req.get("depth", 0)))
            elif op == "tg":
                out = peer.tg(int(req["n"]), int(req.get("depth", 0)))
            elif op == "batched":
                out = peer.batched(int(req["n"]), int(req["pp"]), int(req["tg"]))
            elif op == "info":
                out = {"system": L.llama_print_system_info().decode(), "version": L.__version__}
            elif op == "quit":
                break
            else:
                out = {"error": f"unknown op {op!r}"}
        except Exception as e:  # report, keep serving: the caller decides
            out = {"error": str(e)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
