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


@pytest.mark.parametrize("backend", ["cpu", "cpu-ref"])
def test_sequences_side_by_side_give_the_bits_of_each_alone(backend, smollm2, loom_bin, tmp_path):
    """`loom logits --sequences 3`: the tokens cut into three fresh sequences whose rows share
    steps (a decode row of the first beside chunks of the others, as a server's steps mix them);
    each part's logits are those of the part run alone, bit for bit: the engine gives every row
    its own sequence's positions and KV blocks. The fast backend is batch-invariant by design; the
    reference is not in general (a prompt's rows in one-row steps and in one step can differ,
    presumably as in the llama.cpp CPU kernels it reproduces), but gives the same bits for these
    steps. The CUDA
    end-to-end check compares against the reference run with the same steps."""
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text(" ".join(map(str, TOKENS)))
    out = tmp_path / "side.f32"
    subprocess.run([str(loom_bin), "logits", "-m", str(smollm2), "--tokens", str(tokens_file), "--sequences", "3",
                    "-b", "9", "--backend", backend, "-t", "2", "--out", str(out)], check=True, capture_output=True,
                   timeout=300)
    side = np.fromfile(out, dtype=np.float32).reshape(len(TOKENS), -1)
    bounds = [len(TOKENS) * k // 3 for k in range(4)]  # the parts: [0, 6), [6, 13), [13, 20)
    for k in range(3):
        part = TOKENS[bounds[k]:bounds[k + 1]]
        part_file = tmp_path / f"part{k}.txt"
        part_file.write_text(" ".join(map(str, part)))
        alone_out = tmp_path / f"part{k}.f32"
        subprocess.run([str(loom_bin), "logits", "-m", str(smollm2), "--tokens", str(part_file), "--backend", backend,
                        "-t", "2", "--out", str(alone_out)], check=True, capture_output=True, timeout=300)
        alone = np.fromfile(alone_out, dtype=np.float32).reshape(len(part), -1)
        got = side[bounds[k]:bounds[k + 1]]
        diff = np.argwhere(alone.view(np.uint32) != got.view(np.uint32))
        assert diff.size == 0, (f"{backend}, part {k}: differs from the part alone at {len(diff)} logits, first at "
                                f"row {diff[0][0]} (max |d| {np.abs(alone - got).max():g})")


def test_sequences_refused_when_fewer_tokens_than_parts(smollm2, loom_bin, tmp_path):
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text("1 2")
    r = subprocess.run([str(loom_bin), "logits", "-m", str(smollm2), "--tokens", str(tokens_file), "--sequences", "3",
                        "--out", str(tmp_path / "x.f32")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "3 sequences side by side need at least as many tokens, not 2" in r.stderr, r.stderr
