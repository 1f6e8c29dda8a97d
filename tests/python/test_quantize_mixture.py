"""`loom quantize` against llama.cpp's own quantizer (llama_cpp.llama_model_quantize, no imatrix).

Input: a llama-shaped F16 GGUF written here with gguf.GGUFWriter (8 layers so use_more_bits
varies, GQA 2, real llama tensor names, 1-D F32 norms, and an ffn_down whose rows (704) are not
a multiple of 256 so the K-quant fallbacks are exercised), with output.weight ("untied") and
without it ("tied": token_embd then takes output's rule).

For each file type: per-tensor type choices must be identical, tensor order identical,
general.file_type identical, and every tensor's bytes identical (llama.cpp quantizes with
ggml's quantize_row_*_ref when no imatrix is given; Loom's references are bit-exact with them).
No intentional differences are allowed by this test.
"""
import ctypes
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFWriter

from conftest import run_loom

N_LAYER, N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_VOCAB = 8, 256, 704, 4, 2, 512
FTYPES = {"Q4_K_M": 15, "Q4_K_S": 14, "Q5_K_M": 17, "Q3_K_M": 12, "Q6_K": 18, "Q4_0": 2, "Q8_0": 7, "F16": 1}


def write_llama_f16(path, tied, rng):
    w = GGUFWriter(str(path), "llama")
    w.add_name("loom-test-llama")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    w.add_file_type(1)

    def mat(rows, cols):  # numpy shape (rows, cols): GGUF dims [cols, rows]
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    w.add_tensor("token_embd.weight", mat(N_VOCAB, N_EMBD))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    if not tied:
        w.add_tensor("output.weight", mat(N_VOCAB, N_EMBD))
    hd = N_EMBD // N_HEAD
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(N_EMBD)).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(p + "attn_k.weight", mat(N_HEAD_KV * hd, N_EMBD))
        w.add_tensor(p + "attn_v.weight", mat(N_HEAD_KV * hd, N_EMBD))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(N_EMBD)).astype(np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_quantize(src, dst, ftype):
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize failed ({rc})"


def tensors_of(path):
    r = GGUFReader(str(path))
    ft = r.fields["general.file_type"]
    file_type = int(ft.parts[ft.data[0]][0])
    return file_type, [(t.name, QT(t.tensor_type), bytes(np.asarray(t.data).view(np.uint8).reshape(-1)))
                       for t in r.tensors]


@pytest.fixture(scope="module", params=["untied", "tied"])
def f16_model(request, tmp_path_factory):
    seed = np.random.SeedSequence().entropy
    print(f"test_quantize_mixture model seed={seed}")
    path = tmp_path_factory.mktemp("mix") / f"llama-{request.param}-f16.gguf"
    write_llama_f16(path, request.param == "tied", np.random.default_rng(seed))
    return path


@pytest.mark.parametrize("ftype", list(FTYPES))
def test_mixture_and_bytes_match_llama_cpp(loom_bin, f16_model, tmp_path, ftype):
    ours, theirs = tmp_path / "loom.gguf", tmp_path / "llama.gguf"
    r = run_loom(loom_bin, "quantize", f16_model, ours, "--type", ftype, "--threads", 2)
    assert "quant size" in r.stdout
    llama_quantize(f16_model, theirs, FTYPES[ftype])

    ft_ours, t_ours = tensors_of(ours)
    ft_theirs, t_theirs = tensors_of(theirs)
    assert ft_ours == ft_theirs == FTYPES[ftype]
    assert [n for n, _, _ in t_ours] == [n for n, _, _ in t_theirs], "tensor order differs"

    type_diffs = [(n, a.name, b.name) for (n, a, _), (_, b, _) in zip(t_ours, t_theirs) if a != b]
    byte_diffs = [n for (n, a, da), (_, b, db) in zip(t_ours, t_theirs) if a == b and da != db]
    mix = {}
    for n, t, _ in t_ours:
        mix[t.name] = mix.get(t.name, 0) + 1
    print(f"{ftype} ({f16_model.name}): {len(t_ours)} tensors, types {mix}, "
          f"type mismatches={len(type_diffs)}, byte mismatches={len(byte_diffs)}")
    assert not type_diffs, f"type choices differ: {type_diffs}"
    assert not byte_diffs, f"bytes differ for {byte_diffs}"


def test_q4_k_m_rules_are_exercised(loom_bin, f16_model, tmp_path):
    """The fixture really reaches the interesting Q4_K_M branches (so agreement means something)."""
    out = tmp_path / "loom.gguf"
    run_loom(loom_bin, "quantize", f16_model, out, "--type", "Q4_K_M")
    types = {n: t for n, t, _ in tensors_of(out)[1]}
    assert types["output_norm.weight"] == QT.F32
    assert {types[f"blk.{i}.attn_v.weight"] for i in range(N_LAYER)} == {QT.Q4_K, QT.Q6_K}
    assert {types[f"blk.{i}.ffn_down.weight"] for i in range(N_LAYER)} == {QT.Q5_0, QT.Q8_0}  # 704-wide rows
    assert types["token_embd.weight"] == (QT.Q6_K if "tied" in f16_model.name and "untied" not in f16_model.name else QT.Q4_K)


def llama_requantize(src, dst, ftype):
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    params.allow_requantize = True  # Loom always dequantizes quantized inputs first
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize failed ({rc})"


@pytest.mark.parametrize("model,ftype", [("smollm2", "Q4_K_M"), ("gemma3", "Q5_K_M"), ("gemma3", "Q4_0")])
def test_real_models_requantized_like_llama_cpp(request, loom_bin, tmp_path, model, ftype):
    """Real GGUFs (SmolLM2: Q4_1/Q8_0 inputs, llama arch, 576-wide rows -> fallbacks; Gemma 3:
    gemma3 arch, tied embeddings, 640-wide rows) requantized by both tools: same types, bytes."""
    src = request.getfixturevalue(model)
    ours, theirs = tmp_path / "loom.gguf", tmp_path / "llama.gguf"
    run_loom(loom_bin, "quantize", src, ours, "--type", ftype)
    llama_requantize(src, theirs, FTYPES[ftype])
    ft_ours, t_ours = tensors_of(ours)
    ft_theirs, t_theirs = tensors_of(theirs)
    assert ft_ours == ft_theirs
    assert [n for n, _, _ in t_ours] == [n for n, _, _ in t_theirs]
    type_diffs = [(n, a.name, b.name) for (n, a, _), (_, b, _) in zip(t_ours, t_theirs) if a != b]
    byte_diffs = [n for (n, a, da), (_, b, db) in zip(t_ours, t_theirs) if a == b and da != db]
    print(f"{model} -> {ftype}: {len(t_ours)} tensors, type mismatches={len(type_diffs)}, byte mismatches={len(byte_diffs)}")
    assert not type_diffs and not byte_diffs, (type_diffs[:5], byte_diffs[:5])
