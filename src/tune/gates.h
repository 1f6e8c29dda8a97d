// The gates a candidate must pass, each a pure decision over what was observed, so that every
// decision can be tested with the observation in hand (a cheating arm, injected timings).
// Any failed gate reverts the candidate; a gate that could not be evaluated fails closed.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "tune/arm.h"
#include "tune/contract.h"

namespace loom::tune {

struct GateResult {
  std::string name;
  bool passed = false;
  std::string detail{};  // default-initialized: GateResult{"name"} leaves it empty without a warning
  nlohmann::json metrics = nlohmann::json::object();
  nlohmann::json to_json() const { return {{"gate", name}, {"passed", passed}, {"detail", detail}, {"metrics", metrics}}; }
};

// A quiet NaN with a payload no computation produces: left in an output buffer, it means "never
// written". observe() fills the caller's buffer with it; a child arm fills its own the same way.
inline constexpr uint32_t kUnwrittenPoison = 0x7fc0dead;

// One call of Arm::logits under guard: the output buffer is filled with a NaN poison first and
// the input handed over in a buffer the gate checks afterwards.
struct Observation {
  std::vector<float> logits;
  size_t non_finite = 0;   // NaN (including poison never overwritten) or Inf
  bool input_mutated = false;
};
Observation observe(Arm& arm, std::span<const int32_t> tokens);

// Fresh inputs: `count` random token sequences of `length` ids below `vocab`, from `seed`.
std::vector<std::vector<int32_t>> fresh_inputs(uint64_t seed, int count, int length, int64_t vocab);

// Structural: every output element written and finite, inputs untouched.
GateResult structural_gate(const std::vector<Observation>& obs);
// Repeat-input: inputs X, Y, X in that order; the second X must equal the first bit for bit and
// Y's output must differ from X's (stale buffers, an output returned for the wrong input).
GateResult repeat_input_gate(const Observation& x1, const Observation& y, const Observation& x2);
// Numerical: |candidate - baseline| <= atol + rtol * |baseline| for every logit.
GateResult numerical_gate(const std::vector<Observation>& baseline, const std::vector<Observation>& candidate,
                          double rtol, double atol);

// Selection-set quality of one program: mean log-likelihood per predicted token over the
// texts (teacher-forced) and the argmax at each position (for greedy agreement).
struct Quality {
  double mean_loglik = 0;
  size_t tokens = 0;
  std::vector<int32_t> argmax;
};
Quality score_quality(Arm& arm, const std::vector<std::vector<int32_t>>& texts);
// Candidate quality >= baseline - drop; no texts: no signal, which fails unless allowed
// (the caller counts an allowed unscored keep).
GateResult quality_gate(const std::optional<Quality>& baseline, const std::optional<Quality>& candidate, double drop,
                        bool allow_unscored);

// Timing: rates per pair (tokens/s, A = current, B = candidate); passes when there are at
// least `min_pairs` pairs and the paired bootstrap CI's lower bound of B/A exceeds 1 + min_gain.
GateResult timing_gate(const std::vector<double>& a, const std::vector<double>& b, double min_gain, int min_pairs);
// Threads: the candidate may run on at most `declared` threads (the caller thread included);
// `observed_extra` is the most OS threads seen beyond those alive before its arm opened.
GateResult threads_gate(int declared, int arm_reported, int observed_extra);
// Timing audit: each timed run's own account (its timed region, plus the untimed prefix when
// `warm`: a cold run has nothing legitimate outside its timed region) against the wall time the
// caller measured around the call. The current arm (A) of the same pairs
// shows what calling costs beyond the account (an out-of-process arm's round trip); what the
// candidate (B) leaves unaccounted beyond that, as a share of its wall time (medians), may be
// at most 1 - `min_share`. A run that reports less than it took (work deferred or hidden
// outside its timed region, a child process that under-reports) fails; no runs fail closed.
struct PairedTiming;
GateResult timing_audit_gate(const PairedTiming& t, double min_share, bool warm);
// SLOs on the candidate's timed runs: median TTFT and TPOT against the contract (none: pass).
GateResult slo_gate(const Contract& c, const std::vector<Timed>& runs);

// Threads of this process now (/proc/self/task).
int process_threads();

}  // namespace loom::tune
