#include "runtime/spec/draft_gain.h"

#include <algorithm>

namespace loom::runtime::spec {

double verify_step_cost(int32_t rows) {
  // Median CPU time of 1..9-row steps relative to a 1-row step, one thread (2026-12-05).
  static constexpr double kCost[] = {1.0, 1.16, 1.47, 1.83, 2.34, 2.83, 3.19, 3.45, 3.95};
  constexpr int32_t kN = int32_t(sizeof kCost / sizeof kCost[0]);
  if (rows <= 1) return 1.0;
  if (rows <= kN) return kCost[rows - 1];
  return kCost[kN - 1] + 0.45 * double(rows - kN);
}

double StepCost::relative(int32_t rows) const {
  if (rows <= 1) return 1.0;
  const double one = mean_[0];
  if (one <= 0) return verify_step_cost(rows);
  if (rows > kRows) {
    return relative(kRows) + (verify_step_cost(rows) - verify_step_cost(kRows));
  }
  const double t = mean_[size_t(rows - 1)];
  return t > 0 ? t / one : verify_step_cost(rows);
}

void StepCost::record(int32_t rows, double seconds) {
  if (rows < 1 || rows > kRows || !(seconds > 0)) return;
  double& m = mean_[size_t(rows - 1)];
  if (m <= 0) {
    m = seconds;
    return;
  }
  m += 0.1 * (std::clamp(seconds, 0.5 * m, 2.0 * m) - m);
}

int32_t best_draft_length(std::span<const double> p_next, const StepCost& cost) {
  int32_t best_k = 0;
  double best = 1.0 / cost.relative(1);
  double all_accepted = 1.0, expected = 1.0;  // the target's own token is always emitted
  for (size_t i = 0; i < p_next.size(); ++i) {
    all_accepted *= p_next[i];
    expected += all_accepted;
    const double rate = expected / cost.relative(int32_t(i) + 2);
    if (rate > best) best = rate, best_k = int32_t(i) + 1;
  }
  return best_k;
}

}  // namespace loom::runtime::spec
