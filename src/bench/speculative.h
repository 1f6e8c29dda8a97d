// Decode speed with and without speculative decoding, on a real prompt: one request through the
// engine (greedy unless told otherwise), its decode phase timed from the first token to the
// last (RequestStats::gen_seconds), with the request's acceptance figures. loom bench --spec
// interleaves the arms (plain, then each drafter) per repetition, as its other comparisons do.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/engine.h"

namespace bench {

struct GenerationSample {
  std::vector<int32_t> tokens;     // generated, the end token included
  loom::runtime::RequestStats stats;
  double decode_tps() const {      // tokens after the first, per second of decode
    return stats.gen_seconds > 0 && stats.generated > 1 ? (stats.generated - 1) / stats.gen_seconds : 0;
  }
};

// Throws loom::Error when the engine refuses the request or it ends in an error.
GenerationSample measure_generation(loom::runtime::Engine& e, const std::vector<int32_t>& prompt, int max_tokens,
                                    const loom::runtime::SamplerParams& sampling,
                                    const loom::runtime::spec::Speculation& speculation);

// Median seconds of one decode step of r rows, all with logits (a verify step of r - 1 drafts),
// after `context`, for r = 1..max_rows: the steps interleaved over `reps` rounds on one
// sequence rolled back after each, so every row count sees the same machine state.
std::vector<double> verify_step_seconds(loom::runtime::Engine& e, const std::vector<int32_t>& context, int max_rows,
                                        int reps);

}  // namespace bench
