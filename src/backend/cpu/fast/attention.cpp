// Causal grouped-query attention of the fast backend, with the reference's semantics
// (reference_attention.cpp): s_j = q·k_j, soft-capped when softcap > 0, times scale; softmax
// over the keys of the query's sequence at positions p ≤ q (and q - p < window when window >
// 0); out = Σ w_j v_j. This step's keys and values are written into the cache first.
//
// One kernel for every step, prefill chunks and decode tokens alike, and batch-invariant: a
// row's result is the same bits whichever rows share its step (a request served alone or in a
// batch, its prompt in one chunk or several, after a prefix-cache hit or not). Every choice
// that could change a row's arithmetic depends only on the row's own position:
//   - the KV range is cut into chunks at multiples of `chunk` absolute positions (split-K);
//   - pass 1, per chunk: scores s_j = q·k_j (softcapped, scaled), the chunk's max m_c and
//     l_c = Σ exp(s_j - m_c) over the row's part of the chunk;
//   - pass 2, per chunk: M = max_c m_c, S = Σ_c l_c·exp(m_c - M) over the row's chunks in order,
//     w_j = exp(s_j - M) / S (rounded to f16 with an f16 cache, as llama.cpp rounds the
//     normalized weights), and the chunk's partial Σ w_j v_j in ascending j;
//   - merge: the row's partial outputs summed in chunk order.
// What does depend on the batch is only how work is shared: up to 16 consecutive rows of one
// sequence form a block whose query heads (rows × heads of a kv head) read each key and value
// row once; keys outside a row's range are masked out of its sums, never added as zeros. Many
// blocks: one task per (block, kv head) with its buffers in thread scratch; few (decode): the
// chunks are tasks of their own, so one sequence's KV range is streamed by every thread.
//
// The kernels read 16 keys at a time (8 on the AVX2 level): the dot products of a head are
// reduced together by a transpose-add tree (no horizontal sum per key), values accumulate in
// registers. Other builds run the scalar kernels. Rows are
// read through kv_rows.h (contiguous runs within the cache's blocks), elements via kv_elem.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/kv_rows.h"
#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/vec_math.h"
#include "common/error.h"

namespace loom::backend::cpu::fast {

namespace {

constexpr int32_t kDefaultChunk = 256;  // positions per split-K chunk (schedule: attention = {chunk})
constexpr int64_t kBlockRows = 16;      // rows of one sequence sharing each key and value read

// One task's view: `heads` query vectors (rows × query heads of one kv head) over one kv head.
struct Geometry {
  KvElem elem;
  int64_t hd, vd, heads;
  size_t k_stride, v_stride;  // bytes per cached row
};

// Each head's active keys within a run of `count` rows: [from[h], to[h]), 0 ≤ from ≤ to ≤ count.
struct HeadRanges {
  const int32_t* from;
  const int32_t* to;
};

// ---- scalar kernels (every build; every head width) ----

void scores_scalar(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                   int64_t ld, float* row) {
  for (int64_t i = 0; i < count; ++i) {
    kv_row_to_f32(G.elem, rows + size_t(i) * stride, row, G.hd);
    for (int64_t h = 0; h < G.heads; ++h) {
      float s = 0.f;
      for (int64_t d = 0; d < G.hd; ++d) s += q[h * G.hd + d] * row[d];
      sc[h * ld + i] = s;
    }
  }
}

void values_scalar(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                   float* acc, float* row, HeadRanges r) {
  for (int64_t i = 0; i < count; ++i) {
    kv_row_to_f32(G.elem, rows + size_t(i) * stride, row, G.vd);
    for (int64_t h = 0; h < G.heads; ++h) {
      if (i < r.from[h] || i >= r.to[h]) continue;
      const float wh = w[h * ld + i];
      for (int64_t d = 0; d < G.vd; ++d) acc[h * G.vd + d] += wh * row[d];
    }
  }
}

#if defined(__AVX512F__)

// 16 columns [c, c + 16) of a cached row (c a multiple of 16) as f32.
template <KvElem E>
inline __m512 load16(const uint8_t* row, int64_t c) {
  if constexpr (E == KvElem::f32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (E == KvElem::f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + c)));
  } else {
    const auto* b = reinterpret_cast<const loom::quant::BlockQ8_0*>(row) + c / 32;
    const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + c % 32)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(_cvtsh_ss(b->d)));
  }
}

