"""Structured output end to end through `loom serve` and the official openai client.

The corpus (tests/data/schemas/, 100+ schemas made for this suite: function signatures, nested
API objects, enums, arrays with bounds, recursive $ref, patterns, formats) is generated with
the default model (SmolLM2-135M-Instruct) and with a random-weight `loom synth` model, as
response_format {"type": "json_schema", "strict": true}; every reply must parse and validate
with the `jsonschema` package (formats checked too) — 100%, no allowance. A schema of finite
size is generated with max_tokens = its longest document in bytes + 1 (a token is at least a
byte), so a reply can never be cut short; the random model only gets those. A schema without
a longest document (recursion, unbounded strings or arrays) gets UNBOUNDED_MAX_TOKENS with the
default model: the constraint knows how many tokens are left and from the point where the
shortest completion needs them all it allows only tokens that close the document, so even a
model that would recurse for ever returns a complete, valid reply. Also:
json_object mode, streaming, and unsupported or hostile schemas answered with a 400 naming
the problem while the server keeps serving.
"""
import json
import pathlib
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import require_module, run_loom
from test_serve import MODEL_NAME, Server

jsonschema = require_module("jsonschema")

SCHEMAS = sorted((pathlib.Path(__file__).resolve().parents[1] / "data" / "schemas").glob("*.json"))
UNBOUNDED_MAX_TOKENS = 96  # the real model's budget where a schema has no longest document


def longest(loom_bin, path):
    """The longest document of the schema in bytes (None: unbounded), from `loom grammar`."""
    err = run_loom(loom_bin, "grammar", "--json-schema", path).stderr
    m = re.search(r"longest string: (\d+) bytes", err)
    return int(m.group(1)) if m else None


@pytest.fixture(scope="module")
def corpus(loom_bin):
    assert len(SCHEMAS) >= 100
    return [(p.stem, json.loads(p.read_text()), longest(loom_bin, p)) for p in SCHEMAS]


def validate(schema, text):
    doc = json.loads(text)
    jsonschema.validate(doc, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return doc


def generate_all(server, corpus, chat, temperature, only_finite):
    client = server.client()

    def one(item):
        name, schema, size = item
        max_tokens = size + 1 if size is not None else UNBOUNDED_MAX_TOKENS
        rf = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        if chat:
            r = client.chat.completions.create(
                model=MODEL_NAME, messages=[{"role": "user", "content": f"Give an example of {name.replace('_', ' ')} as JSON."}],
                response_format=rf, max_tokens=max_tokens, temperature=temperature, seed=7)
            text = r.choices[0].message.content
        else:
            r = client.completions.create(model=MODEL_NAME, prompt="JSON:", max_tokens=max_tokens,
                                          temperature=temperature, seed=7, extra_body={"response_format": rf})
            text = r.choices[0].text
        try:
            validate(schema, text)
            return None
        except Exception as e:  # noqa: BLE001 — each failure is reported with its schema
            return f"{name} (finish {r.choices[0].finish_reason}): {type(e).__name__}: {str(e)[:200]}\n  {text[:300]!r}"

    items = [c for c in corpus if c[2] is not None or not only_finite]
    with ThreadPoolExecutor(8) as pool:
        failures = [f for f in pool.map(one, items) if f]
    assert not failures, f"{len(failures)} of {len(items)} replies invalid:\n" + "\n".join(failures)
    return len(items)


def test_corpus_default_model_all_valid(loom_bin, smollm2, corpus):
    s = Server(loom_bin, smollm2, "--parallel", "8", "-c", "1024", "--queue", "64")
    try:
        n = generate_all(s, corpus, chat=True, temperature=0.7, only_finite=False)
        assert n == len(corpus)
    finally:
        s.close()


def test_corpus_synthetic_model_all_valid(loom_bin, corpus, tmp_path):
    model = tmp_path / "synth.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", model, "--seed", "3")
    s = Server(loom_bin, model, "--parallel", "8", "-c", "2048", "--queue", "64")
    try:
        n = generate_all(s, corpus, chat=False, temperature=1.0, only_finite=True)
        assert n >= 100
    finally:
        s.close()


