// Ceilings for a benchmark row: what the machine allows a model program at most.
//   decode: every matmul weight is read once per generated token (an embedding table
//           contributes the one row looked up), so tg <= read bandwidth / bytes per token;
//   prefill: 2 int8 operations (one multiply-add) per weight element per prompt token, so
//           pp <= int8 peak / operations per token. Only the matmuls up to the last attention
//           count: after it a prefill keeps the rows whose logits are wanted (one, in pp), so
//           the last layer's FFN and the output projection run once per prompt, not per token.
// Attention over the KV cache is left out of both: at the lengths benchmarked here it is a
// few percent of the weight traffic and arithmetic.
#pragma once
#include <cstdint>

#include "gguf/file.h"
#include "ir/module.h"

namespace bench {

struct Work {
  double decode_bytes = 0;  // weight bytes read per generated token
  double ops = 0;           // 2 x multiply-adds per prompt token in matmuls (see above)
};

// Sums over every matmul and embed op of `m` (all functions), weights resolved in `f`.
Work work_per_token(const ir::Module& m, const gguf::File& f);

// Int8 dot-product peak in GOPS (1 multiply-add = 2 ops) on `threads` threads: independent
// AVX-512 VNNI vpdpbusd chains (AVX2 vpmaddubsw+vpmaddwd where that is all there is), best of
// `reps` runs of ~0.1 s. 0 when the build has neither.
double measure_int8_peak_gops(int threads, int reps = 3);

}  // namespace bench