// r[i] = Σ lanes of v[i], for 16 vectors: pairs of vectors are folded into one by adding their
// halves, four times (15 shuffle pairs and adds for 16 sums).
inline __m512 reduce16_unordered(const __m512* v) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 4; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int i = 0; i < 2; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The tree leaves the sums in a fixed lane order; this permutation puts sum i in lane i.
inline __m512i reduce16_order() {
  static const __m512i order = [] {
    __m512 v[16];
    for (int i = 0; i < 16; ++i) v[i] = _mm512_set1_ps(float(i));
    alignas(64) float lane[16];
    _mm512_store_ps(lane, reduce16_unordered(v));
    alignas(64) int32_t idx[16];
    for (int l = 0; l < 16; ++l) idx[int(lane[l] / 16.0f)] = l;
    return _mm512_load_si512(idx);
  }();
  return order;
}

// sc[h * ld + i] = q_h · k_i for the run's rows, 16 keys at a time. ND = head_dim / 16. A
// score's arithmetic depends only on q_h and k_i (the tree reduces each vector on its own):
// a0 = q[0:16]·k[0:16] lane-wise, then the even 16-blocks FMA'd into a0 and the odd into a1,
// a0 + a1, and the lanes summed by reduce16. The 16 keys are converted to f32 once; each head
// keeps its 16 partial vectors in registers.
template <KvElem E, int ND>
void scores_avx512(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                   int64_t ld) {
  alignas(64) float kt[16][16 * ND];
  const __m512i order = reduce16_order();
  for (int64_t i0 = 0; i0 < count; i0 += 16) {
    const int64_t nk = std::min<int64_t>(16, count - i0);
    for (int64_t u = 0; u < 16; ++u)
      for (int d = 0; d < ND; ++d)
        _mm512_store_ps(kt[u] + 16 * d, u < nk ? load16<E>(rows + size_t(i0 + u) * stride, 16 * d) : _mm512_setzero_ps());
    const __mmask16 m = __mmask16((1u << nk) - 1);
    for (int64_t h = 0; h < G.heads; ++h) {
      const float* qh = q + h * (16 * ND);
      __m512 t[16];
#pragma GCC unroll 16
      for (int u = 0; u < 16; ++u) {
        __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(qh), _mm512_load_ps(kt[u])), a1 = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int d = 1; d < ND; ++d) {
          if (d % 2) a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * d), _mm512_load_ps(kt[u] + 16 * d), a1);
          else a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * d), _mm512_load_ps(kt[u] + 16 * d), a0);
        }
        t[u] = _mm512_add_ps(a0, a1);
      }
      _mm512_mask_storeu_ps(sc + h * ld + i0, m, _mm512_permutexvar_ps(order, reduce16_unordered(t)));
    }
  }
}

// acc[h][c0 + ...] += Σ_i w[h * ld + i] v_i for NH heads from h0 and NC·16 columns from c0, in
// ascending i over each head's range. Full: every head's range is the whole run. Otherwise a
// key outside a head's range leaves its accumulators untouched (a masked FMA): adding
// 0 · v_i instead would turn an infinite v_i into NaN and a -0 sum into +0.
template <KvElem E, int NC, int NH, bool Full>
void values_tile(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, int64_t h0, int64_t c0, HeadRanges r) {
  int64_t i_lo = count, i_hi = 0;
  for (int h = 0; h < NH; ++h) i_lo = std::min<int64_t>(i_lo, r.from[h0 + h]), i_hi = std::max<int64_t>(i_hi, r.to[h0 + h]);
  if (i_lo >= i_hi) return;
  __m512 a[NH][NC];
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) a[h][c] = _mm512_loadu_ps(acc + (h0 + h) * G.vd + c0 + 16 * c);
  for (int64_t i = i_lo; i < i_hi; ++i) {
    const uint8_t* row = rows + size_t(i) * stride;
    __m512 v[NC];
    for (int c = 0; c < NC; ++c) v[c] = load16<E>(row, c0 + 16 * c);
    for (int h = 0; h < NH; ++h) {
      const __m512 wh = _mm512_set1_ps(w[(h0 + h) * ld + i]);
      if constexpr (Full) {
        for (int c = 0; c < NC; ++c) a[h][c] = _mm512_fmadd_ps(wh, v[c], a[h][c]);
      } else {
        const __mmask16 on = (i >= r.from[h0 + h] && i < r.to[h0 + h]) ? __mmask16(0xFFFF) : __mmask16(0);
        for (int c = 0; c < NC; ++c) a[h][c] = _mm512_mask3_fmadd_ps(wh, v[c], a[h][c], on);
      }
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(acc + (h0 + h) * G.vd + c0 + 16 * c, a[h][c]);
}

template <KvElem E, int NC, int NH>
void values_heads(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                  float* acc, int64_t h0, int64_t c0, HeadRanges r) {
  bool full = true;
  for (int h = 0; h < NH; ++h) full = full && r.from[h0 + h] == 0 && r.to[h0 + h] == count;
  if (full) values_tile<E, NC, NH, true>(G, rows, stride, count, w, ld, acc, h0, c0, r);
  else values_tile<E, NC, NH, false>(G, rows, stride, count, w, ld, acc, h0, c0, r);
}

template <KvElem E, int NC>
void values_cols(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, int64_t c0, HeadRanges r) {
  // Accumulators NH x NC plus the row's NC vectors stay within the 32 registers.
  constexpr int kHeads = NC >= 8 ? 2 : 4;
  int64_t h = 0;
  for (; h + kHeads <= G.heads; h += kHeads) values_heads<E, NC, kHeads>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h + 2 <= G.heads; h += 2) values_heads<E, NC, 2>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h < G.heads; ++h) values_heads<E, NC, 1>(G, rows, stride, count, w, ld, acc, h, c0, r);
}

