#include "runtime/spec/draft_gain.h"

namespace loom::runtime::spec {

double verify_step_cost(int32_t rows) {
  // Median CPU time of 1..9-row steps relative to a 1-row step, one thread (2026-12-05).
  static constexpr double kCost[] = {1.0, 1.16, 1.47, 1.83, 2.34, 2.83, 3.19, 3.45, 3.95};
  constexpr int32_t kN = int32_t(sizeof kCost / sizeof kCost[0]);
  if (rows <= 1) return 1.0;
  if (rows <= kN) return kCost[rows - 1];
  return kCost[kN - 1] + 0.45 * double(rows - kN);
}

int32_t best_draft_length(std::span<const double> p_next) {
  int32_t best_k = 0;
  double best = 1.0 / verify_step_cost(1);
  double all_accepted = 1.0, expected = 1.0;  // the target's own token is always emitted
  for (size_t i = 0; i < p_next.size(); ++i) {
    all_accepted *= p_next[i];
    expected += all_accepted;
    const double rate = expected / verify_step_cost(int32_t(i) + 2);
    if (rate > best) best = rate, best_k = int32_t(i) + 1;
  }
  return best_k;
}

}  // namespace loom::runtime::spec