@pytest.fixture(scope="module")
def server(loom_bin, smollm2):
    s = Server(loom_bin, smollm2, "--parallel", "2", "-c", "1024", "--queue", "16")
    yield s
    s.close()


def test_json_object_and_streaming(server):
    client = server.client()
    r = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Describe a cat in JSON."}],
                                       response_format={"type": "json_object"}, max_tokens=120, temperature=0)
    # Even when max_tokens ends it, the reply is a whole object: the last tokens close it.
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    short = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Describe a cat in JSON."}],
                                           response_format={"type": "json_object"}, max_tokens=12, temperature=0)
    assert isinstance(json.loads(short.choices[0].message.content), dict), short.choices[0].message.content
    schema = json.loads((SCHEMAS[0].parent / "fn_get_weather.json").read_text())
    rf = {"type": "json_schema", "json_schema": {"name": "w", "schema": schema, "strict": True}}
    kw = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "Weather in Oslo?"}], response_format=rf,
              max_tokens=80, temperature=0)
    whole = client.chat.completions.create(**kw).choices[0].message.content
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == whole
    validate(schema, whole)


@pytest.mark.parametrize("schema, needle", [
    ({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties"),
    ({"type": "string", "pattern": "(a)\\1"}, "backreference"),
    ({"type": "string", "pattern": "[unclosed"}, "missing ']'"),
    ({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"}, "no finite string"),
    ({"enum": list(range(20000))}, "more than the supported"),
    ({"type": "integer", "multipleOf": 7}, "multipleOf"),
])
def test_unsupported_or_hostile_schema_is_a_400_naming_it(server, schema, needle):
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}}
    status, out, _ = server.raw("POST", "/v1/chat/completions", body)
    assert status == 400, out
    err = json.loads(out)["error"]
    assert needle in err["message"] and err["param"] == "response_format"
    r = server.client().chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=3, temperature=0)
    assert r.choices[0].message.content is not None  # still serving


def test_deeply_nested_schema_is_refused(server):
    deep = {"type": "string"}
    for _ in range(100):
        deep = {"type": "array", "items": deep}
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": deep}}}
    status, out, _ = server.raw("POST", "/v1/chat/completions", body)
    assert status == 400 and b"deeper" in out, out


def test_cli_run_with_a_schema_a_grammar_and_errors(loom_bin, smollm2, tmp_path):
    path = SCHEMAS[0].parent / "fn_get_weather.json"
    r = run_loom(loom_bin, "run", "-m", smollm2, "--chat", "-p", "Weather in Rome?", "--json-schema", path,
                 "--temp", "0.7", "--seed", "5", "-n", longest(loom_bin, path) + 1)
    validate(json.loads(path.read_text()), r.stdout)
    g = tmp_path / "yes_no.gbnf"
    g.write_text('root ::= ("yes" | "no") ", because " [a-z ]{1,20} "."\n')
    r = run_loom(loom_bin, "run", "-m", smollm2, "--chat", "-p", "Is the sky blue?", "--grammar", g,
                 "--temp", "0", "-n", "40")
    assert re.fullmatch(r"(yes|no), because [a-z ]{1,20}\.\n", r.stdout), r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "array", "uniqueItems": true}')
    r = run_loom(loom_bin, "run", "-m", smollm2, "-p", "x", "--json-schema", bad, check=False)
    assert r.returncode != 0 and "uniqueItems" in r.stderr and "bad.json" in r.stderr, r.stderr
    g.write_text("root ::= item\n")
    r = run_loom(loom_bin, "run", "-m", smollm2, "-p", "x", "--grammar", g, check=False)
    assert r.returncode != 0 and "undefined rule 'item'" in r.stderr, r.stderr
