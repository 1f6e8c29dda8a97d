"""`loom synth` files load and run in llama.cpp (through llama-cpp-python), with the tensor
layout llama.cpp expects for each architecture, deterministically from the seed."""
import hashlib

import numpy as np
import pytest
import gguf

from conftest import require_module, run_loom

llama_cpp = require_module("llama_cpp")

TINY = ["tiny-llama", "tiny-llama-untied", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-phi3"]


def synth(loom_bin, tmp_path, shape, *extra):
    out = tmp_path / f"{shape}.gguf"
    run_loom(loom_bin, "synth", shape, out, *extra)
    return out


def eval_logits(path, text=b"The quick brown fox jumps over the lazy dog."):
    m = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False)
    toks = m.tokenize(text, add_bos=False)
    m.eval(toks)
    logits = np.array(m.scores[: m.n_tokens])
    n_vocab = m.n_vocab()
    m.close()
    return toks, logits, n_vocab


def check_runs(path, n_vocab):
    toks, logits, nv = eval_logits(path)
    assert nv == n_vocab
    # The merges learned from English text: far fewer tokens than bytes.
    assert 0 < len(toks) < 30
    assert logits.shape == (len(toks), n_vocab)
    assert np.isfinite(logits).all()
    # Random weights still give position-dependent, non-constant logits.
    assert float(logits.std(axis=1).min()) > 1e-3
    assert not np.allclose(logits[0], logits[-1])


@pytest.mark.parametrize("shape", TINY)
def test_tiny_shapes_run_in_llama_cpp(loom_bin, tmp_path, shape):
    check_runs(synth(loom_bin, tmp_path, shape, "--seed", "1"), 512)


@pytest.mark.parametrize("typ", ["f32", "bf16", "q8_0"])
def test_weight_types_run_in_llama_cpp(loom_bin, tmp_path, typ):
    p = synth(loom_bin, tmp_path, "tiny-llama", "--type", typ)
    r = gguf.GGUFReader(str(p))
    assert r.tensors[0].tensor_type.name.lower() == typ
    assert {t.tensor_type.name for t in r.tensors if t.name.endswith("norm.weight")} == {"F32"}
    check_runs(p, 512)


