"""`logprobs` / `top_logprobs` in `loom serve` through the pinned openai client, on loopback:
chat (whole and streamed) and legacy completions replies have OpenAI's shapes and consistent
numbers, the streamed tokens are the whole reply's, a sampled request reports the same raw
log-probabilities as a greedy one for the same logits, a stop sequence keeps the tokens that
begin before its cut, bad values are 400s naming the field, and the numbers equal the
log-softmax (numpy, float64) of the logits `loom logits` computes for the same tokens.
"""
import json
import math

import numpy as np
import pytest

from conftest import run_loom
from test_serve import MODEL_NAME, Server

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(loom_bin, smollm2):
    s = Server(loom_bin, smollm2, "--parallel", "2", "-c", "1024")
    # Leaves the chat prompt's full blocks in the prefix cache, so every request below computes
    # the same rows the same way (prefill and decode kernels sum in different orders).
    chat(s.client(), max_tokens=1)
    yield s
    s.close()


def chat(client, text="Name three colours.", **kw):
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": text}], **kw)


def check_chat_entries(content, n_top, greedy):
    for e in content:
        assert e.logprob <= 0
        assert e.bytes is not None and (e.token == bytes(e.bytes).decode() if "\ufffd" not in e.token else True)
        assert len(e.top_logprobs) == n_top
        tops = [t.logprob for t in e.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert sum(math.exp(x) for x in tops) <= 1 + 1e-6
        if greedy:  # temperature 0: the sampled token is the most likely one
            assert e.token == e.top_logprobs[0].token and e.bytes == e.top_logprobs[0].bytes
            assert e.logprob == e.top_logprobs[0].logprob


def test_chat_logprobs_whole_and_streamed(server):
    c = server.client()
    r = chat(c, max_tokens=12, logprobs=True, top_logprobs=5)
    ch = r.choices[0]
    content = ch.logprobs.content
    # Every generated token but an end token is reported, and their bytes are the reply's text.
    assert len(content) == r.usage.completion_tokens - (1 if ch.finish_reason == "stop" else 0)
    assert b"".join(bytes(e.bytes) for e in content) == ch.message.content.encode()
    check_chat_entries(content, 5, greedy=True)

    chunks = list(chat(c, max_tokens=12, logprobs=True, top_logprobs=5, stream=True))
    streamed = []
    for k in chunks:
        for choice in k.choices:
            got = choice.logprobs.content if choice.logprobs else []
            # Each chunk carries the tokens whose text it sends.
            assert b"".join(bytes(e.bytes) for e in got) == (choice.delta.content or "").encode()
            streamed += got
    assert [(e.token, e.bytes) for e in streamed] == [(e.token, e.bytes) for e in content]
    for a, b in zip(streamed, content):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        assert [t.token for t in a.top_logprobs] == [t.token for t in b.top_logprobs]

    plain = chat(c, max_tokens=3)
    assert plain.choices[0].logprobs is None
    zero = chat(c, max_tokens=3, logprobs=True)  # top_logprobs absent: 0 alternatives
    assert all(e.top_logprobs == [] for e in zero.choices[0].logprobs.content)


def test_sampled_and_greedy_report_the_same_raw_logprobs(server):
    c = server.client()
    g = chat(c, max_tokens=1, logprobs=True, top_logprobs=20).choices[0].logprobs.content[0]
    s = chat(c, max_tokens=4, logprobs=True, top_logprobs=20, temperature=1.5, top_p=0.5, seed=3,
             extra_body={"top_k": 3, "repeat_penalty": 1.5}).choices[0].logprobs.content
    check_chat_entries(s, 20, greedy=False)
    # The first position's logits are the same: so are its numbers, whatever the sampling did.
    assert [t.token for t in s[0].top_logprobs] == [t.token for t in g.top_logprobs]
    for a, b in zip(s[0].top_logprobs, g.top_logprobs):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    assert s[0].token in [t.token for t in g.top_logprobs[:3]]  # drawn from top_k 3


def test_completions_logprobs(server):
    c = server.client()
    r = c.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=10, temperature=0, logprobs=3)
    ch = r.choices[0]
    lp = ch.logprobs
    n = len(lp.tokens)
    assert n == r.usage.completion_tokens - (1 if ch.finish_reason == "stop" else 0)
    assert len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert "".join(lp.tokens) == ch.text
    for k in range(n):
        assert lp.token_logprobs[k] <= 0
        top = lp.top_logprobs[k]
        assert lp.tokens[k] in top and len(top) <= 4  # the top 3 and the sampled token
        assert top[lp.tokens[k]] == lp.token_logprobs[k] == max(top.values())  # greedy
        assert sum(math.exp(v) for v in top.values()) <= 1 + 1e-6
        assert ch.text[lp.text_offset[k]:].startswith(lp.tokens[k])
    streamed = [k.choices[0].logprobs for k in c.completions.create(
        model=MODEL_NAME, prompt=PROMPT, max_tokens=10, temperature=0, logprobs=3, stream=True)
        if k.choices and k.choices[0].logprobs]
    assert sum((s.tokens for s in streamed), []) == lp.tokens
    assert sum((s.text_offset for s in streamed), []) == lp.text_offset