template <KvElem E>
void values_avx512(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                   float* acc, HeadRanges r) {
  int64_t c = 0;
  for (; c + 128 <= G.vd; c += 128) values_cols<E, 8>(G, rows, stride, count, w, ld, acc, c, r);
  for (; c + 64 <= G.vd; c += 64) values_cols<E, 4>(G, rows, stride, count, w, ld, acc, c, r);
  for (; c + 16 <= G.vd; c += 16) values_cols<E, 1>(G, rows, stride, count, w, ld, acc, c, r);
}

template <KvElem E>
bool scores_avx512_dispatch(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                            float* sc, int64_t ld) {
  switch (G.hd) {
    case 32: scores_avx512<E, 2>(G, q, rows, stride, count, sc, ld); return true;
    case 64: scores_avx512<E, 4>(G, q, rows, stride, count, sc, ld); return true;
    case 128: scores_avx512<E, 8>(G, q, rows, stride, count, sc, ld); return true;
    case 256: scores_avx512<E, 16>(G, q, rows, stride, count, sc, ld); return true;
    default: return false;
  }
}

#elif defined(__AVX2__)

// The AVX2 level (no AVX-512: e.g. AMD Zen 2/3), the same arithmetic shape as above in 8 lanes.

// 8 columns [c, c + 8) of a cached row (c a multiple of 8) as f32.
template <KvElem E>
inline __m256 load8(const uint8_t* row, int64_t c) {
  if constexpr (E == KvElem::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (E == KvElem::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + c)));
  } else {
    const auto* b = reinterpret_cast<const loom::quant::BlockQ8_0*>(row) + c / 32;
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + c % 32)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(_cvtsh_ss(b->d)));
  }
}

// Lane i = Σ lanes of t[i], for 8 vectors (each reduced on its own by a fixed tree).
inline __m256 reduce8(const __m256* t) {
  const __m256 s01 = _mm256_hadd_ps(t[0], t[1]), s23 = _mm256_hadd_ps(t[2], t[3]);
  const __m256 s45 = _mm256_hadd_ps(t[4], t[5]), s67 = _mm256_hadd_ps(t[6], t[7]);
  const __m256 a = _mm256_hadd_ps(s01, s23), b = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

// sc[h * ld + i] = q_h · k_i, 8 keys at a time. ND = head_dim / 8. A score's arithmetic depends
// only on q_h and k_i: even 8-blocks FMA'd into a0, odd into a1, a0 + a1, lanes summed by reduce8.
template <KvElem E, int ND>
void scores_avx2(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                 int64_t ld) {
  alignas(32) float kt[8][8 * ND];
  for (int64_t i0 = 0; i0 < count; i0 += 8) {
    const int64_t nk = std::min<int64_t>(8, count - i0);
    for (int64_t u = 0; u < 8; ++u)
      for (int d = 0; d < ND; ++d)
        _mm256_store_ps(kt[u] + 8 * d, u < nk ? load8<E>(rows + size_t(i0 + u) * stride, 8 * d) : _mm256_setzero_ps());
    for (int64_t h = 0; h < G.heads; ++h) {
      const float* qh = q + h * (8 * ND);
      __m256 t[8];
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_load_ps(kt[u])), a1 = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int d = 1; d < ND; ++d) {
          if (d % 2) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * d), _mm256_load_ps(kt[u] + 8 * d), a1);
          else a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * d), _mm256_load_ps(kt[u] + 8 * d), a0);
        }
        t[u] = _mm256_add_ps(a0, a1);
      }
      const __m256 r = reduce8(t);
      if (nk == 8) {
        _mm256_storeu_ps(sc + h * ld + i0, r);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, r);
        std::memcpy(sc + h * ld + i0, tmp, size_t(nk) * sizeof(float));
      }
    }
  }
}

