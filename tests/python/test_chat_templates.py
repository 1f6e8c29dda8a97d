"""Chat templates: Loom's Jinja interpreter against jinja2 in Hugging Face's configuration.

Every template in tests/data/templates/ renders every conversation in
tests/data/templates/conversations/, with and without add_generation_prompt, through
jinja2 (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with HF's
tojson, raise_exception, strftime_now and loopcontrols) and through `loom template`. The
two outputs must be byte-identical; where jinja2 raises, Loom must fail too. strftime_now
is pinned on both sides by LOOM_TEMPLATE_NOW."""
import datetime
import json
import os
import pathlib
import subprocess

import jinja2
import pytest
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import ROOT

TEMPLATES = ROOT / "tests" / "data" / "templates"
CONVERSATIONS = TEMPLATES / "conversations"
NOW = "2024-07-26T10:30:00"
BOS, EOS = "<s>", "</s>"


def hf_environment():
    """jinja2 set up as transformers' apply_chat_template sets it up."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    fixed = datetime.datetime.strptime(NOW, "%Y-%m-%dT%H:%M:%S")

    def strftime_now(fmt):
        return fixed.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def hf_render(source, conv, add_generation_prompt, bos=BOS, eos=EOS):
    extra = {k: v for k, v in conv.items() if k not in ("messages", "tools")}
    return hf_environment().from_string(source).render(
        messages=conv["messages"], tools=conv.get("tools"), documents=None,
        add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos, **extra)


def loom_render(loom_bin, conv_path, add_generation_prompt, template=None, model=None, bos=BOS, eos=EOS):
    args = [str(loom_bin), "template", "--messages", str(conv_path)]
    if template:
        args += ["--template", str(template), "--bos", bos, "--eos", eos]
    if model:
        args += ["-m", str(model)]
    if add_generation_prompt:
        args.append("--add-generation-prompt")
    env = dict(os.environ, LOOM_TEMPLATE_NOW=NOW)
    r = subprocess.run(args, capture_output=True, env=env)
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")


def compare(loom_bin, source, conv_path, agp, stats, **loom_kw):
    conv = json.loads(conv_path.read_text(encoding="utf-8"))
    bos, eos = loom_kw.get("bos", BOS), loom_kw.get("eos", EOS)
    try:
        want = hf_render(source, conv, agp, bos, eos)
        want_error = None
    except Exception as e:  # jinja2 refuses this combination: Loom must refuse it too
        want, want_error = None, f"{type(e).__name__}: {e}"
    rc, got, err = loom_render(loom_bin, conv_path, agp, **loom_kw)
    label = f"{loom_kw.get('template') or loom_kw.get('model')} × {conv_path.name} agp={agp}"
    stats["compared"] += 1
    if want_error is not None:
        stats["raised"] += 1
        if rc == 0:
            stats["mismatches"].append(f"{label}: jinja2 raised ({want_error}) but loom printed {got!r}")
        elif rc != 1 or "error" not in err:
            stats["mismatches"].append(f"{label}: loom failed badly (rc {rc}): {err}")
        return
    if rc != 0:
        stats["mismatches"].append(f"{label}: loom failed (rc {rc}): {err.strip()}")
    elif got != want:
        k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
        stats["mismatches"].append(
            f"{label}: differs at char {k}: jinja2 {want[max(0, k - 40):k + 40]!r} vs loom {got[max(0, k - 40):k + 40]!r}")


def template_files():
    return sorted(TEMPLATES.glob("*.jinja"))


def conversation_files():
    return sorted(CONVERSATIONS.glob("*.json"))


def report(stats, what):
    print(f"\n{what}: {stats['compared']} renderings compared ({stats['raised']} where jinja2 raises), "
          f"{len(stats['mismatches'])} mismatches")
    for m in stats["mismatches"]:
        print("  MISMATCH", m)


def test_enough_templates_and_conversations():
    assert len(template_files()) >= 27
    assert len(conversation_files()) >= 14


def test_every_template_every_conversation_matches_jinja2(loom_bin):
    stats = {"compared": 0, "raised": 0, "mismatches": []}
    for tpl in template_files():
        source = tpl.read_text(encoding="utf-8")
        for conv in conversation_files():
            for agp in (False, True):
                compare(loom_bin, source, conv, agp, stats, template=tpl)
    report(stats, "template files")
    assert stats["compared"] >= 27 * 14 * 2
    assert stats["compared"] > stats["raised"]
    assert not stats["mismatches"], "\n".join(stats["mismatches"])


def _gguf_template_and_tokens(path):
    import gguf

    r = gguf.GGUFReader(str(path))

    def field_str(f, i=None):
        idx = f.data[0] if i is None else f.data[i]
        return bytes(f.parts[idx]).decode("utf-8")

    tokens = r.fields["tokenizer.ggml.tokens"]
    bos = tokens and field_str(tokens, int(r.fields["tokenizer.ggml.bos_token_id"].parts[-1][0]))
    eos = tokens and field_str(tokens, int(r.fields["tokenizer.ggml.eos_token_id"].parts[-1][0]))
    tmpl = r.fields.get("tokenizer.chat_template")
    return (field_str(tmpl) if tmpl else None), bos, eos


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_real_models_through_their_gguf(loom_bin, which, request):
    """`loom template -m MODEL`: the GGUF's own template (SmolLM2) or the built-in for its
    architecture (Gemma 3 ships none), with the model's BOS/EOS strings."""
    model = request.getfixturevalue(which)
    source, bos, eos = _gguf_template_and_tokens(model)
    if which == "gemma3":
        assert source is None, "gemma-3-270m-it now carries a template; test it as a file instead"
        source = (TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8")
    stats = {"compared": 0, "raised": 0, "mismatches": []}
    for conv in conversation_files():
        for agp in (False, True):
            compare(loom_bin, source, conv, agp, stats, model=model, bos=bos, eos=eos)
    report(stats, which)
    assert not stats["mismatches"], "\n".join(stats["mismatches"])


def test_builtin_gemma3_is_the_stored_template():
    src = (ROOT / "src" / "text" / "chat_template.cpp").read_text(encoding="utf-8")
    start = src.index('R"TPL(') + len('R"TPL(')
    assert src[start:src.index(')TPL"')] == (TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8")
