// Loom's side of a benchmark: llama-bench's pp/tg definitions on a runtime::Session.
//   pp N: one prefill of N random tokens (in the session's n_batch chunks) after `depth`
//         untimed tokens, timed from the call to the last chunk's logits.
//   tg N: N single-token decodes after `depth` untimed tokens; every token timed.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/session.h"

namespace bench {

struct Sample {
  double seconds = 0;
  std::vector<double> token_seconds;  // tg only
};

Sample measure_pp(loom::runtime::Session& s, int n, int depth, uint64_t seed);
Sample measure_tg(loom::runtime::Session& s, int n, int depth, uint64_t seed);

}  // namespace bench