// As values_tile above: acc[h][c0 + ...] += Σ_i w[h * ld + i] v_i in ascending i over each
// head's range; a key outside a head's range leaves its accumulators untouched.
template <KvElem E, int NC, int NH>
void values_tile_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w,
                      int64_t ld, float* acc, int64_t h0, int64_t c0, HeadRanges r) {
  int64_t i_lo = count, i_hi = 0;
  for (int h = 0; h < NH; ++h) i_lo = std::min<int64_t>(i_lo, r.from[h0 + h]), i_hi = std::max<int64_t>(i_hi, r.to[h0 + h]);
  if (i_lo >= i_hi) return;
  __m256 a[NH][NC];
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) a[h][c] = _mm256_loadu_ps(acc + (h0 + h) * G.vd + c0 + 8 * c);
  for (int64_t i = i_lo; i < i_hi; ++i) {
    const uint8_t* row = rows + size_t(i) * stride;
    __m256 v[NC];
    for (int c = 0; c < NC; ++c) v[c] = load8<E>(row, c0 + 8 * c);
    for (int h = 0; h < NH; ++h) {
      if (i < r.from[h0 + h] || i >= r.to[h0 + h]) continue;
      const __m256 wh = _mm256_set1_ps(w[(h0 + h) * ld + i]);
      for (int c = 0; c < NC; ++c) a[h][c] = _mm256_fmadd_ps(wh, v[c], a[h][c]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc + (h0 + h) * G.vd + c0 + 8 * c, a[h][c]);
}

template <KvElem E, int NC>
void values_cols_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                      float* acc, int64_t c0, HeadRanges r) {
  // Accumulators NH x NC plus the row's NC vectors stay within the 16 registers.
  int64_t h = 0;
  for (; h + 2 <= G.heads; h += 2) values_tile_avx2<E, NC, 2>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h < G.heads; ++h) values_tile_avx2<E, NC, 1>(G, rows, stride, count, w, ld, acc, h, c0, r);
}

template <KvElem E>
void values_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, HeadRanges r) {
  int64_t c = 0;
  for (; c + 32 <= G.vd; c += 32) values_cols_avx2<E, 4>(G, rows, stride, count, w, ld, acc, c, r);
  for (; c + 8 <= G.vd; c += 8) values_cols_avx2<E, 1>(G, rows, stride, count, w, ld, acc, c, r);
}

template <KvElem E>
bool scores_avx2_dispatch(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                          float* sc, int64_t ld) {
  switch (G.hd) {
    case 32: scores_avx2<E, 4>(G, q, rows, stride, count, sc, ld); return true;
    case 64: scores_avx2<E, 8>(G, q, rows, stride, count, sc, ld); return true;
    case 128: scores_avx2<E, 16>(G, q, rows, stride, count, sc, ld); return true;
    case 256: scores_avx2<E, 32>(G, q, rows, stride, count, sc, ld); return true;
    default: return false;
  }
}
#endif

