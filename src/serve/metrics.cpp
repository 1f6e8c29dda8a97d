#include "serve/metrics.h"

#include <fmt/format.h>

namespace loom::serve {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, n_, name, sum_, name, n_);
}

Metrics::Metrics()
    : ttft_({0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      tpot_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lk(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::tokens(int64_t prompt, int64_t generated, int64_t reused) {
  std::lock_guard lk(mu_);
  prompt_ += uint64_t(prompt);
  generated_ += uint64_t(generated);
  reused_ += uint64_t(reused);
}

void Metrics::latency(double ttft, double tpot, double e2e) {
  std::lock_guard lk(mu_);
  ttft_.observe(ttft);
  if (tpot >= 0) tpot_.observe(tpot);
  e2e_.observe(e2e);
}

void Metrics::engine(const EngineGauges& g) {
  std::lock_guard lk(mu_);
  gauges_ = g;
}

void Metrics::cancelled() {
  std::lock_guard lk(mu_);
  ++cancelled_;
}

void Metrics::speculation(int64_t drafted, int64_t accepted, int64_t steps) {
  std::lock_guard lk(mu_);
  drafted_ += uint64_t(drafted);
  accepted_ += uint64_t(accepted);
  verify_steps_ += uint64_t(steps);
}

std::string Metrics::text() const {
  std::lock_guard lk(mu_);
  std::string o;
  o += "# HELP loom_requests_total HTTP requests answered, by endpoint and status.\n# TYPE loom_requests_total counter\n";
  for (const auto& [k, n] : requests_) o += fmt::format("loom_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    o += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    o += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("loom_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_);
  counter("loom_generation_tokens_total", "Tokens generated.", generated_);
  counter("loom_prefix_cache_hit_tokens_total", "Prompt tokens whose KV came from the prefix cache.", reused_);
  counter("loom_requests_cancelled_total", "Requests cancelled (client gone, timeout, drain).", cancelled_);
  // Speculative decoding: acceptance rate = accepted / draft; mean tokens per verifying step =
  // 1 + accepted / verify steps.
  counter("loom_spec_draft_tokens_total", "Draft tokens verified (speculative decoding).", drafted_);
  counter("loom_spec_accepted_tokens_total", "Draft tokens accepted.", accepted_);
  counter("loom_spec_verify_steps_total", "Steps that verified a draft.", verify_steps_);
  gauge("loom_queue_depth", "Requests waiting for admission.", gauges_.waiting);
  gauge("loom_running_sequences", "Sequences in the engine's steps.", gauges_.running);
  gauge("loom_kv_blocks_in_use", "KV blocks referenced by running sequences.", gauges_.blocks_in_use);
  gauge("loom_kv_blocks_cached", "KV blocks kept for prefix re-use only.", gauges_.blocks_cached);
  gauge("loom_kv_blocks_free", "KV blocks neither in use nor cached.",
        gauges_.blocks_total - gauges_.blocks_in_use - gauges_.blocks_cached);
  ttft_.write(o, "loom_ttft_seconds", "Request received to first token.");
  tpot_.write(o, "loom_tpot_seconds", "Time per output token after the first.");
  e2e_.write(o, "loom_e2e_seconds", "Request received to last token.");
  return o;
}

}  // namespace loom::serve
