"""`loom port` and `loom check --gguf` on the real models, on `loom synth` files of every
architecture it writes, and on a hand-written tiny Phi-3 (synth has no phi3 shape), whose
logits are compared with llama.cpp's."""
import subprocess

import numpy as np
import pytest

from conftest import require_module, run_loom

SYNTH_SHAPES = ["tiny-llama", "tiny-llama-untied", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"]
MAX_SYNTH_REL_DLOGIT = 0.02  # max |Δlogit| / std(logits), random F32 weights (never loosened)


def port_and_check(loom_bin, gguf_path, tmp_path, *port_args):
    out = tmp_path / (gguf_path.stem + ".loom")
    run_loom(loom_bin, "port", gguf_path, "-o", out, *port_args)
    text = out.read_text()
    assert text.startswith("module @")
    r = run_loom(loom_bin, "check", out, "--gguf", gguf_path)
    assert r.stdout.startswith("ok:"), r.stdout
    assert "bindings ok" in r.stderr
    return out, text


def test_smollm2(loom_bin, smollm2, tmp_path):
    out, text = port_and_check(loom_bin, smollm2, tmp_path)
    assert 'arch = "llama"' in text
    assert "= matmul %out_norm, @token_embd" in text.replace("  ", " ")  # tied output
    # Standard output carries the same program (gguf.file is relative to the current directory
    # there, so run it from the folder the file went to).
    assert run_loom(loom_bin, "port", smollm2, cwd=tmp_path).stdout == text


def test_gemma3(loom_bin, gemma3, tmp_path):
    out, text = port_and_check(loom_bin, gemma3, tmp_path)
    assert text.count("window = 512}") == 15  # attention ops: 18 layers, every 6th global
    assert text.count("geglu") == 18


@pytest.mark.parametrize("shape", SYNTH_SHAPES)
def test_synth(loom_bin, tmp_path, shape):
    g = tmp_path / f"{shape}.gguf"
    run_loom(loom_bin, "synth", shape, g, "--seed", 7)
    port_and_check(loom_bin, g, tmp_path)


def test_program_written_elsewhere_finds_its_weights(loom_bin, tmp_path):
    """`loom port -o elsewhere/x.loom` records the GGUF's path relative to the program, so the
    program runs from any working directory (weights in a/, program in b/, run from c/)."""
    for d in "abc":
        (tmp_path / d).mkdir()
    run_loom(loom_bin, "synth", "tiny-llama", tmp_path / "a" / "model.gguf", "--seed", 3)
    run_loom(loom_bin, "port", "a/model.gguf", "-o", "b/x.loom", cwd=tmp_path)
    assert 'gguf.file = "../a/model.gguf"' in (tmp_path / "b" / "x.loom").read_text()
    c = tmp_path / "c"
    # Nothing else could lead to the weights: b/ holds no .gguf (no x.gguf, no sha256 search).
    assert not list((tmp_path / "b").glob("*.gguf"))
    r = run_loom(loom_bin, "run", "-m", "../b/x.loom", "-p", "hello", "-n", 2, "--temp", 0, cwd=c)
    assert r.returncode == 0
    r = run_loom(loom_bin, "check", "../b/x.loom", "--gguf", "../a/model.gguf", cwd=c)
    assert r.stdout.startswith("ok:"), r.stdout
    # Absolute paths on the command line give the same relative record.
    run_loom(loom_bin, "port", tmp_path / "a" / "model.gguf", "-o", tmp_path / "b" / "y.loom", cwd=c)
    assert 'gguf.file = "../a/model.gguf"' in (tmp_path / "b" / "y.loom").read_text()
    run_loom(loom_bin, "run", "-m", tmp_path / "b" / "y.loom", "-p", "hello", "-n", 1, cwd="/")


def llama_cpp_vs_loom(loom_bin, gguf_path, prog, tokens, tmp_path):
    llama_cpp = require_module("llama_cpp")
    llm = llama_cpp.Llama(model_path=str(gguf_path), logits_all=True, n_ctx=512, n_threads=2, verbose=False)
    llm.eval(tokens)
    ref = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(map(str, tokens)))
    out = tmp_path / "logits.f32"
    run_loom(loom_bin, "logits", "-m", prog, "--gguf", gguf_path, "--tokens", ids, "--out", out, "--threads", 2)
    got = np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1)
    rel = np.abs(ref - got).max() / ref.std()
    print(f"  {gguf_path.stem}: max |dlogit| / std = {rel:.2e}")
    return rel


# F32 random weights: no quantization noise, so any difference is the program's semantics.
# 7 gemma3 layers and 300 tokens put a global layer (5) and a window of 16 to work.
@pytest.mark.parametrize("shape,layers,n_tokens", [(s, 2, 48) for s in SYNTH_SHAPES] + [("tiny-gemma3", 7, 300)])
def test_synth_f32_logits_match_llama_cpp(loom_bin, tmp_path, shape, layers, n_tokens):
    g = tmp_path / f"{shape}-{layers}.gguf"
    run_loom(loom_bin, "synth", shape, g, "--seed", 3, "--type", "f32", "--layers", layers)
    # Past the shapes' 256 trained positions where asked, as llama.cpp's context of 512 runs them.
    prog, _ = port_and_check(loom_bin, g, tmp_path, "--ctx", max(n_tokens, 256))
    tokens = [int(t) for t in np.random.default_rng(2).integers(3, 512, n_tokens)]
    assert llama_cpp_vs_loom(loom_bin, g, prog, tokens, tmp_path) < MAX_SYNTH_REL_DLOGIT


