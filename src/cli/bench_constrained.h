// `loom bench --json-schema FILE...`: the cost of structured output. Per schema: the time to
// compile it (median of the repetitions), then a greedy generation under it, reporting the
// mean time per token spent computing the mask, as a share of the unconstrained decode step
// measured on the same model, prompt and length in the same run (interleaved, per repetition).
#pragma once
#include <string>
#include <vector>

namespace loom::cli {

struct ConstrainedBenchArgs {
  std::string model, gguf;
  std::vector<std::string> schemas;
  int reps = 3, threads = 0, max_tokens = 128;
  bool as_json = false;
};

void bench_constrained(const ConstrainedBenchArgs& a);

}  // namespace loom::cli