def test_q8_0_matches_f32_through_gguf_py_dequantize(loom_bin, tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = gguf.GGUFReader(str(synth(loom_bin, tmp_path / "a", "tiny-llama", "--type", "f32")))
    b = gguf.GGUFReader(str(synth(loom_bin, tmp_path / "b", "tiny-llama", "--type", "q8_0")))
    ta, tb = a.tensors[2], b.tensors[2]  # blk.0.attn_q.weight
    assert ta.name == tb.name == "blk.0.attn_q.weight"
    x = np.asarray(ta.data, dtype=np.float32).reshape(-1)
    y = gguf.dequantize(tb.data, tb.tensor_type).reshape(-1)
    # Q8_0: error at most half a step of the block scale amax/127.
    assert float(np.abs(x - y).max()) <= float(np.abs(x).max()) / 127 * 0.5 + 1e-6


def test_same_seed_same_file_other_seed_other_weights(loom_bin, tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    a = synth(loom_bin, tmp_path / "a", "tiny-qwen3", "--seed", "7")
    b = synth(loom_bin, tmp_path / "b", "tiny-qwen3", "--seed", "7")
    c = synth(loom_bin, tmp_path / "c", "tiny-qwen3", "--seed", "8")
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    assert a.read_bytes() != c.read_bytes()


def test_overrides_and_bad_arguments(loom_bin, tmp_path):
    p = synth(loom_bin, tmp_path, "tiny-gemma3", "--vocab", "1000", "--layers", "3")
    r = gguf.GGUFReader(str(p))
    assert r.fields["gemma3.block_count"].contents() == 3
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    assert len(toks) == 1000 and toks[-1].startswith("<|reserved_")
    assert len(set(toks)) == len(toks)
    check_runs(p, 1000)
    for args, msg in [(["nope-1b", tmp_path / "x.gguf"], "unknown shape"),
                      (["tiny-llama", tmp_path / "x.gguf", "--type", "q2_K"], "not supported"),
                      (["tiny-llama", tmp_path / "x.gguf", "--type", "Q2_K_S"], "unknown --type"),
                      (["tiny-llama", tmp_path / "x.gguf", "--type", "q4_K"], "not a multiple"),
                      (["tiny-llama", tmp_path / "x.gguf", "--vocab", "100"], "too small")]:
        res = run_loom(loom_bin, "synth", *args, check=False)
        assert res.returncode == 1 and msg in res.stderr, res.stderr
    res = run_loom(loom_bin, "synth", "tiny-llama", tmp_path / "x.gguf", "--gain", "-1", check=False)
    assert res.returncode != 0 and "--gain" in res.stderr and "not in range" in res.stderr, res.stderr


def layout(path):
    r = gguf.GGUFReader(str(path))
    return r, {t.name: [int(d) for d in t.shape] for t in r.tensors}


def test_smollm2_135m_shape_matches_the_real_model(loom_bin, tmp_path, smollm2):
    p = synth(loom_bin, tmp_path, "smollm2-135m")
    r, synth_shapes = layout(p)
    _, real_shapes = layout(smollm2)
    assert synth_shapes == real_shapes  # same names, same dims: the real model's exact layout
    for key in ["llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
                "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.freq_base"]:
        assert r.fields[key].contents() == gguf.GGUFReader(str(smollm2)).fields[key].contents(), key
    check_runs(p, 49152)


def test_qwen3_0_6b_runs(loom_bin, tmp_path):
    p = synth(loom_bin, tmp_path, "qwen3-0.6b", "--type", "q8_0")
    r, shapes = layout(p)
    assert shapes["blk.0.attn_q.weight"] == [1024, 2048]
    assert shapes["blk.0.attn_k.weight"] == [1024, 1024]
    assert shapes["blk.27.attn_q_norm.weight"] == [128]
    assert "output.weight" not in shapes
    assert r.fields["qwen3.attention.key_length"].contents() == 128
    check_runs(p, 151936)


def test_q4_k_m_written_directly_like_quantize_writes_it(loom_bin, tmp_path):
    """`--type Q4_K_M`: llama-quantize's mixture without the f16 round trip (what gpu-check makes
    its files with): the same tensor types, shapes and file type as `loom quantize` gives the f16
    file, k-quants as random codes with the draw's standard deviation and a mean near zero, and a
    file llama.cpp runs."""
    args = ["--seed", "3", "--gain", "0.5", "--layers", "2", "--vocab", "2048"]
    for d in "abc":
        (tmp_path / d).mkdir()
    direct = synth(loom_bin, tmp_path / "a", "llama3.2-1b-untied", *args, "--type", "Q4_K_M")
    f16 = synth(loom_bin, tmp_path / "b", "llama3.2-1b-untied", *args)
    quantized = tmp_path / "b" / "q4_k_m.gguf"
    run_loom(loom_bin, "quantize", f16, quantized, "--type", "Q4_K_M")
    a, b, x = (gguf.GGUFReader(str(p)) for p in (direct, quantized, f16))
    types = lambda r: {t.name: (t.tensor_type.name, [int(d) for d in t.shape]) for t in r.tensors}
    assert types(a) == types(b)
    assert {v[0] for v in types(a).values()} >= {"Q4_K", "Q6_K", "F32"}
    assert a.fields["general.file_type"].contents() == b.fields["general.file_type"].contents() == 15
    drawn = {t.name: np.asarray(t.data, dtype=np.float32) for t in x.tensors}
    (tmp_path / "d").mkdir()  # Q5_K, which Q4_K_M does not use, as every matrix's type
    q5 = gguf.GGUFReader(str(synth(loom_bin, tmp_path / "d", "llama3.2-1b-untied", *args, "--type", "q5_K")))
    assert {t.tensor_type.name for t in q5.tensors} == {"Q5_K", "F32"}
    for t in list(a.tensors) + [t for t in q5.tensors if t.name.startswith("blk.0.")]:
        if t.tensor_type.name not in ("Q4_K", "Q5_K", "Q6_K"):
            continue
        w = gguf.dequantize(t.data, t.tensor_type).reshape(-1)
        sd = float(drawn[t.name].std())
        assert abs(float(w.std()) / sd - 1) < 0.02, t.name
        assert abs(float(w.mean())) < 0.05 * sd, t.name  # Q6_K: -d * sc / 2, 2.7% of sd
    same = synth(loom_bin, tmp_path / "c", "llama3.2-1b-untied", *args, "--type", "Q4_K_M")
    assert hashlib.sha256(same.read_bytes()).digest() == hashlib.sha256(direct.read_bytes()).digest()
    check_runs(direct, 2048)
