// Ceilings for a benchmark row: what the machine allows a model program at most.
//   decode: every matmul weight is read once per generated token (an embedding table
//           contributes the one row looked up), so tg <= read bandwidth / bytes per token;
//   prefill: 2 int8 operations (one multiply-add) per weight element per prompt token, so
//           pp <= int8 peak / operations per token. Only the matmuls up to the last attention
//           count: after it a prefill keeps the rows whose logits are wanted (one, in pp), so
//           the last layer's FFN and the output projection run once per prompt, not per token.
// Decode also reads the KV cache: a token at position p reads, in every attention layer, the
// key and value rows of the positions it sees (p + 1, or the window), in the cache's element
// type. At depth 4096 on a 135M-class model that is as many bytes as the weights.
// The arithmetic of attention in prefill (f32, not int8) is not counted in the pp ceiling.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/kv_store.h"
#include "gguf/file.h"
#include "ir/module.h"

namespace bench {

struct KvLayerRead {
  double row_bytes = 0;  // one position's key + value rows in this layer
  int64_t window = 0;    // positions seen at most (0: all)
};

struct Work {
  double decode_bytes = 0;  // weight bytes read per generated token
  double ops = 0;           // 2 x multiply-adds per prompt token in matmuls (see above)
  std::vector<KvLayerRead> kv;  // per attention op

  // KV bytes read by the token at position `pos` (it sees positions 0..pos).
  double kv_bytes_at(int64_t pos) const;
  // Mean bytes (weights + KV) per token generating n tokens after `depth` cached ones.
  double decode_bytes_at(int64_t depth, int64_t n) const;
};

// Sums over every matmul, embed and attention op of `m` (all functions), weights resolved in
// `f`, KV rows of `kv_elem`.
Work work_per_token(const ir::Module& m, const gguf::File& f, loom::backend::KvElem kv_elem = loom::backend::KvElem::f16);

// Int8 dot-product peak in GOPS (1 multiply-add = 2 ops) on `threads` threads: the best of
// several instruction forms and chain counts (AVX-512 VNNI vpdpbusd on zmm and ymm, AVX-VNNI,
// AVX2 vpmaddubsw+vpmaddwd, with and without two products summed in s16 first), each with 4
// to 24 independent accumulator chains, so that no one core's port layout or latency makes
// the probe slower than a real kernel; best of
// `reps` runs of ~0.05 s each. 0 when the build has none of them.
double measure_int8_peak_gops(int threads, int reps = 3);

}  // namespace bench
