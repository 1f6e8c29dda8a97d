"""Loom's tokenizers against llama.cpp (llama-cpp-python, vocab_only) on the same GGUF files.

Corpus: tests/data/tokenizer/corpus.jsonl (written by make_corpus.py; valid strings as
"text", byte strings that are not UTF-8 as "b64"). Loom runs once per configuration in batch
mode (`loom tokenize --batch`). Every comparison must agree exactly: mismatch count 0.

Known exception, by design: kind "beyond_unicode" (bytes whose lenient decoding exceeds
U+10FFFF) aborts the llama.cpp process on BPE vocabularies (uncaught std::invalid_argument), so
for BPE those lines are only required to be a clean error in Loom; SPM compares them normally.
"""
import base64
import ctypes
import json
import pathlib
import subprocess

import pytest

from conftest import json_lines, require_module

llama_cpp = require_module("llama_cpp")

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "tokenizer" / "corpus.jsonl"
MIN_CORPUS = 2000


def load_corpus():
    out = []
    for line in CORPUS.read_text().splitlines():
        rec = json.loads(line)
        b = base64.b64decode(rec["b64"]) if "b64" in rec else rec["text"].encode("utf-8")
        out.append((rec["kind"], b))
    return out


@pytest.fixture(scope="module")
def corpus():
    c = load_corpus()
    assert len(c) >= MIN_CORPUS, f"corpus has {len(c)} strings, need {MIN_CORPUS}"
    return c


_llamas = {}


def llama_for(path):
    if path not in _llamas:
        _llamas[path] = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return _llamas[path]


def vocab_of(llm):
    return llama_cpp.llama_model_get_vocab(llm.model)


def ref_piece(vocab, tok, special):
    buf = ctypes.create_string_buffer(1024)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, len(buf), 0, special)
    assert n >= 0
    return buf.raw[:n]


def ref_detokenize(vocab, ids, remove_special, unparse_special):
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    size = 4096 + 64 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, remove_special, unparse_special)
    assert n >= 0
    return buf.raw[:n]


def loom_batch(loom_bin, model, corpus, tmp_path, add_special, parse_special):
    inp = tmp_path / "batch.jsonl"
    inp.write_text("".join(json.dumps({"b64": base64.b64encode(b).decode()}) + "\n" for _, b in corpus))
    args = [str(loom_bin), "tokenize", "-m", str(model), "--batch", str(inp)]
    if not add_special:
        args.append("--no-bos")
    if parse_special:
        args.append("--parse-special")
    r = subprocess.run(args, capture_output=True, check=True)
    recs = json_lines(r.stdout.decode())
    assert len(recs) == len(corpus)
    return recs


def is_bpe(llm):
    return llama_cpp.llama_vocab_type(vocab_of(llm)) == llama_cpp.LLAMA_VOCAB_TYPE_BPE


def check_against_llama(loom_bin, model, corpus, tmp_path, add_special, parse_special, label):
    llm = llama_for(model)
    vocab = vocab_of(llm)
    recs = loom_batch(loom_bin, model, corpus, tmp_path, add_special, parse_special)
    compared = mismatched = detok_mismatched = 0
    examples = []
    for (kind, b), rec in zip(corpus, recs):
        if kind == "beyond_unicode" and is_bpe(llm):
            assert "error" in rec, f"{label}: expected a clean error for {b!r}"
            continue
        assert "error" not in rec, f"{label}: loom failed on {b!r}: {rec.get('error')}"
        ref = llm.tokenize(b, add_bos=add_special, special=parse_special)
        compared += 1
        if rec["ids"] != ref:
            mismatched += 1
            if len(examples) < 10:
                examples.append((kind, b, rec["ids"], ref))
            continue
        ref_text = ref_detokenize(vocab, ref, True, parse_special)
        if base64.b64decode(rec["decoded_b64"]) != ref_text:
            detok_mismatched += 1
            if len(examples) < 10:
                examples.append(("detokenize:" + kind, b, base64.b64decode(rec["decoded_b64"]), ref_text))
    print(f"\n{label}: compared {compared} strings, {mismatched} token mismatches, "
          f"{detok_mismatched} detokenize mismatches")
    for e in examples:
        print("  ", e)
    assert mismatched == 0 and detok_mismatched == 0
    return recs


CONFIGS = [(True, False), (True, True), (False, False), (False, True)]


@pytest.mark.parametrize("add_special,parse_special", CONFIGS)
def test_smollm2_tokens_match_llama_cpp(loom_bin, smollm2, corpus, tmp_path, add_special, parse_special):
    check_against_llama(loom_bin, smollm2, corpus, tmp_path, add_special, parse_special,
                        f"smollm2 add_special={add_special} parse_special={parse_special}")


