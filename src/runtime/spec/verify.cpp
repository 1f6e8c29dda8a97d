#include "runtime/spec/verify.h"

#include <algorithm>

namespace loom::runtime::spec {

Verdict verify_draft(Sampler& sampler, std::span<const float> logits, int32_t draft) {
  if (sampler.params().temperature <= 0.0f) {
    const int32_t t = sampler.sample(logits);
    return {t, t == draft};
  }
  std::vector<Candidate> p = sampler.distribution(logits);
  const auto it = std::find_if(p.begin(), p.end(), [&](const Candidate& c) { return c.id == draft; });
  const double p_draft = it == p.end() ? 0.0 : double(it->p);
  if (sampler.uniform() < p_draft) return {draft, true};
  // Rejected: the residual max(0, p - onehot(d)) is p without d, of total 1 - p(d).
  if (it != p.end()) p.erase(it);
  if (p.empty()) return {draft, true};  // p(d) was 1 but for rounding
  double total = 0;
  for (const auto& c : p) total += c.p;
  return {sampler.draw(p, total), false};
}

}  // namespace loom::runtime::spec
