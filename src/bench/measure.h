// Loom's side of a benchmark, on a runtime::Engine.
//   pp N: one prefill of N random tokens (in the engine's n_batch chunks) after `depth`
//         untimed tokens, timed from the call to the last chunk's logits (DirectSequence).
//   tg N: N single-token decodes after `depth` untimed tokens; every token timed.
//   parallel (llama-batched-bench's -npp PP -ntg TG -npl N): N requests of PP random prompt
//         tokens each, generating TG tokens each after the first (greedy, end tokens ignored),
//         through the engine's scheduler. The prompt phase lasts until every sequence has its
//         first token; the generation phase is the rest. With more prompt tokens than n_batch
//         the scheduler mixes the first decode tokens into the last prompt steps: those are
//         timed in the prompt phase and counted in neither.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/engine.h"

namespace bench {

struct Sample {
  double seconds = 0;
  std::vector<double> token_seconds;  // tg only
};

Sample measure_pp(loom::runtime::Engine& e, int n, int depth, uint64_t seed);
Sample measure_tg(loom::runtime::Engine& e, int n, int depth, uint64_t seed);

struct ParallelSample {
  double pp_seconds = 0, tg_seconds = 0;
  int64_t pp_tokens = 0, tg_tokens = 0;  // tokens evaluated in each phase
};

ParallelSample measure_parallel(loom::runtime::Engine& e, int n_seq, int pp, int tg, uint64_t seed);

}  // namespace bench
