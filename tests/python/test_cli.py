"""`loom run`, `loom chat` and `loom bench` as a user runs them: one-request clients of the
engine (runtime::Engine).

- run: greedy output on SmolLM2 equals llama.cpp's greedy continuation of the same prompt
  (the reference backend computes as llama.cpp's plain kernels do, bit for bit); the fast
  backend is deterministic and honours the token limit.
- chat: driven through a pseudo-terminal for two turns; the second turn's verbose line must
  report prompt tokens re-used from the cache (the engine's prefix cache holds turn one).
- bench: small -p/-n with --json parses; --parallel runs N sequences at once.
A missing model or oracle package is a failure (conftest), never a skip.
"""
import json
import os
import pathlib
import pty
import re
import select
import subprocess
import sys
import time

from conftest import run_loom

PROMPT = "The capital of France is"
SPEED = re.compile(r"generation: (\d+) tokens")


def llama_greedy(path, prompt, n):
    import llama_cpp  # the oracle; an ImportError fails the test

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, verbose=False)
    toks = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    out = []
    for t in llm.generate(toks, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, t) or len(out) == n:
            break
        out.append(t)
    return llm.detokenize(out).decode("utf-8", errors="replace"), len(out)


def loom_run(loom_bin, model, *extra):
    r = run_loom(loom_bin, "run", "-m", model, "-p", PROMPT, *extra)
    assert r.stdout.startswith(PROMPT), r.stdout  # the prompt is echoed, as llama-cli does
    m = SPEED.search(r.stderr)
    assert m, r.stderr
    return r.stdout[len(PROMPT):].removesuffix("\n"), int(m.group(1))


def test_run_greedy_equals_llama_cpp(loom_bin, smollm2):
    want, n = llama_greedy(smollm2, PROMPT, 16)
    got, generated = loom_run(loom_bin, smollm2, "-n", "16", "--temp", "0", "--backend", "cpu-ref")
    assert got == want
    assert generated == n or generated == n + 1  # + the end token, when llama.cpp stopped at one


def test_run_is_deterministic_and_honours_the_limit(loom_bin, smollm2):
    a = loom_run(loom_bin, smollm2, "-n", "12", "--seed", "7", "--temp", "0.8")
    b = loom_run(loom_bin, smollm2, "-n", "12", "--seed", "7", "--temp", "0.8")
    assert a == b
    assert a[1] <= 12
    text, n = loom_run(loom_bin, smollm2, "-n", "5", "--temp", "0")
    assert n == 5, text  # this prompt does not end within 5 tokens


def test_device_picks_the_backend_and_no_gpu_is_a_clear_error(loom_bin, smollm2):
    # --device is --backend's other spelling: the same greedy output on the CPU either way.
    assert loom_run(loom_bin, smollm2, "-n", "6", "--temp", "0", "--device", "cpu") == \
        loom_run(loom_bin, smollm2, "-n", "6", "--temp", "0", "--backend", "cpu")
    for verb in (["run", "-p", PROMPT, "-n", "2"], ["bench", "-p", "8", "-n", "2", "-r", "1"]):
        r = run_loom(loom_bin, verb[0], "-m", smollm2, *verb[1:], "--device", "cuda", check=False)
        if os.path.exists("/dev/nvidia0"):  # a GPU machine runs it
            assert r.returncode == 0, r.stderr
            continue
        # Without a GPU (or without CUDA in the build): an error naming why, not a crash.
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert re.search(r"no CUDA device is visible|this build has no CUDA backend", r.stderr), r.stderr
    r = run_loom(loom_bin, "run", "-m", smollm2, "-p", PROMPT, "--device", "gpu", check=False)
    assert r.returncode == 1 and 'unknown backend "gpu" (known: cpu, cpu-ref' in r.stderr, r.stderr


def _read_until(fd, pattern, timeout, buf):
    """Reads the pty into buf until `pattern` matches the text after what was matched before."""
    end = time.time() + timeout
    while time.time() < end:
        m = re.search(pattern, buf[0][buf[1]:])
        if m:
            buf[1] += m.end()
            return m
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf[0] += chunk.decode("utf-8", errors="replace")
    raise AssertionError(f"no {pattern!r} within {timeout} s; output so far:\n{buf[0]}")