def test_hash_mismatch(loom_bin, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    run_loom(loom_bin, "synth", "tiny-qwen3", a, "--seed", 1)
    run_loom(loom_bin, "synth", "tiny-qwen3", b, "--seed", 2)  # same shapes, other bytes
    prog = tmp_path / "a.loom"
    run_loom(loom_bin, "port", a, "-o", prog)
    r = run_loom(loom_bin, "check", prog, "--gguf", b, check=False)
    assert r.returncode == 1
    assert "sha256" in r.stderr and r.stderr.count("sha256 ") >= 2, r.stderr
    r = run_loom(loom_bin, "check", prog, "--gguf", b, "--allow-hash-mismatch")
    assert "warning" in r.stderr and "bindings ok" in r.stderr


def test_wrong_file_names_tensor(loom_bin, smollm2, gemma3, tmp_path):
    prog = tmp_path / "smol.loom"
    run_loom(loom_bin, "port", smollm2, "-o", prog)
    r = run_loom(loom_bin, "check", prog, "--gguf", gemma3, "--allow-hash-mismatch", check=False)
    assert r.returncode == 1
    assert "token_embd.weight" in r.stderr and "tensor<262144x640xq8_0>" in r.stderr, r.stderr


# --- hand-written GGUFs -------------------------------------------------------------------

def copy_tokenizer(writer, donor):
    """Byte-level BPE vocabulary of a synth file, so llama.cpp can load the hand-written one."""
    import gguf
    r = gguf.GGUFReader(str(donor))
    f = r.fields
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([bytes(f["tokenizer.ggml.tokens"].parts[i]) for i in f["tokenizer.ggml.tokens"].data])
    writer.add_token_types([int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data])
    writer.add_token_merges([bytes(f["tokenizer.ggml.merges"].parts[i]) for i in f["tokenizer.ggml.merges"].data])
    writer.add_bos_token_id(int(f["tokenizer.ggml.bos_token_id"].contents()))
    writer.add_eos_token_id(int(f["tokenizer.ggml.eos_token_id"].contents()))
    return len(f["tokenizer.ggml.tokens"].data)


def write_tiny_phi3(path, donor, seed=0):
    """Phi-3 mini's layout in miniature: fused attn_qkv, fused [gate | up] ffn_up."""
    import gguf
    rng = np.random.default_rng(seed)
    E, H, KV, D, F, L = 64, 4, 2, 16, 96, 2
    w = gguf.GGUFWriter(str(path), "phi3")
    V = copy_tokenizer(w, donor)
    w.add_context_length(256)
    w.add_embedding_length(E)
    w.add_feed_forward_length(F)
    w.add_block_count(L)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)

    def t(name, *shape, norm=False):  # shape outermost first (numpy order)
        x = (1.0 + 0.1 * rng.standard_normal(shape)) if norm else 0.3 * rng.standard_normal(shape)
        w.add_tensor(name, x.astype(np.float32))

    t("token_embd.weight", V, E)
    for l in range(L):
        b = f"blk.{l}."
        t(b + "attn_norm.weight", E, norm=True)
        t(b + "attn_qkv.weight", H * D + 2 * KV * D, E)
        t(b + "attn_output.weight", E, H * D)
        t(b + "ffn_norm.weight", E, norm=True)
        t(b + "ffn_up.weight", 2 * F, E)
        t(b + "ffn_down.weight", E, F)
    t("output_norm.weight", E, norm=True)
    t("output.weight", V, E)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return V


def test_phi3(loom_bin, tmp_path):
    require_module("gguf")
    donor = tmp_path / "donor.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", donor)
    phi3 = tmp_path / "tiny-phi3.gguf"
    vocab = write_tiny_phi3(phi3, donor)
    prog, text = port_and_check(loom_bin, phi3, tmp_path)
    assert 'arch = "phi3"' in text and "slice" in text

    tokens = [int(t) for t in np.random.default_rng(1).integers(3, vocab, 48)]
    assert llama_cpp_vs_loom(loom_bin, phi3, prog, tokens, tmp_path) < MAX_SYNTH_REL_DLOGIT


def test_unknown_architecture(loom_bin, tmp_path):
    gguf = require_module("gguf")
    p = tmp_path / "xyz.gguf"
    w = gguf.GGUFWriter(str(p), "xyz")
    w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run_loom(loom_bin, "port", p, check=False)
    assert r.returncode == 1
    assert "unsupported architecture 'xyz' (supported: gemma3, llama, phi3, qwen2, qwen3)" in r.stderr