def test_a_stop_sequence_keeps_the_tokens_that_begin_before_it(server):
    c = server.client()
    base = c.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=12, temperature=0, logprobs=0)
    toks = base.choices[0].logprobs.tokens
    text = "".join(toks)
    # A stop string from inside token k (its first character is kept) through token k + 1.
    for k in range(1, len(toks) - 1):
        stop = toks[k][1:] + toks[k + 1]
        cut = len("".join(toks[:k])) + 1
        if len(toks[k]) >= 2 and text.find(stop) == cut:
            break
    else:
        pytest.fail(f"no token of {toks!r} splits into a stop string")
    for stream in (False, True):
        kw = dict(model=MODEL_NAME, prompt=PROMPT, max_tokens=12, temperature=0, logprobs=0, stop=[stop])
        if stream:
            got, reported = "", []
            for ch in c.completions.create(stream=True, **kw):
                if ch.choices:
                    got += ch.choices[0].text
                    reported += ch.choices[0].logprobs.tokens if ch.choices[0].logprobs else []
        else:
            r = c.completions.create(**kw).choices[0]
            got, reported = r.text, r.logprobs.tokens
        assert got == text[:cut]
        assert reported == toks[:k + 1], stream  # token k begins before the cut, k + 1 after


def test_numbers_are_the_log_softmax_of_loom_logits(server, loom_bin, smollm2, tmp_path):
    c = server.client()
    r = c.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=5,
                             extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    st, body, _ = server.raw("POST", "/tokenize", {"content": PROMPT, "add_special": True})
    prompt_ids = json.loads(body)["tokens"]
    st, body, _ = server.raw("POST", "/tokenize", {"content": r.choices[0].text})
    gen_ids = json.loads(body)["tokens"]

    def piece(i):
        return json.loads(server.raw("POST", "/detokenize", {"tokens": [int(i)]})[1])["content"]

    assert [piece(i) for i in gen_ids] == lp.tokens, "the reply's text does not re-tokenize to its tokens"
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(map(str, prompt_ids + gen_ids)))
    out = tmp_path / "logits.f32"
    # -b 1: one decode step per token, the way the server computed the generated tokens.
    run_loom(loom_bin, "logits", "-m", smollm2, "--tokens", ids, "--out", out, "-b", "1")
    logits = np.fromfile(out, dtype=np.float32).reshape(len(prompt_ids) + len(gen_ids), -1).astype(np.float64)
    rows = logits[len(prompt_ids) - 1:-1]
    ls = rows - rows.max(axis=1, keepdims=True)
    ls -= np.log(np.exp(ls).sum(axis=1, keepdims=True))
    for k in range(4):
        assert lp.token_logprobs[k] == pytest.approx(ls[k, gen_ids[k]], abs=1e-3), k
        top5 = np.argsort(-ls[k], kind="stable")[:5]
        got = lp.top_logprobs[k]
        assert len(got) == 5, got  # greedy: the sampled token is one of the top 5
        assert sorted(got.values(), reverse=True) == pytest.approx([ls[k, i] for i in top5], abs=1e-3), k
        for i in top5:
            if piece(i):  # /detokenize renders a control token (<|im_end|>) as nothing
                assert got[piece(i)] == pytest.approx(ls[k, i], abs=1e-3), (k, piece(i))


BAD = [
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 2.5}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": 3}, "logprobs"),
    ("/v1/completions", {"logprobs": 6}, "logprobs"),
    ("/v1/completions", {"logprobs": -1}, "logprobs"),
    ("/v1/completions", {"logprobs": True}, "logprobs"),
    ("/v1/completions", {"logprobs": 2, "top_logprobs": 2}, "top_logprobs"),
    ("/v1/completions", {"logprobs": 2, "echo": True}, "echo"),
]


@pytest.mark.parametrize("path,extra,param", BAD, ids=[f"{p[4:]}-{json.dumps(e)}" for p, e, _ in BAD])
def test_bad_logprobs_fields_are_400s_naming_them(server, path, extra, param):
    body = {"model": MODEL_NAME, "max_tokens": 2, **extra}
    body.update({"messages": [{"role": "user", "content": "x"}]} if "chat" in path else {"prompt": "x"})
    st, resp, _ = server.raw("POST", path, body)
    assert st == 400, resp[:300]
    err = json.loads(resp)["error"]
    assert err["param"] == param and param in err["message"], err