def test_chat_two_turns_reuse_the_cache(loom_bin, smollm2):
    pid, fd = pty.fork()
    if pid == 0:  # child: loom chat on the terminal
        os.execv(str(loom_bin), [str(loom_bin), "chat", "-m", str(smollm2), "-n", "24", "--temp", "0", "-v"])
    buf = ["", 0]
    try:
        line = r"\[prompt: (\d+) tokens.*?; (\d+) prompt tokens re-used from the cache"
        _read_until(fd, r"\n> ", 120, buf)
        os.write(fd, b"What is the capital of France?\n")
        first = _read_until(fd, line, 300, buf)
        _read_until(fd, r"\n> ", 60, buf)
        os.write(fd, b"And of Italy?\n")
        second = _read_until(fd, line, 300, buf)
        assert int(first.group(2)) == 0
        assert int(second.group(2)) > 0, buf[0]  # turn one's full blocks came from the prefix cache
        os.write(fd, b"/exit\n")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.waitstatus_to_exitcode(status) == 0, buf[0]
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def test_bench_json_and_parallel(loom_bin, tmp_path):
    model = tmp_path / "tiny.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", model)
    r = run_loom(loom_bin, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "2", "--warmup", "0", "--json", "-q")
    out = json.loads(r.stdout)
    assert [t["test"] for t in out["tests"]] == ["pp16", "tg8"]
    assert all(t["loom_tps"]["median"] > 0 and t["loom_tps"]["n"] == 2 for t in out["tests"])
    r = run_loom(loom_bin, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "1", "--warmup", "0", "--json", "-q",
                 "--parallel", "1,4")
    out = json.loads(r.stdout)
    tests = out["tests"]
    assert [(t["sequences"], t["pp"], t["tg"]) for t in tests] == [(1, 16, 8), (4, 16, 8)]
    assert all(t["loom_tps"]["median"] > 0 and t["loom_pp_tps"]["median"] > 0 for t in tests)
    bad = run_loom(loom_bin, "bench", "-m", model, "--parallel", "2", "-d", "8", check=False)
    assert bad.returncode != 0 and "--parallel" in bad.stderr
    # --ceiling: the decode row's bytes a token against the memory's measured rate, and what
    # loom achieved of it (the median rate times those bytes).
    r = run_loom(loom_bin, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "2", "--warmup", "0", "--json", "-q",
                 "--ceiling", "-d", "32")
    out = json.loads(r.stdout)
    c = out["ceiling"]
    [tg] = c["tg"]
    med = next(t for t in out["tests"] if t["test"] == "tg8")["loom_tps"]["median"]
    assert c["bandwidth"] == "host read" and c["read_bandwidth_gbs"] > 0 and c["pp_tps"] > 0
    assert tg["bytes_per_token"] > c["decode_bytes_per_token"] and tg["kv_bytes_per_token"] > 0  # depth 32: KV read
    assert abs(tg["loom_achieved_gbs"] - med * tg["bytes_per_token"] / 1e9) <= 1e-9 * tg["loom_achieved_gbs"]
    assert abs(tg["loom_of_ceiling"] - med / tg["tps"]) <= 1e-9 * tg["loom_of_ceiling"]
    # gpu-check's table line for such a file (scripts/bench_row.py), so a GPU call never finds it broken.
    (tmp_path / "bench.json").write_text(r.stdout)
    row = subprocess.run([sys.executable, pathlib.Path(__file__).parents[2] / "scripts" / "bench_row.py",
                          tmp_path / "bench.json"], capture_output=True, text=True, check=True).stdout
    assert re.search(r"^pp16@d32 [\d.]+ t/s tg8@d32 [\d.]+ t/s \[\d+ GB/s, \d+% of the \d+ GB/s read\] peak RSS", row), row


def test_context_past_the_trained_one(loom_bin, tmp_path):
    """The program bounds positions (dim P); `loom port --ctx N` writes another bound, a GGUF run
    asked for more than its trained context is ported for it (with a warning, as llama.cpp
    allows it), and an engine asked for more than a .loom program holds is refused by name."""
    model = tmp_path / "tiny.gguf"
    run_loom(loom_bin, "synth", "tiny-llama", model)  # trained context 256
    prog = tmp_path / "tiny.loom"
    run_loom(loom_bin, "port", model, "-o", prog, "--ctx", 1024)
    text = prog.read_text()
    assert "dim P in [0, 1024]" in text and "kv.n_ctx = 1024" in text, text[:600]
    assert "dim P in [0, 256]" in run_loom(loom_bin, "port", model).stdout
    # The .loom program holds 1024 positions: a bench at depth 600 runs, 2000 is refused.
    r = run_loom(loom_bin, "bench", "-m", prog, "-p", "0", "-n", "4", "-d", "600", "-r", "1", "--warmup", "0",
                 "--json", "-q")
    assert json.loads(r.stdout)["tests"][0]["loom_tps"]["median"] > 0
    bad = run_loom(loom_bin, "bench", "-m", prog, "-p", "0", "-n", "4", "-d", "2000", "-r", "1", check=False)
    assert bad.returncode != 0 and "dim P in [0, 1024]" in bad.stderr and "--ctx" in bad.stderr, bad.stderr
    # The GGUF itself is ported for what the bench needs, past its 256 trained positions.
    r = run_loom(loom_bin, "bench", "-m", model, "-p", "0", "-n", "4", "-d", "400", "-r", "1", "--warmup", "0",
                 "--json", "-q")
    assert json.loads(r.stdout)["tests"][0]["loom_tps"]["median"] > 0
    assert "trained on 256 positions" in r.stderr
