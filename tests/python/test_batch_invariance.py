"""Batch invariance of the fast CPU backend on the real models: `loom logits` gives the same
bits for every position whether the prompt runs one token per step (-b 1: decode GEMV tiles),
in steps of 9 (prefill GEMM tiles, with a last step of 2 on the GEMV side) or in one step
(-b 0). The synthetic programs of tests/backend_fast/batch_invariance_test.cpp check the
same on every weight type; this checks the real tensor mixes (Gemma-3's Q4_K_M keeps
attn_q/k and ffn_gate/up in Q5_0, which prefill reads from a Q8_0 copy; SmolLM2 is Q4_1 /
Q8_0) with the real shapes (n_embd 640 = 20 blocks, 576 = 18)."""
import pathlib
import subprocess

import numpy as np
import pytest

TOKENS = [(i * 37 + 11) % 5000 + 100 for i in range(20)]


def logits(loom_bin, model, tokens_file, out, batch):
    subprocess.run([str(loom_bin), "logits", "-m", str(model), "--tokens", str(tokens_file), "-b", str(batch),
                    "-t", "2", "--out", str(out)], check=True, capture_output=True, timeout=300)
    return np.fromfile(out, dtype=np.float32).reshape(len(TOKENS), -1)


@pytest.mark.parametrize("which", ["gemma3", "smollm2"])
def test_logits_same_bits_for_every_step_size(request, which, loom_bin, tmp_path):
    model = request.getfixturevalue(which)
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text(" ".join(map(str, TOKENS)))
    alone = logits(loom_bin, model, tokens_file, tmp_path / "b1.f32", 1)
    for batch in (9, 0):
        got = logits(loom_bin, model, tokens_file, tmp_path / f"b{batch}.f32", batch)
        diff = np.argwhere(alone.view(np.uint32) != got.view(np.uint32))
        assert diff.size == 0, (f"{pathlib.Path(model).name}: -b {batch} differs from -b 1 at {len(diff)} logits, "
                                f"first at position {diff[0][0]} logit {diff[0][1]}: {alone[tuple(diff[0])]!r} vs "
                                f"{got[tuple(diff[0])]!r} (max |d| {np.abs(alone - got).max():g})")
