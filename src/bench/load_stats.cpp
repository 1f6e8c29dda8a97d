#include "bench/load_stats.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace bench {

std::string Slo::str() const {
  std::vector<std::string> parts;
  if (ttft_s > 0) parts.push_back(fmt::format("TTFT ≤ {:g} ms", ttft_s * 1e3));
  if (tpot_s > 0) parts.push_back(fmt::format("TPOT ≤ {:g} ms", tpot_s * 1e3));
  if (e2e_s > 0) parts.push_back(fmt::format("E2E ≤ {:g} ms", e2e_s * 1e3));
  if (parts.empty()) return "none declared";
  std::string s = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) s += ", " + parts[i];
  return s;
}

RequestMetrics request_metrics(const RequestTimeline& t) {
  RequestMetrics m;
  m.ttft = t.first_content - t.sent;
  m.e2e = t.last_byte - t.sent;
  m.tokens_from_usage = t.usage_completion_tokens >= 0;
  m.output_tokens = m.tokens_from_usage ? t.usage_completion_tokens : int64_t(t.content_times.size());
  m.prompt_tokens = t.usage_prompt_tokens;
  if (m.output_tokens > 1) m.tpot = (m.e2e - m.ttft) / double(m.output_tokens - 1);
  for (size_t i = 1; i < t.content_times.size(); ++i) m.itl.push_back(t.content_times[i] - t.content_times[i - 1]);
  return m;
}

bool meets(const RequestMetrics& m, const Slo& slo) {
  if (slo.ttft_s > 0 && m.ttft > slo.ttft_s) return false;
  if (slo.tpot_s > 0 && m.tpot >= 0 && m.tpot > slo.tpot_s) return false;
  if (slo.e2e_s > 0 && m.e2e > slo.e2e_s) return false;
  return true;
}

LoadSummary summarize_load(const std::vector<RequestTimeline>& timelines, size_t not_sent, const Slo& slo) {
  LoadSummary s;
  s.slo = slo;
  s.not_sent = not_sent;
  s.sent = timelines.size();
  std::map<std::string, size_t> errors;
  std::vector<double> ttft, tpot, itl, e2e;
  double first = 0, last = 0;
  for (size_t i = 0; i < timelines.size(); ++i) {
    const auto& t = timelines[i];
    first = i == 0 ? t.sent : std::min(first, t.sent);
    last = i == 0 ? t.last_byte : std::max(last, t.last_byte);
    if (!t.ok) {
      ++s.failed;
      ++errors[t.error];
      continue;
    }
    ++s.completed;
    const auto m = request_metrics(t);
    (m.tokens_from_usage ? s.tokens_from_usage : s.tokens_from_chunks)++;
    s.output_tokens += m.output_tokens;
    if (m.prompt_tokens > 0) s.prompt_tokens += m.prompt_tokens;
    ttft.push_back(m.ttft);
    e2e.push_back(m.e2e);
    if (m.tpot >= 0) tpot.push_back(m.tpot);
    itl.insert(itl.end(), m.itl.begin(), m.itl.end());
    if (slo.any() && meets(m, slo)) ++s.met_slo;
  }
  for (const auto& [e, n] : errors) s.errors.emplace_back(e, n);
  std::sort(s.errors.begin(), s.errors.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  s.duration_s = std::max(0.0, last - first);
  if (s.duration_s > 0) {
    s.request_throughput = double(s.completed) / s.duration_s;
    s.output_token_throughput = double(s.output_tokens) / s.duration_s;
    s.prompt_token_throughput = double(s.prompt_tokens) / s.duration_s;
    s.goodput = double(s.met_slo) / s.duration_s;
  }
  s.ttft = summarize(ttft);
  s.tpot = summarize(tpot);
  s.itl = summarize(itl);
  s.e2e = summarize(e2e);
  return s;
}

}  // namespace bench
