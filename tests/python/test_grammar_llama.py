"""Loom's GBNF matcher against llama.cpp's, on llama.cpp's own example grammars.

The grammars are read from the llama-cpp-python sdist the setup caches
(vendor/llama.cpp/grammars; never copied into this repository). For each, strings are drawn
from the grammar (`loom grammar --sample`) and fuzzed (characters inserted, deleted, replaced,
truncated, spliced); both matchers then read every string byte by byte and must agree on how
many bytes they accept and on whether the whole string is complete. llama.cpp is driven through
llama-cpp-python's low-level grammar sampler on SmolLM2's vocabulary, one character a step (a token whose text is exactly
that character): a character is accepted when the sampler leaves its token's logit finite, and
a string is complete when the end-of-generation token is allowed after it. Loom's byte prefix is
compared at the character boundary. Left out: strings with a character the vocabulary has no
single token for, and NUL (llama.cpp ends its character arrays with code point 0, so it can
never match one; Loom can). Feeding llama.cpp single bytes instead is not a fair oracle: for
a lead byte it rejects a negated class whenever an excluded character shares the lead byte's
range (llama_grammar_match_partial_char), which whole tokens never show.
"""
import ctypes
import json
import os
import pathlib
import random
import tarfile

import pytest

from conftest import json_lines, require_module, run_loom

SDIST = pathlib.Path(os.environ.get("LOOM_CACHE", pathlib.Path.home() / ".cache" / "loom")) / "sdist" / \
    "llama_cpp_python-0.3.36.tar.gz"
SAMPLES, MUTANTS = 25, 4  # per grammar: strings drawn, fuzzed variants of each


@pytest.fixture(scope="module")
def grammars(tmp_path_factory):
    if not SDIST.exists():
        from conftest import missing
        missing(f"llama-cpp-python sdist {SDIST}", "run scripts/setup, which caches it")
    out = tmp_path_factory.mktemp("grammars")
    found = {}
    with tarfile.open(SDIST) as tar:
        for m in tar.getmembers():
            if "/vendor/llama.cpp/grammars/" in m.name and m.name.endswith(".gbnf"):
                p = out / pathlib.Path(m.name).name
                p.write_bytes(tar.extractfile(m).read())
                found[p.stem] = p
    assert len(found) >= 6, found
    return found


class LlamaGrammar:
    """llama.cpp's grammar sampler on a vocabulary-only model."""

    def __init__(self, model_path):
        L = require_module("llama_cpp").llama_cpp
        self.L = L
        p = L.llama_model_default_params()
        p.vocab_only = True
        self.model = L.llama_model_load_from_file(str(model_path).encode(), p)
        assert self.model
        self.vocab = L.llama_model_get_vocab(self.model)
        self.eos = L.llama_vocab_eos(self.vocab)
        self.char_token = {}
        buf = ctypes.create_string_buffer(256)
        for t in range(L.llama_vocab_n_tokens(self.vocab)):
            n = L.llama_token_to_piece(self.vocab, t, buf, 256, 0, False)
            try:
                piece = buf.raw[:n].decode() if n > 0 else ""
            except UnicodeDecodeError:
                continue
            if len(piece) == 1 and piece not in self.char_token:
                self.char_token[piece] = t
        assert len(self.char_token) >= 200

    def covers(self, s):
        return "\0" not in s and all(c in self.char_token for c in s)

    def _allowed(self, smpl, token):
        L = self.L
        data = (L.llama_token_data * 1)()
        data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
        arr = L.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
        L.llama_sampler_apply(smpl, ctypes.byref(arr))
        return data[0].logit != float("-inf")

    def match(self, grammar_text, strings):
        L = self.L
        smpl = L.llama_sampler_init_grammar(self.vocab, grammar_text.encode(), b"root")
        assert smpl, "llama.cpp refused the grammar"
        out = []
        try:
            for s in strings:
                L.llama_sampler_reset(smpl)
                n = 0  # bytes of the characters accepted
                for c in s:
                    tok = self.char_token[c]
                    if not self._allowed(smpl, tok):
                        break
                    L.llama_sampler_accept(smpl, tok)
                    n += len(c.encode())
                out.append({"prefix": n, "complete": n == len(s.encode()) and self._allowed(smpl, self.eos)})
        finally:
            L.llama_sampler_free(smpl)
        return out


def fuzz(s, rng, alphabet):
    ops = [lambda: s[:rng.randrange(len(s) + 1)],
           lambda: (lambda i: s[:i] + rng.choice(alphabet) + s[i:])(rng.randrange(len(s) + 1)),
           lambda: (lambda i: s[:i] + s[i + 1:])(rng.randrange(max(len(s), 1))),
           lambda: (lambda i: s[:i] + rng.choice(alphabet) + s[i + 1:])(rng.randrange(max(len(s), 1))),
           lambda: s + s[:rng.randrange(len(s) + 1)]]
    return rng.choice(ops)()


def test_example_grammars_accept_and_reject_like_llama_cpp(loom_bin, smollm2, grammars):
    llama = LlamaGrammar(smollm2)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    compared = rejected = 0
    skipped = []
    for name, path in sorted(grammars.items()):
        text = path.read_text()
        drawn = json_lines(run_loom(
            loom_bin, "grammar", "--gbnf", path, "--sample", 12 * SAMPLES, "--seed", seed, "--max-len", 160).stdout)
        drawn = [s for s in drawn if s and llama.covers(s)][:SAMPLES]
        if not drawn:  # e.g. random kanji: few are single SmolLM2 tokens
            skipped.append(name)
            continue
        alphabet = sorted(set("".join(drawn)) | set(" \n\"{}[]()0a,.-+*#"))
        strings = drawn + [fuzz(s, rng, alphabet) for s in drawn for _ in range(MUTANTS)]
        strings = [s for s in strings if s and llama.covers(s)]
        ours = json_lines(run_loom(
            loom_bin, "grammar", "--gbnf", path, "--match", input="".join(json.dumps(s) + "\n" for s in strings)).stdout)
        for s, o in zip(strings, ours):  # Loom's byte prefix down to a character boundary
            b = s.encode()
            while o["prefix"] < len(b) and o["prefix"] > 0 and (b[o["prefix"]] & 0xC0) == 0x80:
                o["prefix"] -= 1
        theirs = llama.match(text, strings)
        diffs = [(s, o, t) for s, o, t in zip(strings, ours, theirs) if o != t]
        assert not diffs, f"{name} (seed {seed}): {len(diffs)} of {len(strings)} differ, e.g. {diffs[:3]}"
        assert all(o["complete"] for o in ours[:len(drawn)]), f"{name}: a drawn string is not complete"
        compared += len(strings)
        rejected += sum(not o["complete"] for o in ours)
    assert len(skipped) <= 2, f"no comparable strings for {skipped}"
    assert compared >= 400
    assert rejected >= compared // 10, "the fuzzing must produce strings the grammars reject"
    print(f"{compared} strings compared, {rejected} rejected or incomplete, seed {seed}, skipped {skipped}")
