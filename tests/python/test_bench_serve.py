"""`loom bench serve` against a real `loom serve` on loopback: the report must agree with the
server's own truth (its usage and its Prometheus counters), the definitions must hold per request
(TTFT ≤ E2E, goodput ≤ throughput), and failures must be counted, not dropped: a server killed
mid-run, a port nobody listens on and a malformed URL each end in a clear error and a non-zero
exit. Small and bounded: a few requests of a few tokens each, a deadline on every run."""
import json
import re
import subprocess
import time

import pytest

from test_serve import MODEL_NAME, Server

class LoomServer(Server):
    """test_serve's server (4 sequences, 512 positions, 2 threads), with its URL and every
    Prometheus sample at once."""

    def __init__(self, loom_bin, model):
        super().__init__(loom_bin, model, "--parallel", "4", "-c", "512", "-t", "2")
        self.url = f"http://127.0.0.1:{self.port}"

    def metrics(self):
        _, body, _ = self.raw("GET", "/metrics", timeout=30)
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


@pytest.fixture(scope="module")
def server(loom_bin, smollm2):
    s = LoomServer(loom_bin, smollm2)
    yield s
    s.close()


def bench(loom_bin, *args, timeout=240):
    return subprocess.run([str(loom_bin), "bench", "serve", "-q", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


CHAT = '/v1/chat/completions'


def test_report_agrees_with_the_server(loom_bin, server):
    before = server.metrics()
    n, warmup, out_tokens = 6, 2, 8
    r = bench(loom_bin, "--url", server.url, "--json", "-n", n, "--warmup", warmup, "--concurrency", 3,
              "--prompt-words", "uniform:8:16", "--output-tokens", out_tokens, "--slo-ttft-ms", 120000,
              "--slo-tpot-ms", 60000, "--deadline", 200)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    after = server.metrics()

    assert rep["model"] == MODEL_NAME  # found through /v1/models
    assert rep["sent"] == rep["completed"] == n and rep["failed"] == 0 and rep["not_sent"] == 0
    assert rep["arrivals"] == {"kind": "closed-loop", "concurrency": 3}
    # Output tokens: the sum of the server's usage, which with ignore_eos is exactly max_tokens each.
    per = rep["per_request"]
    assert len(per) == n and all(p["ok"] for p in per)
    assert rep["output_tokens"] == sum(p["usage_completion_tokens"] for p in per) == n * out_tokens
    assert rep["output_tokens_source"] == "the server's usage"
    assert rep["prompt_tokens"] == sum(p["usage_prompt_tokens"] for p in per) > 0
    # The server's own counters saw the warm-up and the measured requests, every one a 200.
    ok = f'loom_requests_total{{endpoint="{CHAT}",status="200"}}'
    assert after[ok] - before.get(ok, 0) == n + warmup
    assert after["loom_generation_tokens_total"] - before.get("loom_generation_tokens_total", 0) == (n + warmup) * out_tokens
    # The definitions, per request and in aggregate.
    for p in per:
        assert 0 < p["ttft_ms"] <= p["e2e_ms"]
        assert p["tpot_ms"] == pytest.approx((p["e2e_ms"] - p["ttft_ms"]) / (out_tokens - 1))
        assert p["met_slo"] is True
    assert rep["ttft_ms"]["p50"] <= rep["ttft_ms"]["p95"] <= rep["ttft_ms"]["p99"] <= rep["ttft_ms"]["max"]
    assert rep["ttft_ms"]["max"] <= rep["e2e_ms"]["max"]
    assert rep["met_slo"] == n
    assert 0 < rep["goodput"] <= rep["request_throughput"]
    assert rep["request_throughput"] == pytest.approx(n / rep["duration_s"])
    assert rep["output_token_throughput"] == pytest.approx(n * out_tokens / rep["duration_s"])
    assert rep["itl_ms"]["n"] > 0
    assert rep["slo"] == {"ttft_ms": 120000, "tpot_ms": 60000}
    assert "every measured prompt distinct" in rep["prefix_cache"]


def test_poisson_text_report_and_an_slo_nobody_meets(loom_bin, server):
    r = bench(loom_bin, "--url", server.url + "/v1", "--rate", 20, "--seed", 3, "-n", 4, "--warmup", 1,
              "--output-tokens", 4, "--prompt-words", 6, "--system-words", 20, "--slo-ttft-ms", 0.001,
              "--endpoint", "completions", "--deadline", 200)
    assert r.returncode == 0, r.stderr
    assert "Poisson 20 req/s, seed 3" in r.stdout
    assert "sent 4, completed 4, failed 0" in r.stdout
    assert "20-word system prompt" in r.stdout
    assert re.search(r"goodput:\s+0\.00 req/s \(0 of 4 completed met TTFT ≤ 0\.001 ms\)", r.stdout), r.stdout
    for row in ("TTFT", "TPOT", "ITL", "E2E"):
        assert re.search(rf"^\s+{row}\s+\d", r.stdout, re.M), r.stdout


def test_nothing_listening_and_malformed_urls_are_clear_errors(loom_bin, tmp_path):
    import socket
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = bench(loom_bin, "--url", f"http://127.0.0.1:{port}", "-n", 2, timeout=60)
    assert r.returncode != 0
    assert "cannot connect" in r.stderr, r.stderr
    r = bench(loom_bin, "--url", "127.0.0.1:8080", "-n", 2, timeout=60)
    assert r.returncode != 0 and "--url '127.0.0.1:8080'" in r.stderr, r.stderr
    bad = tmp_path / "requests.jsonl"
    bad.write_text('{"prompt": "hi"}\n{"prompt": 5}\n')
    r = bench(loom_bin, "--url", f"http://127.0.0.1:{port}", "--model", "m", "--requests-file", bad, timeout=60)
    assert r.returncode != 0 and "requests.jsonl:2" in r.stderr, r.stderr


def test_server_killed_mid_run_counts_every_failure(loom_bin, smollm2):
    s = LoomServer(loom_bin, smollm2)
    try:
        n = 12
        p = subprocess.Popen([str(loom_bin), "bench", "serve", "-q", "--json", "--url", s.url, "-n", str(n),
                              "--warmup", "0", "--concurrency", "2", "--output-tokens", "48", "--deadline", "200"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        end = time.time() + 120
        while time.time() < end and s.metrics().get("loom_generation_tokens_total", 0) < 60:
            time.sleep(0.05)
        s.proc.kill()
        out, err = p.communicate(timeout=120)
    finally:
        s.close()
    assert p.returncode != 0
    assert "measured requests failed" in err, err
    rep = json.loads(out)  # the report is still written
    assert rep["failed"] > 0 and rep["completed"] >= 1
    assert rep["completed"] + rep["failed"] == rep["sent"] and rep["sent"] + rep["not_sent"] == n
    assert sum(e["count"] for e in rep["errors"]) == rep["failed"]
    assert len(rep["per_request"]) == rep["sent"]


def test_deadline_bounds_the_run(loom_bin, server):
    start = time.time()
    r = bench(loom_bin, "--url", server.url, "--json", "-n", 50, "--warmup", 0, "--concurrency", 2,
              "--output-tokens", 400, "--deadline", 3, timeout=60)
    took = time.time() - start
    assert r.returncode != 0 and "measured requests failed" in r.stderr, r.stderr
    rep = json.loads(r.stdout)
    assert took < 20  # the deadline, plus start-up and the cut replies' last bytes
    assert rep["not_sent"] > 0 and rep["sent"] + rep["not_sent"] == 50
    cut = [e for e in rep["errors"] if e["error"] == "cut off at the run's deadline"]
    assert cut and cut[0]["count"] >= 1
    assert rep["completed"] + rep["failed"] == rep["sent"]
