// `loom bench serve --url URL`: measures an OpenAI-compatible server (loom serve, llama-server,
// any other) under load — seeded Poisson or closed-loop arrivals, synthetic or file requests,
// warm-up excluded — and reports TTFT, TPOT, ITL and E2E percentiles, request and token
// throughput and goodput under the declared SLOs (src/bench/load_*.h). Every request generates
// exactly its max_tokens (ignore_eos, temperature 0), so two servers do the same work.
#include "cli/bench_serve.h"

#include <cstdio>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "bench/load_report.h"
#include "common/error.h"

namespace loom::cli {
namespace {

struct ServeBenchArgs {
  std::string url, endpoint = "chat", model, api_key, requests_file, prompt_words = "42", output_tokens = "64",
                   prefix_cache_note;
  uint64_t seed = 1;
  size_t count = 48, warmup = 8;
  int system_words = 0, concurrency = 8;
  double rate = 0, deadline_s = 600, slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0;
  bool as_json = false, quiet = false, count_given = false;
};

std::string prefix_cache_state(const ServeBenchArgs& a, const std::vector<bench::RequestSpec>& reqs) {
  std::set<std::string> prompts;
  for (const auto& r : reqs) prompts.insert(r.prompt);
  std::string s = prompts.size() == reqs.size() ? "every measured prompt distinct"
                                                : fmt::format("{} distinct prompts among {} requests (repeats can be "
                                                              "served from a prefix cache)", prompts.size(), reqs.size());
  if (a.requests_file.empty())
    s += a.system_words > 0 ? fmt::format(", all sharing a {}-word system prompt (a cacheable prefix)", a.system_words)
                            : ", no shared prefix (random words from the first)";
  s += "; warm-up prompts are other draws";
  s += "; server: " + (a.prefix_cache_note.empty() ? std::string("its own default (not declared)") : a.prefix_cache_note);
  return s;
}

void run_serve_bench(const ServeBenchArgs& a) {
  if (a.endpoint != "chat" && a.endpoint != "completions")
    loom::fail("--endpoint '{}': chat or completions", a.endpoint);
  bench::LoadPlan plan;
  plan.target = bench::ServerTarget::parse_url(a.url);
  plan.target.api_key = a.api_key;
  plan.target.chat = a.endpoint == "chat";
  plan.target.model = a.model.empty() ? bench::first_model(plan.target) : a.model;

  bench::SyntheticSpec syn;
  syn.seed = a.seed;
  syn.prompt_words = bench::LengthDist::parse(a.prompt_words, "--prompt-words");
  syn.output_tokens = bench::LengthDist::parse(a.output_tokens, "--output-tokens");
  syn.system_words = a.system_words;
  std::string described;
  if (a.requests_file.empty()) {
    plan.requests = bench::synthetic_requests(syn, a.count);
    described = fmt::format("{} synthetic, seed {}: prompt words {}, output tokens {}{}", a.count, a.seed,
                            syn.prompt_words.str(), syn.output_tokens.str(),
                            a.system_words ? fmt::format(", shared system prompt of {} words", a.system_words) : "");
  } else {
    if (syn.output_tokens.kind != bench::LengthDist::Kind::fixed)
      loom::fail("--output-tokens: with --requests-file it is one count (the default max_tokens of each line)");
    plan.requests = bench::read_requests_jsonl(a.requests_file, int(syn.output_tokens.a));
    if (a.count_given) {
      if (a.count > plan.requests.size())
        loom::fail("--num-requests {}: {} holds only {} requests", a.count, a.requests_file, plan.requests.size());
      plan.requests.resize(a.count);
    }
    described = fmt::format("{} from {} (output tokens: each line's max_tokens, else {})", plan.requests.size(),
                            a.requests_file, syn.output_tokens.str());
  }
  described += "; max_tokens with ignore_eos, temperature 0";
  // Warm-up prompts are synthetic draws from indices no measured request uses.
  plan.warmup = bench::synthetic_requests(syn, a.warmup, uint64_t(1) << 32);
  if (a.rate > 0) {
    plan.arrivals.kind = bench::Arrivals::Kind::poisson;
    plan.arrivals.rate = a.rate;
    plan.arrivals.seed = a.seed;
    plan.warmup_concurrency = int(std::max<size_t>(1, a.warmup));
  } else {
    plan.arrivals.concurrency = a.concurrency;
    plan.warmup_concurrency = a.concurrency;
  }
  plan.deadline_s = a.deadline_s;
  if (!a.quiet)
    plan.progress = [](const char* phase, size_t done, size_t total) {
      std::fprintf(stderr, "\r\033[K%s: %zu/%zu requests finished", phase, done, total);
      std::fflush(stderr);
    };

  const auto run = bench::run_load(plan);
  if (!a.quiet) std::fprintf(stderr, "\r\033[K");
  bench::Slo slo{a.slo_ttft_ms / 1e3, a.slo_tpot_ms / 1e3, a.slo_e2e_ms / 1e3};
  const auto summary = bench::summarize_load(run.timelines, run.not_sent, slo);
  bench::LoadSetup setup{a.url,        plan.target.model, plan.target.endpoint(), described,
                         prefix_cache_state(a, plan.requests), plan.arrivals, a.warmup, a.deadline_s};
  if (a.as_json) std::printf("%s\n", bench::report_json(setup, run, summary).dump(2).c_str());
  else std::printf("%s", bench::report_text(setup, run, summary).c_str());
  std::fflush(stdout);
  if (summary.failed > 0)
    loom::fail("{} of {} measured requests failed (first: {})", summary.failed, summary.sent, summary.errors[0].first);
}

}  // namespace

CLI::App* add_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<ServeBenchArgs>();
  auto* c = bench.add_subcommand("serve", "Load-test an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput, goodput");
  c->add_option("--url", a->url, "the server, e.g. http://127.0.0.1:8080")->required();
  c->add_option("--endpoint", a->endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->capture_default_str();
  c->add_option("--model", a->model, "the request's model field (default: the first of GET /v1/models)");
  c->add_option("--api-key", a->api_key, "sent as Authorization: Bearer KEY");
  auto* n = c->add_option("-n,--num-requests", a->count, "measured requests")->capture_default_str()
                ->check(CLI::Range(size_t(1), size_t(100000)));
  c->add_option("--warmup", a->warmup, "warm-up requests sent first (closed-loop), not measured")->capture_default_str()
      ->check(CLI::Range(size_t(0), size_t(10000)));
  c->add_option("--concurrency", a->concurrency, "closed-loop: clients, each sending its next request when its last ends")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  c->add_option("--rate", a->rate, "open-loop instead: Poisson arrivals at this many requests per second (seeded)")
      ->check(CLI::PositiveNumber);
  c->add_option("--seed", a->seed, "seed of the synthetic requests and of the Poisson arrivals")->capture_default_str();
  c->add_option("--prompt-words", a->prompt_words, "synthetic prompt length in words (≈ tokens): N, uniform:A:B, normal:MEAN:SD")
      ->capture_default_str();
  c->add_option("--output-tokens", a->output_tokens, "max_tokens per request (ignore_eos): N, uniform:A:B, normal:MEAN:SD")
      ->capture_default_str();
  c->add_option("--system-words", a->system_words, "a system prompt of this many words shared by every request")
      ->capture_default_str()->check(CLI::Range(0, 1000000));
  c->add_option("--requests-file", a->requests_file,
                "JSONL requests instead: {\"prompt\": …} or {\"messages\": […]}, optional \"max_tokens\"");
  c->add_option("--prefix-cache", a->prefix_cache_note, "the server's prefix-cache setting, stated in the report");
  c->add_option("--deadline", a->deadline_s, "seconds the whole run may take; later requests are not sent, "
                "replies still streaming are cut off (failed)")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--slo-ttft-ms", a->slo_ttft_ms, "SLO: time to first token at most this")->check(CLI::PositiveNumber);
  c->add_option("--slo-tpot-ms", a->slo_tpot_ms, "SLO: time per output token at most this")->check(CLI::PositiveNumber);
  c->add_option("--slo-e2e-ms", a->slo_e2e_ms, "SLO: end-to-end latency at most this")->check(CLI::PositiveNumber);
  c->add_flag("--json", a->as_json, "machine-readable report");
  c->add_flag("-q,--quiet", a->quiet, "no progress line");
  c->callback([a, n] {
    a->count_given = n->count() > 0;
    run_serve_bench(*a);
  });
  return c;
}

}  // namespace loom::cli
