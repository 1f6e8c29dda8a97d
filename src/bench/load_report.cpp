#include "bench/load_report.h"

#include <fmt/format.h>

namespace bench {
namespace {

using nlohmann::json;

json ms(const Summary& s) {
  if (s.n == 0) return nullptr;
  return {{"n", s.n}, {"mean", s.mean * 1e3}, {"p50", s.p50 * 1e3}, {"p95", s.p95 * 1e3}, {"p99", s.p99 * 1e3},
          {"max", s.max * 1e3}};
}

std::string row(const char* name, const Summary& s) {
  if (s.n == 0) return fmt::format("  {:<5} -\n", name);
  return fmt::format("  {:<5} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f}\n", name, s.p50 * 1e3, s.p95 * 1e3, s.p99 * 1e3,
                     s.mean * 1e3);
}

std::string tokens_source(const LoadSummary& s) {
  if (s.tokens_from_chunks == 0) return "the server's usage";
  if (s.tokens_from_usage == 0) return "content chunks counted (the server sent no usage)";
  return fmt::format("the server's usage; {} requests without usage counted by content chunks", s.tokens_from_chunks);
}

}  // namespace

json report_json(const LoadSetup& setup, const LoadResult& run, const LoadSummary& s) {
  json arrivals = setup.arrivals.kind == Arrivals::Kind::closed_loop
                      ? json{{"kind", "closed-loop"}, {"concurrency", setup.arrivals.concurrency}}
                      : json{{"kind", "poisson"}, {"rate", setup.arrivals.rate}, {"seed", setup.arrivals.seed}};
  json slo = json::object();
  if (s.slo.ttft_s > 0) slo["ttft_ms"] = s.slo.ttft_s * 1e3;
  if (s.slo.tpot_s > 0) slo["tpot_ms"] = s.slo.tpot_s * 1e3;
  if (s.slo.e2e_s > 0) slo["e2e_ms"] = s.slo.e2e_s * 1e3;
  json errors = json::array();
  for (const auto& [e, n] : s.errors) errors.push_back({{"error", e}, {"count", n}});
  json each = json::array();  // in request order, for checks and plots
  for (const auto& t : run.timelines) {
    json r = {{"ok", t.ok}, {"sent_s", t.sent}, {"http_status", t.http_status}};
    if (t.ok) {
      const auto m = request_metrics(t);
      r.update({{"ttft_ms", m.ttft * 1e3},
                {"e2e_ms", m.e2e * 1e3},
                {"tpot_ms", m.tpot >= 0 ? json(m.tpot * 1e3) : json(nullptr)},
                {"output_tokens", m.output_tokens},
                {"usage_completion_tokens", t.usage_completion_tokens},
                {"usage_prompt_tokens", t.usage_prompt_tokens},
                {"content_chunks", t.content_times.size()},
                {"met_slo", s.slo.any() ? json(meets(m, s.slo)) : json(nullptr)}});
    } else {
      r["error"] = t.error;
    }
    each.push_back(r);
  }
  return {{"url", setup.url},
          {"model", setup.model},
          {"endpoint", setup.endpoint},
          {"requests", setup.requests},
          {"prefix_cache", setup.prefix_cache},
          {"arrivals", arrivals},
          {"warmup", {{"requests", setup.warmup}, {"sent", run.warmup_sent}, {"failed", run.warmup_failed}}},
          {"deadline_s", setup.deadline_s},
          {"sent", s.sent},
          {"completed", s.completed},
          {"failed", s.failed},
          {"not_sent", s.not_sent},
          {"errors", errors},
          {"duration_s", s.duration_s},
          {"output_tokens", s.output_tokens},
          {"prompt_tokens", s.prompt_tokens},
          {"output_tokens_source", tokens_source(s)},
          {"request_throughput", s.request_throughput},
          {"output_token_throughput", s.output_token_throughput},
          {"prompt_token_throughput", s.prompt_token_throughput},
          {"ttft_ms", ms(s.ttft)},
          {"tpot_ms", ms(s.tpot)},
          {"itl_ms", ms(s.itl)},
          {"e2e_ms", ms(s.e2e)},
          {"slo", slo},
          {"met_slo", s.met_slo},
          {"goodput", s.slo.any() ? json(s.goodput) : json(nullptr)},
          {"per_request", each}};
}

std::string report_text(const LoadSetup& setup, const LoadResult& run, const LoadSummary& s) {
  std::string o;
  o += fmt::format("server:    {} (model \"{}\", {})\n", setup.url, setup.model, setup.endpoint);
  o += fmt::format("requests:  {}\n", setup.requests);
  o += fmt::format("arrivals:  {}; {} warm-up requests first, not measured", setup.arrivals.str(), setup.warmup);
  if (run.warmup_failed) o += fmt::format(" ({} failed: {})", run.warmup_failed, run.warmup_error);
  o += fmt::format("\nprefix:    {}\n", setup.prefix_cache);
  o += fmt::format("\nsent {}, completed {}, failed {}, not sent (deadline {:g} s) {}\n", s.sent, s.completed, s.failed,
                   setup.deadline_s, s.not_sent);
  for (const auto& [e, n] : s.errors) o += fmt::format("  failed x{}: {}\n", n, e);
  o += fmt::format("duration {:.2f} s; prompt tokens {}, output tokens {} (from {})\n", s.duration_s, s.prompt_tokens,
                   s.output_tokens, tokens_source(s));
  o += fmt::format("throughput: {:.2f} req/s, {:.1f} output t/s, {:.1f} prompt t/s\n", s.request_throughput,
                   s.output_token_throughput, s.prompt_token_throughput);
  if (s.slo.any())
    o += fmt::format("goodput:    {:.2f} req/s ({} of {} completed met {})\n", s.goodput, s.met_slo, s.completed,
                     s.slo.str());
  else
    o += "goodput:    - (no SLO declared: --slo-ttft-ms, --slo-tpot-ms, --slo-e2e-ms)\n";
  o += fmt::format("\n  {:<5} {:>10} {:>10} {:>10} {:>10}\n", "ms", "P50", "P95", "P99", "mean");
  o += row("TTFT", s.ttft);
  o += row("TPOT", s.tpot);
  o += row("ITL", s.itl);
  o += row("E2E", s.e2e);
  return o;
}

}  // namespace bench
