// The inner kernels of the fast backend's attention (attention.cpp drives them): the scores of
// a run of cached key rows against a set of query vectors, and the weighted sum of a run of
// cached value rows. The SIMD levels (AVX-512, AVX2) sit beside scalar references that take
// the same arguments; tests/backend_fast/attention_kernels_test.cpp compares them.
//
// Numerical contract. A score is the fp32 dot product q_h · k_i over the head's hd elements,
// and an output element is acc + Σ_i w_i v_i over the head's active keys, each evaluated in
// fp32 in one fixed order (element conversions f16 → f32 and q8_0 → f32 are exact). The error
// of any such order against the exact value is at most γ_n · Σ|terms|, γ_n = n·u / (1 − n·u),
// u = 2^-24, n the number of terms (Higham, "Accuracy and Stability of Numerical Algorithms",
// 2nd ed., §3.1, eq. 3.5; an FMA only removes roundings), so two evaluations differ by at most
// twice that. The order of a score depends only on (q_h, k_i) and that of an output element
// only on its head's weights and the values, ascending in i: never on how many heads or keys
// share the call, which is what keeps the backend batch-invariant.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/kv_store.h"

namespace loom::backend::cpu::fast {

// One call's view: `heads` query vectors (rows × query heads of one kv head) over one kv head.
struct AttentionGeometry {
  KvElem elem;
  int64_t hd, vd, heads;
  size_t k_stride, v_stride;  // bytes per cached row
  float score_scale = 1.f;    // scores come out as (q · k) * score_scale: one rounding after the sum
};

// Each head's active keys within a run of `count` rows: [from[h], to[h]), 0 ≤ from ≤ to ≤ count.
struct HeadRanges {
  const int32_t* from;
  const int32_t* to;
};

// sc[h * ld + i] = (q_h · k_i) * score_scale for the run's `count` key rows (row i at rows + i * stride, the
// head's first byte); q: `heads` vectors of hd floats. row: scratch of hd floats.
void scores_run(const AttentionGeometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                float* sc, int64_t ld, float* row);
// acc[h * vd + c] += Σ_{i in [from[h], to[h])} w[h * ld + i] v_i[c], in ascending i; a key
// outside a head's range leaves its accumulators untouched. row: scratch of vd floats.
void values_run(const AttentionGeometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w,
                int64_t ld, float* acc, float* row, HeadRanges r);

// A decode task's tile over whole cached rows, which hold `kv_heads` kv heads side by side
// (head g's elements at byte kv_row_bytes(elem, g · hd) of a row, hd or vd wide): for each g,
// exactly what scores_run / values_run compute for that kv head alone, with G.heads query
// heads per kv head and q advanced by G.heads · hd floats per kv head, sc and w by
// G.heads · ld, acc by acc_stride. The ranges r (G.heads entries) hold for every kv head.
// One call instead of one per kv head: the same arithmetic per score and output element, so
// the same bits.
void scores_rows(const AttentionGeometry& G, int64_t kv_heads, const float* q, const uint8_t* rows, size_t stride,
                 int64_t count, float* sc, int64_t ld, float* row);
void values_rows(const AttentionGeometry& G, int64_t kv_heads, const uint8_t* rows, size_t stride, int64_t count,
                 const float* w, int64_t ld, float* acc, int64_t acc_stride, float* row, HeadRanges r);

// The scalar references (every build, every head width): the same results to the contract above.
void scores_scalar(const AttentionGeometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                   float* sc, int64_t ld, float* row);
void values_scalar(const AttentionGeometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w,
                   int64_t ld, float* acc, float* row, HeadRanges r);

}  // namespace loom::backend::cpu::fast
