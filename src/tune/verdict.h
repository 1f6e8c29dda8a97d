// Running every gate on one candidate, in order of
// cost (build, structural, repeat-input, numerical, quality, then timing with its thread
// count, its audit and SLOs); the first failure decides, and the gates after it are recorded as not run.
#pragma once
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <vector>

#include "tune/arm.h"
#include "tune/contract.h"
#include "tune/gates.h"

namespace loom::tune {

struct GateInputs {
  std::vector<int> timing_lengths;                 // prompt lengths (tokens) of the timing prompts
  std::vector<std::vector<int32_t>> selection;     // selection texts, tokenized
  std::optional<Quality> baseline_quality;         // of the session baseline (null: no selection set)
  uint64_t seed = 1;                               // fresh inputs for this candidate
  // A script-timed workload (contract script.timing): the timing gate's pairs (current,
  // candidate) come from this instead of the engine's timed runs, which still feed the thread
  // and SLO gates. Throws when a run fails its gate.
  std::function<std::pair<std::vector<double>, std::vector<double>>()> script_timing;
};

struct Verdict {
  std::vector<GateResult> gates;
  bool keep = false;
  bool unscored = false;  // kept (or would be) without a quality signal
  std::optional<Quality> quality;
  std::vector<double> a_tps, b_tps;  // the timing gate's pairs (current, candidate)
  std::vector<Timed> candidate_runs;
  nlohmann::json to_json() const;
};

// Paired interleaved timing of two arms through bench::run_paired on fresh inputs per pair;
// `extra_threads` gets the most OS threads seen beyond `threads_before` while B ran.
struct PairedTiming {
  std::vector<double> a_tps, b_tps;
  std::vector<Timed> a_runs, b_runs;   // the timed pairs' runs (warm-up excluded)
  std::vector<double> a_wall_seconds, b_wall_seconds;  // each run as this caller's clock saw the call
  int extra_threads = 0;
};
PairedTiming time_pair(Arm& a, Arm& b, const Contract& c, const GateInputs& in, int pairs, int threads_before);

// Correctness and quality are held to the session baseline (so kept changes cannot drift away
// from it step by step); the timing decision is against the current program (the candidate
// must beat what is kept so far). `threads_before`: process_threads() just before the
// candidate's arm was opened.
Verdict judge(Arm& baseline, Arm& current, Arm& candidate, const Contract& c, const GateInputs& in, int threads_before);

}  // namespace loom::tune
