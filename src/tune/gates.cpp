#include "tune/gates.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "tune/verdict.h"

namespace loom::tune {

using nlohmann::json;

Observation observe(Arm& arm, std::span<const int32_t> tokens) {
  const size_t n = tokens.size() * size_t(arm.vocab());
  Observation o;
  o.logits.assign(n, std::bit_cast<float>(kUnwrittenPoison));
  std::vector<int32_t> given(tokens.begin(), tokens.end());
  arm.logits(given, o.logits);
  o.input_mutated = !std::equal(given.begin(), given.end(), tokens.begin(), tokens.end());
  for (float v : o.logits) o.non_finite += !std::isfinite(v);
  return o;
}

std::vector<std::vector<int32_t>> fresh_inputs(uint64_t seed, int count, int length, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out(size_t(count), std::vector<int32_t>(size_t(length), 0));
  for (auto& v : out)
    for (auto& t : v) t = int32_t(rng() % uint64_t(vocab));
  return out;
}

GateResult structural_gate(const std::vector<Observation>& obs) {
  GateResult g{"structural"};
  size_t bad = 0, mutated = 0, total = 0;
  for (const auto& o : obs) {
    bad += o.non_finite;
    mutated += o.input_mutated;
    total += o.logits.size();
  }
  g.metrics = {{"outputs", total}, {"non_finite_or_unwritten", bad}, {"inputs_mutated", mutated}, {"calls", obs.size()}};
  g.passed = !obs.empty() && bad == 0 && mutated == 0;
  g.detail = obs.empty() ? "no observation (fails closed)"
             : g.passed ? fmt::format("{} outputs over {} calls, all written and finite; inputs intact", total, obs.size())
                        : fmt::format("{} outputs non-finite or never written (poison left), {} calls mutated their input",
                                      bad, mutated);
  return g;
}

GateResult repeat_input_gate(const Observation& x1, const Observation& y, const Observation& x2) {
  GateResult g{"repeat_input"};
  const bool same_x = x1.logits.size() == x2.logits.size() &&
                      std::memcmp(x1.logits.data(), x2.logits.data(), x1.logits.size() * sizeof(float)) == 0;
  const bool y_differs = y.logits.size() != x1.logits.size() ||
                         std::memcmp(y.logits.data(), x1.logits.data(), y.logits.size() * sizeof(float)) != 0;
  g.passed = same_x && y_differs;
  g.metrics = {{"repeat_identical", same_x}, {"other_input_differs", y_differs}};
  g.detail = g.passed ? "X, Y, X: X reproduced bit for bit, Y's output its own"
             : !same_x ? "the same input gave different outputs the second time (stale or partial buffers)"
                       : "a different input gave the previous input's output (stale output)";
  return g;
}

GateResult numerical_gate(const std::vector<Observation>& baseline, const std::vector<Observation>& candidate, double rtol,
                          double atol) {
  GateResult g{"numerical"};
  if (baseline.size() != candidate.size() || baseline.empty()) {
    g.detail = "no comparable outputs (fails closed)";
    return g;
  }
  double max_abs = 0;
  size_t violations = 0, total = 0;
  for (size_t i = 0; i < baseline.size(); ++i) {
    const auto& b = baseline[i].logits;
    const auto& c = candidate[i].logits;
    if (b.size() != c.size()) {
      g.detail = fmt::format("input {}: {} outputs vs baseline's {}", i, c.size(), b.size());
      return g;
    }
    for (size_t k = 0; k < b.size(); ++k) {
      const double d = std::fabs(double(c[k]) - double(b[k]));
      if (!(d <= atol + rtol * std::fabs(double(b[k])))) ++violations;  // NaN counts as a violation
      if (d > max_abs || std::isnan(d)) max_abs = std::isnan(d) ? INFINITY : d;
    }
    total += b.size();
  }
  g.passed = violations == 0;
  g.metrics = {{"max_abs_diff", std::isfinite(max_abs) ? json(max_abs) : json(nullptr)}, {"violations", violations},
               {"compared", total}, {"rtol", rtol}, {"atol", atol}};
  g.detail = fmt::format("{} of {} logits outside atol {} + rtol {} x |baseline|; max |diff| {:.3g}", violations, total,
                         atol, rtol, max_abs);
  return g;
}

Quality score_quality(Arm& arm, const std::vector<std::vector<int32_t>>& texts) {
  Quality q;
  double sum = 0;
  const size_t V = size_t(arm.vocab());
  for (const auto& t : texts) {
    const auto o = observe(arm, t);
    if (o.non_finite || o.input_mutated) loom::fail("quality: the program's outputs are not usable (structural failure)");
    for (size_t p = 0; p < t.size(); ++p) {
      const float* row = o.logits.data() + p * V;
      const float mx = *std::max_element(row, row + V);
      q.argmax.push_back(int32_t(std::max_element(row, row + V) - row));
      if (p + 1 == t.size()) break;
      double z = 0;
      for (size_t k = 0; k < V; ++k) z += std::exp(double(row[k]) - mx);
      sum += double(row[size_t(t[p + 1])]) - mx - std::log(z);
      ++q.tokens;
    }
  }
  q.mean_loglik = q.tokens ? sum / double(q.tokens) : 0;
  return q;
}

GateResult quality_gate(const std::optional<Quality>& baseline, const std::optional<Quality>& candidate, double drop,
                        bool allow_unscored) {
  GateResult g{"quality"};
  if (!baseline || !candidate || baseline->tokens == 0 || candidate->tokens == 0) {
    g.passed = allow_unscored;
    g.metrics = {{"scored", false}};
    g.detail = allow_unscored ? "no quality signal; the contract allows an unscored keep (counted)"
                              : "no quality signal (no selection texts): fails closed";
    return g;
  }
  size_t agree = 0;
  const size_t n = std::min(baseline->argmax.size(), candidate->argmax.size());
  for (size_t i = 0; i < n; ++i) agree += baseline->argmax[i] == candidate->argmax[i];
  const double agreement = n ? double(agree) / double(n) : 0;
  g.passed = candidate->mean_loglik >= baseline->mean_loglik - drop;
  g.metrics = {{"scored", true},
               {"baseline_mean_loglik", baseline->mean_loglik},
               {"candidate_mean_loglik", candidate->mean_loglik},
               {"greedy_agreement", agreement},
               {"tokens", candidate->tokens},
               {"allowed_drop", drop}};
  g.detail = fmt::format("mean log-likelihood {:.6f} vs baseline {:.6f} (allowed drop {}); greedy agreement {:.4f}",
                         candidate->mean_loglik, baseline->mean_loglik, drop, agreement);
  return g;
}

GateResult timing_gate(const std::vector<double>& a, const std::vector<double>& b, double min_gain, int min_pairs) {
  GateResult g{"timing"};
  if (a.size() != b.size() || int(a.size()) < min_pairs) {
    g.detail = fmt::format("{} pairs, at least {} needed (fails closed)", std::min(a.size(), b.size()), min_pairs);
    return g;
  }
  const auto r = bench::paired_ratio(a, b);
  g.passed = r.ci_lo > 1 + min_gain;
  g.metrics = {{"pairs", r.pairs}, {"ratio_median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}}, {"min_gain", min_gain},
               {"a_tps", a}, {"b_tps", b}};
  g.detail = fmt::format("speed ratio {:.4f} [{:.4f}, {:.4f}] over {} pairs; needs lower bound > {:.4f}", r.median,
                         r.ci_lo, r.ci_hi, r.pairs, 1 + min_gain);
  return g;
}

GateResult threads_gate(int declared, int arm_reported, int observed_extra) {
  GateResult g{"threads"};
  const int used = observed_extra + 1;  // the calling thread runs too
  g.passed = arm_reported == declared && used <= declared;
  g.metrics = {{"declared", declared}, {"reported", arm_reported}, {"observed", used}};
  g.detail = fmt::format("contract {} thread(s); the arm reports {}, {} observed while timed", declared, arm_reported, used);
  return g;
}

GateResult timing_audit_gate(const PairedTiming& t, double min_share, bool warm) {
  GateResult g{"timing_audit"};
  if (t.b_runs.empty() || t.b_runs.size() != t.b_wall_seconds.size() || t.a_runs.size() != t.a_wall_seconds.size()) {
    g.detail = "no timed runs with the caller's wall time (fails closed)";
    return g;
  }
  const auto unaccounted = [warm](const std::vector<Timed>& runs, const std::vector<double>& wall) {
    std::vector<double> u;
    for (size_t i = 0; i < runs.size(); ++i)
      u.push_back(std::max(0.0, wall[i] - runs[i].seconds() - (warm ? runs[i].untimed_seconds : 0.0)));
    return bench::quantile(u, 0.5);
  };
  const double wall_b = bench::quantile(t.b_wall_seconds, 0.5);
  const double overhead = t.a_runs.empty() ? 0.0 : unaccounted(t.a_runs, t.a_wall_seconds);
  const double hidden = std::max(0.0, unaccounted(t.b_runs, t.b_wall_seconds) - overhead);
  const double share = wall_b > 0 ? 1 - hidden / wall_b : 0.0;
  g.passed = share >= min_share;
  g.metrics = {{"runs", t.b_runs.size()}, {"wall_ms_median", wall_b * 1e3}, {"call_overhead_ms_median", overhead * 1e3},
               {"unaccounted_ms_median", hidden * 1e3}, {"reported_share", share}, {"min_share", min_share}};
  g.detail = fmt::format("the arm's own account covers {:.3f} of the wall time the caller measured (beyond the {:.3f} ms a "
                         "call of the current arm costs); needs {:.2f}{}",
                         share, overhead * 1e3, min_share, g.passed ? "" : ": time hidden outside its timed region");
  return g;
}

GateResult slo_gate(const Contract& c, const std::vector<Timed>& runs) {
  GateResult g{"slo"};
  std::vector<double> ttft, tpot;
  for (const auto& r : runs) {
    ttft.push_back(r.prefill_seconds * 1e3);
    if (r.generated_tokens > 0) tpot.push_back(r.decode_seconds * 1e3 / r.generated_tokens);
  }
  const json ttft_ms = ttft.empty() ? json(nullptr) : json(bench::quantile(ttft, 0.5));
  const json tpot_ms = tpot.empty() ? json(nullptr) : json(bench::quantile(tpot, 0.5));
  g.metrics = {{"ttft_ms_median", ttft_ms}, {"tpot_ms_median", tpot_ms},
               {"slo_ttft_ms", c.slo_ttft_ms ? json(*c.slo_ttft_ms) : json(nullptr)},
               {"slo_tpot_ms", c.slo_tpot_ms ? json(*c.slo_tpot_ms) : json(nullptr)}};
  g.passed = true;
  if (c.slo_ttft_ms) g.passed = g.passed && !ttft.empty() && ttft_ms.get<double>() <= *c.slo_ttft_ms;
  if (c.slo_tpot_ms) g.passed = g.passed && !tpot.empty() && tpot_ms.get<double>() <= *c.slo_tpot_ms;
  g.detail = !c.slo_ttft_ms && !c.slo_tpot_ms ? "no SLO declared"
             : g.passed                        ? "every declared SLO met"
                                               : "a declared SLO was missed (or not measurable)";
  return g;
}

int process_threads() {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

}  // namespace loom::tune
