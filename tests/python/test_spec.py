"""Speculative decoding from the command line (src/runtime/spec/): at temperature 0 `loom run
--spec ...` prints exactly what plain decoding prints, on both real models with prompt lookup
and a derived draft program, and on a `loom synth` model with every drafter; `loom draft` writes
a readable, checkable .loom draft program; a draft model of another vocabulary is refused by
name; `loom bench --spec` reports speed, acceptance and identity. The statistical test of the
sampled distribution is tests/runtime/speculative_test.cpp."""
import json
import pathlib

import pytest

from conftest import ROOT, run_loom

PROMPTS = sorted((ROOT / "tests" / "data" / "spec").glob("*.txt"))


@pytest.mark.parametrize("model_fixture,layers", [("smollm2", 12), ("gemma3", 9)])
def test_greedy_speculation_equals_plain_decoding_on_real_models(loom_bin, request, model_fixture, layers):
    """`loom bench --spec` decodes each prompt plainly and with each drafter in one process and
    reports whether every arm's tokens equal plain decoding's."""
    model = request.getfixturevalue(model_fixture)
    accepted = 0
    for i, prompt in enumerate(PROMPTS):
        # Lookup on every prompt; the (slower) derived draft on the first.
        drafters = f"lookup,layers:{layers}" if i == 0 else "lookup"
        r = run_loom(loom_bin, "bench", "-m", model, "--spec", drafters, "-f", prompt, "--chat", "-n", 32,
                     "-r", 1, "--warmup", 0, "--json", "-q")
        out = json.loads(r.stdout)
        for arm in out["arms"]:
            assert arm["identical"], f"{model.name} --spec {arm['drafter']} on {prompt.name} differs from plain decoding"
        accepted += sum(round(a["acceptance"] * a["drafted"]) for a in out["arms"][1:])
    assert accepted > 0, "no draft was accepted on any prompt: the identity above tested nothing"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, loom_bin):
    d = tmp_path_factory.mktemp("spec")
    run_loom(loom_bin, "synth", "tiny-llama", d / "tiny.gguf", "--seed", "3")
    return d


def test_draft_verb_writes_a_program_that_checks_and_drafts(loom_bin, tiny):
    model, draft = tiny / "tiny.gguf", tiny / "tiny-draft.loom"
    run_loom(loom_bin, "draft", model, "--layers", "1", "-o", draft)
    text = draft.read_text()
    assert "draft.layers = 1" in text and "blk.1." not in text and "output_norm" in text
    run_loom(loom_bin, "check", draft)
    prompt = "one two three one two three one two"
    base = ["run", "-m", model, "-p", prompt, "--temp", "0", "-n", "24"]
    plain = run_loom(loom_bin, *base).stdout
    for d in ["lookup", f"draft:{draft}", "layers:1", f"draft:{model}"]:
        r = run_loom(loom_bin, *base, "--spec", d, "--draft-max", "4")
        assert r.stdout == plain, d
        assert "speculation:" in r.stderr, d
    # A draft model identical to the target agrees with it everywhere.
    r = run_loom(loom_bin, *base, "--spec", f"draft:{model}")
    assert "(100.0%)" in r.stderr, r.stderr


def test_draft_of_another_vocabulary_is_refused_by_name(loom_bin, tiny):
    other = tiny / "other-vocab.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", other, "--vocab", "400")
    r = run_loom(loom_bin, "run", "-m", tiny / "tiny.gguf", "-p", "hello", "-n", "4", "--spec", f"draft:{other}",
                 check=False)
    assert r.returncode != 0
    assert "vocabulary of 400 tokens, the target has 512" in r.stderr, r.stderr
    for bad, what in [("layers:2", "between 1 and 1"), ("layers:x", "whole number"), ("nonsense", "unknown drafter")]:
        r = run_loom(loom_bin, "run", "-m", tiny / "tiny.gguf", "-p", "hello", "-n", "4", "--spec", bad, check=False)
        assert r.returncode != 0 and what in r.stderr, (bad, r.stderr)


def test_bench_spec_reports_speed_acceptance_and_identity(loom_bin, tiny):
    r = run_loom(loom_bin, "bench", "-m", tiny / "tiny.gguf", "--spec", "lookup,layers:1", "--prompt",
                 "a b c d a b c d a b c d a b", "-n", "32", "-r", "2", "--warmup", "0", "--json", "-q")
    out = json.loads(r.stdout)
    assert [a["drafter"] for a in out["arms"]] == ["plain", "lookup", "layers:1"]
    for arm in out["arms"]:
        assert arm["identical"] and arm["decode_tps"] > 0
    for arm in out["arms"][1:]:
        assert 0 <= arm["acceptance"] <= 1 and arm["mean_accepted_length"] >= 1 and "ratio" in arm
        assert arm["verify_steps"] >= 0
    # The replayable run (the prompt's and plain reply's ids) and the price of a drafted token:
    # a step of 1 .. draft_max + 2 rows (default draft max 7) timed against a 1-row step.
    assert len(out["reference_ids"]) == out["generated"] and len(out["prompt_ids"]) == out["prompt_tokens"]
    assert [v["rows"] for v in out["verify_step"]] == list(range(1, 10))
    assert out["verify_step"][0]["vs_one_row"] == 1 and all(v["ms"] > 0 for v in out["verify_step"])