void scores_run(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                int64_t ld, float* row) {
#if defined(__AVX512F__)
  switch (G.elem) {
    case KvElem::f32: if (scores_avx512_dispatch<KvElem::f32>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::f16: if (scores_avx512_dispatch<KvElem::f16>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::q8_0: if (scores_avx512_dispatch<KvElem::q8_0>(G, q, rows, stride, count, sc, ld)) return; break;
  }
#elif defined(__AVX2__)
  switch (G.elem) {
    case KvElem::f32: if (scores_avx2_dispatch<KvElem::f32>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::f16: if (scores_avx2_dispatch<KvElem::f16>(G, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::q8_0: if (scores_avx2_dispatch<KvElem::q8_0>(G, q, rows, stride, count, sc, ld)) return; break;
  }
#endif
  scores_scalar(G, q, rows, stride, count, sc, ld, row);
}

void values_run(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                float* acc, float* row, HeadRanges r) {
#if defined(__AVX512F__)
  if (G.vd % 16 == 0) {
    switch (G.elem) {
      case KvElem::f32: return values_avx512<KvElem::f32>(G, rows, stride, count, w, ld, acc, r);
      case KvElem::f16: return values_avx512<KvElem::f16>(G, rows, stride, count, w, ld, acc, r);
      case KvElem::q8_0: return values_avx512<KvElem::q8_0>(G, rows, stride, count, w, ld, acc, r);
    }
  }
#elif defined(__AVX2__)
  if (G.vd % 8 == 0) {
    switch (G.elem) {
      case KvElem::f32: return values_avx2<KvElem::f32>(G, rows, stride, count, w, ld, acc, r);
      case KvElem::f16: return values_avx2<KvElem::f16>(G, rows, stride, count, w, ld, acc, r);
      case KvElem::q8_0: return values_avx2<KvElem::q8_0>(G, rows, stride, count, w, ld, acc, r);
    }
  }
#endif
  values_scalar(G, rows, stride, count, w, ld, acc, row, r);
}

// A block of rows [t0, t0 + rows) of one sequence and one kv head: a task's queries.
struct Pair {
  int64_t t0, rows, g;
  int32_t lo, hi;        // the union of the rows' key ranges [lo, hi)
  int64_t first_chunk;   // index of its first chunk in the chunk list
  int64_t n_chunks;
  size_t scores, stats, partials;  // its places in the buffers shared by the decode passes
};

struct Chunk {
  int64_t pair;
  int32_t lo, hi;
  size_t stats;          // offset of its m_c[heads], l_c[heads] in the pair's stats
  size_t partial;        // offset of its [heads][vd] partial output in the pair's partials
};

// Everything about one step's attention call that the tasks share.
struct Job {
  const AttentionSpec& a;
  Exec& e;
  const float* q;
  float* out;
  Geometry G;            // heads: per row (the group); a pair's geometry multiplies it by rows
  int64_t group, qw, ow;
  std::vector<int32_t> lo, hi;  // each row's key range [lo, hi)
  std::vector<Pair> pairs;
  std::vector<Chunk> chunks;
  size_t score_floats = 0, stats_floats = 0, partial_floats = 0;  // the decode passes' shared buffers

  Geometry geometry(const Pair& pr) const {
    Geometry g = G;
    g.heads = pr.rows * group;
    return g;
  }
  // Row t's part of chunk c: [from, to), empty when from >= to.
  int32_t from(const Chunk& c, int64_t t) const { return std::max(c.lo, lo[size_t(t)]); }
  int32_t to(const Chunk& c, int64_t t) const { return std::min(c.hi, hi[size_t(t)]); }

  // The pair's query heads (row-major: row r's head h is r * group + h), rounded as the
  // cache's element type requires (kv_elem.h).
  void pack_queries(const Pair& pr, float* qh) const {
    for (int64_t r = 0; r < pr.rows; ++r) {
      float* dst = qh + r * group * G.hd;
      std::memcpy(dst, q + (pr.t0 + r) * qw + pr.g * group * G.hd, size_t(group * G.hd) * sizeof(float));
      if (G.elem == KvElem::f16) round_f16(dst, group * G.hd);
      if (G.elem == KvElem::q8_0)
        for (int64_t h = 0; h < group; ++h) round_q8_0(dst + h * G.hd, G.hd);
    }
  }

  // Pass 1 for chunk ci: scores of every head over the chunk's keys into sc ([heads][ld],
  // column 0 = position pr.lo), then each row's softcap, scale, max and exp-sum over its part.
  void scores(int64_t ci, const float* qh, float* sc, int64_t ld, float* st, float* row) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const Geometry PG = geometry(pr);
    KvRows keys{e.kv, a.layer, e.batch.seq(pr.t0), false, G.k_stride};
    const size_t k_head = kv_row_bytes(G.elem, pr.g * G.hd);
    keys.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      scores_run(PG, qh, rows + k_head, G.k_stride, count, sc + (p0 - pr.lo), ld, row);
    });
    for (int64_t r = 0; r < pr.rows; ++r) {
      const int32_t f = from(c, pr.t0 + r), t = to(c, pr.t0 + r);
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        st[h] = -INFINITY;
        st[PG.heads + h] = 0.f;
        if (f >= t) continue;
        float* s = sc + h * ld + (f - pr.lo);
        const int64_t n = t - f;
        if (a.softcap > 0)
          for (int64_t j = 0; j < n; ++j) s[j] = std::tanh(s[j] / a.softcap) * a.softcap;
        st[h] = scale_max(s, n, a.scale);
        st[PG.heads + h] = float(exp_sum(s, n, st[h]));
      }
    }
  }

  // Pass 2 for chunk ci: each row's weights over its part (from the max and sum over all its
  // chunks, in chunk order; stats: the pair's) and the chunk's Σ w v into acc ([heads][vd],
  // zeroed here). ranges: room for 2 ints per head. vbuf (optional, room for the chunk's
  // [positions][vd]): the chunk's value rows converted to f32 once for all heads (the same
  // values the kernels would convert on every read), when many heads share them.
  void values(int64_t ci, float* sc, int64_t ld, const float* stats, float* acc, float* row, int32_t* ranges,
              float* vbuf) const {
    const Chunk& c = chunks[size_t(ci)];
    const Pair& pr = pairs[size_t(c.pair)];
    const Geometry PG = geometry(pr);
    for (int64_t r = 0; r < pr.rows; ++r) {
      const int32_t f = from(c, pr.t0 + r), t = to(c, pr.t0 + r);
      if (f >= t) continue;
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        float mx = -INFINITY;
        for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k)
          if (from(chunks[size_t(k)], pr.t0 + r) < to(chunks[size_t(k)], pr.t0 + r))
            mx = std::max(mx, stats[chunks[size_t(k)].stats + size_t(h)]);
        double sum = 0.0;
        for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
          const Chunk& ck = chunks[size_t(k)];
          if (from(ck, pr.t0 + r) >= to(ck, pr.t0 + r)) continue;
          const float* st = stats + ck.stats;
          sum += double(st[PG.heads + h]) * std::exp(double(st[h]) - double(mx));
        }
        softmax_weights(sc + h * ld + (f - pr.lo), t - f, mx, float(1.0 / sum), G.elem == KvElem::f16);
      }
    }
    std::memset(acc, 0, size_t(PG.heads * G.vd) * sizeof(float));
    int32_t* rf = ranges;
    int32_t* rt = ranges + PG.heads;
    KvRows vals{e.kv, a.layer, e.batch.seq(pr.t0), true, G.v_stride};
    const size_t v_head = kv_row_bytes(G.elem, pr.g * G.vd);
    vals.runs(c.lo, c.hi, [&](int32_t p0, const uint8_t* rows, int64_t count) {
      for (int64_t r = 0; r < pr.rows; ++r) {
        const int32_t f = std::clamp<int32_t>(from(c, pr.t0 + r) - p0, 0, int32_t(count));
        const int32_t t = std::clamp<int32_t>(to(c, pr.t0 + r) - p0, 0, int32_t(count));
        for (int64_t h = r * group; h < (r + 1) * group; ++h) rf[h] = f, rt[h] = std::max(f, t);
      }
      if (!vbuf) return values_run(PG, rows + v_head, G.v_stride, count, sc + (p0 - pr.lo), ld, acc, row, {rf, rt});
      for (int64_t i = 0; i < count; ++i) kv_row_to_f32(G.elem, rows + size_t(i) * G.v_stride + v_head, vbuf + i * G.vd, G.vd);
      Geometry F = PG;
      F.elem = KvElem::f32;
      values_run(F, reinterpret_cast<const uint8_t*>(vbuf), size_t(G.vd) * sizeof(float), count, sc + (p0 - pr.lo), ld,
                 acc, row, {rf, rt});
    });
  }

  // out rows of the pair = Σ over each row's chunks, in order, of their partials (the pair's).
  void merge(const Pair& pr, const float* partials) const {
    for (int64_t r = 0; r < pr.rows; ++r) {
      float* o = out + (pr.t0 + r) * ow + pr.g * group * G.vd;
      bool first = true;
      for (int64_t k = pr.first_chunk; k < pr.first_chunk + pr.n_chunks; ++k) {
        const Chunk& ck = chunks[size_t(k)];
        if (from(ck, pr.t0 + r) >= to(ck, pr.t0 + r)) continue;
        const float* p = partials + ck.partial + size_t(r * group * G.vd);
        if (first) std::memcpy(o, p, size_t(group * G.vd) * sizeof(float));
        else
          for (int64_t i = 0; i < group * G.vd; ++i) o[i] += p[i];
        first = false;
      }
    }
  }

  // Writes the single-chunk pair's acc ([heads][vd]) to its rows' outputs.
  void write(const Pair& pr, const float* acc) const {
    for (int64_t r = 0; r < pr.rows; ++r)
      std::memcpy(out + (pr.t0 + r) * ow + pr.g * group * G.vd, acc + r * group * G.vd,
                  size_t(group * G.vd) * sizeof(float));
  }
};

}  // namespace