@pytest.mark.parametrize("add_special,parse_special", CONFIGS)
def test_gemma3_tokens_match_llama_cpp(loom_bin, gemma3, corpus, tmp_path, add_special, parse_special):
    check_against_llama(loom_bin, gemma3, corpus, tmp_path, add_special, parse_special,
                        f"gemma3 add_special={add_special} parse_special={parse_special}")


def gpt2_byte_alphabet():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocab_texts(llm):
    vocab = vocab_of(llm)
    return {llama_cpp.llama_vocab_get_text(vocab, t) for t in range(llama_cpp.llama_vocab_n_tokens(vocab))}


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
@pytest.mark.parametrize("parse_special", [False, True])
def test_round_trip(request, loom_bin, corpus, tmp_path, which, parse_special):
    """decode(encode(s)) == s, with remove_special (drops the added BOS) and unparse_special
    following parse_special. Neither model adds a prefix space (add_space_prefix is false for
    both). The exceptions are properties of the tokenizers (llama.cpp behaves the same; the
    token-level tests above prove agreement), and are excluded here, not loosened:
      BPE (SmolLM2): invalid UTF-8 is read as U+FFFD; a byte whose byte-level character is not
        in the vocabulary (SmolLM2 lacks 21, e.g. 0x04, 0x14, 0xFF) is dropped.
      SPM (Gemma 3): a literal U+2581 in the input is the space marker and decodes as a space
        (expected text has it replaced); in invalid UTF-8 a malformed lead byte can swallow a
        following space marker into its byte-fallback spelling (invalid strings with a space
        are excluded; other invalid strings must keep their bytes exactly)."""
    model = request.getfixturevalue(which)
    llm = llama_for(model)
    recs = loom_batch(loom_bin, model, corpus, tmp_path, True, parse_special)
    bpe = which == "smollm2"
    if bpe:
        texts = vocab_texts(llm)
        alphabet = gpt2_byte_alphabet()
        missing = {b for b in range(256) if alphabet[b].encode() not in texts}
        assert missing, "expected SmolLM2 to lack some byte-level characters"
    checked = failed = 0
    bad = []
    for (kind, b), rec in zip(corpus, recs):
        if "error" in rec:
            continue
        try:
            b.decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        expected = b
        if bpe and (not valid or any(x in missing for x in b)):
            continue
        if not bpe:
            if not valid and b" " in b:
                continue
            expected = b.replace("\u2581".encode(), b" ")
        checked += 1
        if base64.b64decode(rec["decoded_b64"]) != expected:
            failed += 1
            bad.append(b)
    print(f"\n{which} parse_special={parse_special}: round-trip checked {checked}, failed {failed}", bad[:5])
    assert checked > 2000 and failed == 0


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_every_token_piece_matches_llama_cpp(request, loom_bin, which):
    model = request.getfixturevalue(which)
    llm = llama_for(model)
    vocab = vocab_of(llm)
    r = subprocess.run([str(loom_bin), "tokenize", "-m", str(model), "--dump-pieces"], capture_output=True, check=True)
    recs = json_lines(r.stdout.decode())
    assert len(recs) == llama_cpp.llama_vocab_n_tokens(vocab)
    bad = []
    for rec in recs:
        t = rec["id"]
        got = (rec["attr"], base64.b64decode(rec["piece_b64"]), base64.b64decode(rec["special_b64"]))
        ref = (int(llama_cpp.llama_vocab_get_attr(vocab, t)), ref_piece(vocab, t, False), ref_piece(vocab, t, True))
        if got != ref:
            bad.append((t, got, ref))
    print(f"\n{which}: compared {len(recs)} tokens (attr, piece, special piece), {len(bad)} mismatches", bad[:5])
    assert not bad


# Synthetic vocabularies: SmolLM2's tokens and merges under other pre-tokenizer names, written
# as vocab-only GGUF files, to exercise those regex cascades against llama.cpp.
SYNTH_PRES = ["qwen2", "llama-bpe", "gpt-2", "default", "deepseek-v3"]


def write_synthetic(src, dst, pre):
    import gguf

    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "tokenizer.ggml.pre", "tokenizer.chat_template"):
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vtype, sub_type=sub)
    w.add_string("tokenizer.ggml.pre", pre)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("pre", SYNTH_PRES)
def test_synthetic_pretokenizers_match_llama_cpp(loom_bin, smollm2, corpus, tmp_path, pre):
    model = tmp_path / f"synthetic-{pre}.gguf"
    write_synthetic(smollm2, model, pre)
    for parse_special in (False, True):
        check_against_llama(loom_bin, model, corpus, tmp_path, True, parse_special,
                            f"synthetic pre={pre} parse_special={parse_special}")
