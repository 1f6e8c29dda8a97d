// Whether a draft pays, and how much of it: verifying k drafts costs a step of 1 + k rows, and
// on a CPU that is not the cost of a 1-row step — each row does its own multiply-adds over every
// weight, only the weight reads are shared. So a drafter that knows how likely each of its
// tokens is keeps the prefix k that maximises the expected tokens emitted per unit of step
// time, (1 + Σ_{i≤k} P(drafts 1..i all accepted)) / cost(1 + k), and drafts nothing when no k
// beats a plain step's 1 / cost(1).
//
// The costs are the engine's own (StepCost): it times its decode steps by row count, starting
// from the fast CPU backend's table, so another model (Gemma's rows are cheaper: its vocabulary
// makes the head dominate), machine or backend (a GPU, where rows are nearly free) drafts by
// what its steps cost there.
#pragma once
#include <array>
#include <cstdint>
#include <span>

namespace loom::runtime::spec {

// Time of a decode step of `rows` rows, all with logits, in units of a 1-row step, as measured
// on the fast CPU backend (2-core Zen 3, AVX2, SmolLM2-135M Q4_1, depth 200, one thread; `loom
// bench --spec` prints the same for the machine at hand): every row adds 0.3-0.5 of a step. A
// prior only: the engine's own timings replace it (since the AVX2 kernels take 5-12 rows in one
// pass, that host reads 1.96 for 5 rows and 2.63 for 8 with 2 threads). Beyond the table: +0.45 a row.
double verify_step_cost(int32_t rows);

// A running estimate of the step cost by row count: verify_step_cost until the engine has
// timed steps of 1 row and of `rows` rows, then the ratio of their running means. Each timing
// is first clamped to [1/2, 2] x the current mean, so a step the OS interrupted moves it little.
class StepCost {
 public:
  static constexpr int32_t kRows = 16;  // row counts tracked; beyond, the table's slope
  double relative(int32_t rows) const;
  void record(int32_t rows, double seconds);

 private:
  std::array<double, kRows> mean_{};  // seconds; 0: never timed
};

// The best number of leading drafts to verify, given p_next[i] = P(draft i + 1 is accepted |
// drafts 1..i were): 0 when drafting does not beat a plain step.
int32_t best_draft_length(std::span<const double> p_next, const StepCost& cost);

}  // namespace loom::runtime::spec