void run_attention(const Step& s, Exec& e) {
  const AttentionSpec& a = s.attn;
  const int64_t T = e.rows;
  if (int64_t(e.batch.size()) != T) loom::fail("%{}: attention after rows were dropped", s.op->result);
  const float* q = e.value(s.in[0]);
  const float* kx = e.value(s.in[1]);
  const float* vx = e.value(s.in[2]);
  float* out = e.value(s.out);
  const HostKvView& kv = e.kv;
  const KvElem elem = kv.elem();
  if (elem == KvElem::q8_0 && (a.head_dim % 32 || a.value_dim % 32))
    loom::fail("%{}: a q8_0 KV cache needs head widths that are multiples of 32 (head_dim {}, value_dim {}); use --kv-type f16",
               s.op->result, a.head_dim, a.value_dim);
  const int64_t kw = a.n_kv * a.head_dim, vw = a.n_kv * a.value_dim;

  parallel_rows(e, T, kw + vw, [&](int64_t b, int64_t en) {
    for (int64_t t = b; t < en; ++t) {
      const int32_t sq = e.batch.seq(t), p = e.positions[t];
      store_kv_row(elem, kx + t * kw, kv.k_row(a.layer, sq, p), kw);
      store_kv_row(elem, vx + t * vw, kv.v_row(a.layer, sq, p), vw);
    }
  });

  const int64_t group = a.n_head / a.n_kv;
  Job job{a, e, q, out, Geometry{elem, a.head_dim, a.value_dim, group, kv_row_bytes(elem, kw), kv_row_bytes(elem, vw)},
          group, a.n_head * a.head_dim, a.n_head * a.value_dim, {}, {}, {}, {}};
  const int32_t chunk = a.chunk > 0 ? a.chunk : kDefaultChunk;
  job.lo.resize(size_t(T));
  job.hi.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = e.positions[t];
    job.lo[size_t(t)] = a.window > 0 ? int32_t(std::max<int64_t>(0, int64_t(p) - a.window + 1)) : 0;
    job.hi[size_t(t)] = p + 1;
  }
  // Blocks of up to 16 consecutive rows of one sequence, each with every kv head.
  for (int64_t t = 0; t < T;) {
    int64_t u = t + 1;
    while (u < T && u - t < kBlockRows && e.batch.seq(u) == e.batch.seq(t)) ++u;
    int32_t lo = job.lo[size_t(t)], hi = job.hi[size_t(t)];
    for (int64_t r = t + 1; r < u; ++r) lo = std::min(lo, job.lo[size_t(r)]), hi = std::max(hi, job.hi[size_t(r)]);
    const int64_t heads = (u - t) * group;
    for (int64_t g = 0; g < a.n_kv; ++g) {
      Pair pr{t, u - t, g, lo, hi, int64_t(job.chunks.size()), 0, job.score_floats, job.stats_floats, job.partial_floats};
      for (int32_t c = lo; c < hi; c = (c / chunk + 1) * chunk) {
        const size_t k = size_t(pr.n_chunks++);
        job.chunks.push_back({int64_t(job.pairs.size()), c, std::min<int32_t>(hi, (c / chunk + 1) * chunk),
                              k * size_t(2 * heads), k * size_t(heads * a.value_dim)});
      }
      job.score_floats += size_t(heads * (hi - lo));
      job.stats_floats += size_t(2 * heads * pr.n_chunks);
      if (pr.n_chunks > 1) job.partial_floats += size_t(heads * a.value_dim * pr.n_chunks);
      job.pairs.push_back(pr);
    }
    t = u;
  }

  const int64_t row_floats = std::max(a.head_dim, a.value_dim);
  // Chunk ci's weights and values (stats, partials: its pair's; acc: room for [heads][vd]): a
  // pair of one chunk writes its rows' outputs, else the chunk's partial.
  auto pass2 = [&](int64_t ci, float* sc, const float* st, float* partials, float* acc, float* row, float* vbuf) {
    const Chunk& c = job.chunks[size_t(ci)];
    const Pair& pr = job.pairs[size_t(c.pair)];
    thread_local std::vector<int32_t> ranges;
    if (ranges.size() < size_t(2 * pr.rows * group)) ranges.resize(size_t(2 * pr.rows * group));
    if (pr.n_chunks > 1) acc = partials + c.partial;
    job.values(ci, sc, pr.hi - pr.lo, st, acc, row, ranges.data(), vbuf);
    if (pr.n_chunks == 1) job.write(pr, acc);
  };

  // Many pairs (prefill) or one chunk each: one task per pair, its scores, stats and partials
  // in thread scratch (nothing the size of the whole step's scores goes through memory).
  if (int64_t(job.pairs.size()) >= 4 * int64_t(e.pool.size()) || job.chunks.size() == job.pairs.size()) {
    e.pool.for_each(int64_t(job.pairs.size()), [&](int64_t pi, int thread) {
      const Pair& pr = job.pairs[size_t(pi)];
      const int64_t heads = pr.rows * group, ld = pr.hi - pr.lo;
      const size_t stats = size_t(2 * heads * pr.n_chunks);
      const size_t parts = pr.n_chunks > 1 ? size_t(pr.n_chunks * heads * a.value_dim) : 0;
      const size_t vbuf = pr.rows > 1 ? size_t(std::min<int32_t>(chunk, pr.hi - pr.lo) * a.value_dim) : 0;
      float* qh = e.scratch_for(thread, size_t(heads * (a.head_dim + ld + a.value_dim)) + stats + parts + size_t(row_floats) + vbuf);
      float* sc = qh + heads * a.head_dim;
      float* acc = sc + heads * ld;
      float* st = acc + heads * a.value_dim;
      float* part = st + stats;
      float* row = part + parts;
      job.pack_queries(pr, qh);
      for (int64_t c = pr.first_chunk; c < pr.first_chunk + pr.n_chunks; ++c)
        job.scores(c, qh, sc, ld, st + job.chunks[size_t(c)].stats, row);
      for (int64_t c = pr.first_chunk; c < pr.first_chunk + pr.n_chunks; ++c)
        pass2(c, sc, st, part, acc, row, vbuf ? row + row_floats : nullptr);
      if (pr.n_chunks > 1) job.merge(pr, part);
    });
    return;
  }

  // Few pairs (decode): every chunk is a task of each pass, so one sequence's KV range is
  // streamed by every thread, then each pair's partials are merged. The passes share buffers
  // owned by the calling thread (the pool's thread 0): per-thread scratch cannot hold data one
  // task writes and another reads.
  thread_local std::vector<float> shared;
  const size_t need = job.score_floats + job.stats_floats + job.partial_floats;
  if (shared.size() < need) shared.resize(need);
  float* scores = shared.data();
  float* stats = scores + job.score_floats;
  float* partials = stats + job.stats_floats;
  e.pool.for_each(int64_t(job.chunks.size()), [&](int64_t ci, int thread) {
    const Chunk& c = job.chunks[size_t(ci)];
    const Pair& pr = job.pairs[size_t(c.pair)];
    float* qh = e.scratch_for(thread, size_t(pr.rows * group * a.head_dim + row_floats));
    job.pack_queries(pr, qh);
    job.scores(ci, qh, scores + pr.scores, pr.hi - pr.lo, stats + pr.stats + c.stats, qh + pr.rows * group * a.head_dim);
  });
  e.pool.for_each(int64_t(job.chunks.size()), [&](int64_t ci, int thread) {
    const Pair& pr = job.pairs[size_t(job.chunks[size_t(ci)].pair)];
    float* acc = e.scratch_for(thread, size_t(pr.rows * group * a.value_dim + row_floats));
    pass2(ci, scores + pr.scores, stats + pr.stats, partials + pr.partials, acc, acc + pr.rows * group * a.value_dim, nullptr);
  });
  e.pool.for_each(int64_t(job.pairs.size()), [&](int64_t pi, int) {
    const Pair& pr = job.pairs[size_t(pi)];
    if (pr.n_chunks > 1) job.merge(pr, partials + pr.partials);
  });
}

}  // namespace loom::backend::cpu::fast
