// The kernels of attention_kernels.h: scalar references, AVX-512 and AVX2 levels.
#include "backend/cpu/fast/attention_kernels.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/vec_math.h"

namespace loom::backend::cpu::fast {

using Geometry = AttentionGeometry;

// ---- scalar kernels (every build; every head width) ----

void scores_scalar(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                   int64_t ld, float* row) {
  for (int64_t i = 0; i < count; ++i) {
    kv_row_to_f32(G.elem, rows + size_t(i) * stride, row, G.hd);
    for (int64_t h = 0; h < G.heads; ++h) {
      float s = 0.f;
      for (int64_t d = 0; d < G.hd; ++d) s += q[h * G.hd + d] * row[d];
      sc[h * ld + i] = s * G.score_scale;
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

namespace {

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
      _mm512_mask_storeu_ps(sc + h * ld + i0, m,
                            _mm512_mul_ps(_mm512_permutexvar_ps(order, reduce16_unordered(t)), _mm512_set1_ps(G.score_scale)));
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

// The AVX2 level (no AVX-512: e.g. AMD Zen 2/3). A score is 8 lane sums over the head's
// elements (lane j: elements j, j + 8, j + 16, ... in one FMA chain from zero) and the lanes
// added in one fixed tree; a tile keeps 8 such sums (heads x keys) in registers and reduces
// them together, so the few heads of a decode step (a GQA group of 2-4) read each key once and
// pay no per-key transpose. Values accumulate in 8 lanes, as above.

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

// Lane i of the result = the sum of a[i]'s lanes as ((x0 + x2) + (x1 + x3)) + ((x4 + x6) +
// (x5 + x7)), whatever the other vectors hold: the one order every score's lanes are added in
// (a transpose-like tree of unpacks and shuffles: fewer instructions than horizontal adds).
inline __m256 pair_sums(__m256 a, __m256 b) {  // [a0+a2, b0+b2, a1+a3, b1+b3 | the same of 4..7]
  return _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
}
inline __m256 quad_sums(__m256 ab, __m256 cd) {  // lanes 0-3: a, b, c, d's low-half sums; 4-7: high
  return _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
}
inline __m256 reduce8(const __m256* a) {
  const __m256 g0 = quad_sums(pair_sums(a[0], a[1]), pair_sums(a[2], a[3]));
  const __m256 g1 = quad_sums(pair_sums(a[4], a[5]), pair_sums(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

// reduce8 of 4 vectors: lane i of the result = the sum of a[i]'s lanes, in the same order.
inline __m128 reduce4(const __m256* a) {
  const __m256 g = quad_sums(pair_sums(a[0], a[1]), pair_sums(a[2], a[3]));
  return _mm_add_ps(_mm256_castps256_ps128(g), _mm256_extractf128_ps(g, 1));
}

// sc[h * ld + u] = (q_h · k_u) * scale for NH heads (q: NH vectors of HD floats) and NU keys
// (key u at rows + u * stride). NH · NU ≤ 12 lane-sum vectors, each an FMA chain over the
// head's 8-element blocks in order; NU key vectors and one query vector are live besides.
template <KvElem E, int HD, int NH, int NU>
inline void score_tile(const float* q, const uint8_t* rows, size_t stride, float* sc, int64_t ld, float scale) {
  constexpr int N = NH * NU, NV = N > 8 ? 12 : 8;
  static_assert(N <= 12);
  // Unrolled before scalar replacement so the sums live in registers (left as loops, GCC
  // keeps the array on the stack).
  __m256 a[NV];
#pragma GCC unroll 12
  for (int i = 0; i < NV; ++i) a[i] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int d = 0; d < HD; d += 8) {
    __m256 k[NU];
#pragma GCC unroll 8
    for (int u = 0; u < NU; ++u) k[u] = load8<E>(rows + size_t(u) * stride, d);
#pragma GCC unroll 12
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = _mm256_loadu_ps(q + h * HD + d);
#pragma GCC unroll 8
      for (int u = 0; u < NU; ++u) a[h * NU + u] = _mm256_fmadd_ps(qv, k[u], a[h * NU + u]);
    }
  }
  alignas(32) float r[12];
  _mm256_store_ps(r, _mm256_mul_ps(reduce8(a), _mm256_set1_ps(scale)));
  if constexpr (N > 8) _mm_store_ps(r + 8, _mm_mul_ps(reduce4(a + 8), _mm_set1_ps(scale)));
#pragma GCC unroll 12
  for (int h = 0; h < NH; ++h) std::memcpy(sc + h * ld, r + h * NU, NU * sizeof(float));
}

// Every head of the call over keys [0, count), NU keys at a time (then one at a time).
template <KvElem E, int HD, int NH, int NU>
inline void score_heads(const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc, int64_t ld,
                        float scale) {
  int64_t u = 0;
  for (; u + NU <= count; u += NU) score_tile<E, HD, NH, NU>(q, rows + size_t(u) * stride, stride, sc + u, ld, scale);
  for (; u < count; ++u) score_tile<E, HD, NH, 1>(q, rows + size_t(u) * stride, stride, sc + u, ld, scale);
}

// sc[h * ld + i] = q_h · k_i over the run. A decode step's few heads (≤ 4) read each key
// once, converting it in registers. More heads (a prefill block): a tile of 16 keys is
// converted to f32 once (exact, so the same sums), then read by tiles of 6 heads x 2 keys.
template <KvElem E, int HD>
void scores_avx2(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count, float* sc,
                 int64_t ld) {
  const float s = G.score_scale;
  switch (G.heads) {
    case 1: return score_heads<E, HD, 1, 6>(q, rows, stride, count, sc, ld, s);
    case 2: return score_heads<E, HD, 2, 4>(q, rows, stride, count, sc, ld, s);
    case 3: return score_heads<E, HD, 3, 2>(q, rows, stride, count, sc, ld, s);
    case 4: return score_heads<E, HD, 4, 2>(q, rows, stride, count, sc, ld, s);
    default: break;
  }
  constexpr int64_t kTile = 16;
  alignas(32) float kt[kTile * HD];
  for (int64_t i0 = 0; i0 < count; i0 += kTile) {
    const int64_t nk = std::min<int64_t>(kTile, count - i0);
    const uint8_t* keys = rows + size_t(i0) * stride;
    size_t ks = stride;
    if constexpr (E != KvElem::f32) {
      for (int64_t u = 0; u < nk; ++u)
        for (int d = 0; d < HD; d += 8) _mm256_store_ps(kt + u * HD + d, load8<E>(keys + size_t(u) * stride, d));
      keys = reinterpret_cast<const uint8_t*>(kt);
      ks = HD * sizeof(float);
    }
    int64_t h = 0;
    for (; h + 6 <= G.heads; h += 6) score_heads<KvElem::f32, HD, 6, 2>(q + h * HD, keys, ks, nk, sc + h * ld + i0, ld, s);
    for (; h + 4 <= G.heads; h += 4) score_heads<KvElem::f32, HD, 4, 2>(q + h * HD, keys, ks, nk, sc + h * ld + i0, ld, s);
    for (; h + 2 <= G.heads; h += 2) score_heads<KvElem::f32, HD, 2, 4>(q + h * HD, keys, ks, nk, sc + h * ld + i0, ld, s);
    for (; h < G.heads; ++h) score_heads<KvElem::f32, HD, 1, 6>(q + h * HD, keys, ks, nk, sc + h * ld + i0, ld, s);
  }
}

// As values_tile above: acc[h][c0 + ...] += Σ_i w[h * ld + i] v_i in ascending i over each
// head's range; a key outside a head's range leaves its accumulators untouched. Keys in every
// head's range [all_lo, all_hi) take the branch that tests no range per key: with Same (every
// head of the tile has one range: decode) that is all of them; otherwise (the heads of several
// rows of a prefill block) all but the causal edge, where the rows' ranges end one key apart.
// Each head still adds its own keys in ascending order, so the branch changes no sum. (One
// loop with a well-predicted branch rather than three loops: helpers sharing the accumulator
// array made GCC store it to the stack on every key.)
template <KvElem E, int NC, int NH, bool Same>
void values_tile_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w,
                      int64_t ld, float* acc, int64_t h0, int64_t c0, HeadRanges r) {
  int64_t i_lo = count, i_hi = 0, all_lo = 0, all_hi = count;
  for (int h = 0; h < NH; ++h) {
    i_lo = std::min<int64_t>(i_lo, r.from[h0 + h]), i_hi = std::max<int64_t>(i_hi, r.to[h0 + h]);
    all_lo = std::max<int64_t>(all_lo, r.from[h0 + h]), all_hi = std::min<int64_t>(all_hi, r.to[h0 + h]);
  }
  if (i_lo >= i_hi) return;
  __m256 a[NH][NC];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) a[h][c] = _mm256_loadu_ps(acc + (h0 + h) * G.vd + c0 + 8 * c);
  const float* wh[NH];
  for (int h = 0; h < NH; ++h) wh[h] = w + (h0 + h) * ld;
  for (int64_t i = i_lo; i < i_hi; ++i) {
    const uint8_t* row = rows + size_t(i) * stride;
    if (Same || (i >= all_lo && i < all_hi)) {
      if constexpr (NC > 2) {  // the weights first: NH + 1 + NH·NC registers
        __m256 b[NH];
#pragma GCC unroll 8
        for (int h = 0; h < NH; ++h) b[h] = _mm256_broadcast_ss(wh[h] + i);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const __m256 v = load8<E>(row, c0 + 8 * c);
#pragma GCC unroll 8
          for (int h = 0; h < NH; ++h) a[h][c] = _mm256_fmadd_ps(b[h], v, a[h][c]);
        }
      } else {  // the values first: NC + 1 + NH·NC registers
        __m256 v[NC];
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) v[c] = load8<E>(row, c0 + 8 * c);
#pragma GCC unroll 8
        for (int h = 0; h < NH; ++h) {
          const __m256 b = _mm256_broadcast_ss(wh[h] + i);
#pragma GCC unroll 8
          for (int c = 0; c < NC; ++c) a[h][c] = _mm256_fmadd_ps(b, v[c], a[h][c]);
        }
      }
    } else {
      __m256 v[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) v[c] = load8<E>(row, c0 + 8 * c);
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) {
        if (i < r.from[h0 + h] || i >= r.to[h0 + h]) continue;
        const __m256 b = _mm256_broadcast_ss(wh[h] + i);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) a[h][c] = _mm256_fmadd_ps(b, v[c], a[h][c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc + (h0 + h) * G.vd + c0 + 8 * c, a[h][c]);
}

template <KvElem E, int NC, int NH>
void values_heads_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w,
                       int64_t ld, float* acc, int64_t h0, int64_t c0, HeadRanges r) {
  bool same = true;
  for (int h = 1; h < NH; ++h) same = same && r.from[h0 + h] == r.from[h0] && r.to[h0 + h] == r.to[h0];
  if (same) values_tile_avx2<E, NC, NH, true>(G, rows, stride, count, w, ld, acc, h0, c0, r);
  else values_tile_avx2<E, NC, NH, false>(G, rows, stride, count, w, ld, acc, h0, c0, r);
}

template <KvElem E, int NC, int NH>
void values_cols_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                      float* acc, int64_t c0, HeadRanges r) {
  int64_t h = 0;
  for (; h + NH <= G.heads; h += NH) values_heads_avx2<E, NC, NH>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h + 3 <= G.heads; h += 3) values_heads_avx2<E, NC, 3>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h + 2 <= G.heads; h += 2) values_heads_avx2<E, NC, 2>(G, rows, stride, count, w, ld, acc, h, c0, r);
  for (; h < G.heads; ++h) values_heads_avx2<E, NC, 1>(G, rows, stride, count, w, ld, acc, h, c0, r);
}

// 12 accumulators either way. Many heads (a prefill block): 6 heads x 16 columns, so a key
// costs 2 value loads and 6 broadcasts per 12 FMAs. A GQA group of 3 (decode): 3 heads x 32
// columns, which the compiler feeds by folding the value loads into the FMAs (4 loads more,
// still under the FMAs' 6 cycles with few heads). A GQA group of 2 (decode): 2 heads x 48
// columns, so a head of 128 takes 3 passes over the run, not 4 (a pass costs its accumulators'
// loads and stores, which a decode step's short runs do not amortize).
template <KvElem E>
void values_avx2(const Geometry& G, const uint8_t* rows, size_t stride, int64_t count, const float* w, int64_t ld,
                 float* acc, HeadRanges r) {
  int64_t c = 0;
  if (G.heads >= 6) {
    for (; c + 16 <= G.vd; c += 16) values_cols_avx2<E, 2, 6>(G, rows, stride, count, w, ld, acc, c, r);
  } else if (G.heads == 2) {
    for (; c + 48 <= G.vd; c += 48) values_cols_avx2<E, 6, 2>(G, rows, stride, count, w, ld, acc, c, r);
    for (; c + 32 <= G.vd; c += 32) values_cols_avx2<E, 4, 2>(G, rows, stride, count, w, ld, acc, c, r);
  } else {
    for (; c + 32 <= G.vd; c += 32) values_cols_avx2<E, 4, 3>(G, rows, stride, count, w, ld, acc, c, r);
  }
  for (; c + 8 <= G.vd; c += 8) values_cols_avx2<E, 1, 3>(G, rows, stride, count, w, ld, acc, c, r);
}

// A decode tile (scores_rows / values_rows) with NH ≤ 4 query heads per kv head: each kv
// head's kernels called inline, the dispatch made once for the tile.
template <KvElem E, int HD, int NH>
void scores_rows_avx2(const Geometry& G, int64_t kv_heads, const float* q, const uint8_t* rows, size_t stride,
                      int64_t count, float* sc, int64_t ld) {
  constexpr int NU = NH == 1 ? 6 : NH == 2 ? 4 : 2;  // as scores_avx2 picks for NH heads
  const size_t head = kv_row_bytes(E, HD);
  for (int64_t g = 0; g < kv_heads; ++g)
    score_heads<E, HD, NH, NU>(q + g * NH * HD, rows + size_t(g) * head, stride, count, sc + g * NH * ld, ld,
                               G.score_scale);
}

// values_tile_avx2's arithmetic for NH heads that share the range [f, t) (a decode token's
// GQA group), NC · 8 columns from c0; vd: floats per head in acc.
template <KvElem E, int NC, int NH>
__attribute__((always_inline)) inline void values_span(const uint8_t* rows, size_t stride, int64_t f, int64_t t,
                                                       const float* w, int64_t ld, float* acc, int64_t vd, int64_t c0) {
  __m256 a[NH][NC];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 12
    for (int c = 0; c < NC; ++c) a[h][c] = _mm256_loadu_ps(acc + h * vd + c0 + 8 * c);
  for (int64_t i = f; i < t; ++i) {
    const uint8_t* row = rows + size_t(i) * stride;
    __m256 b[NH];
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) b[h] = _mm256_broadcast_ss(w + h * ld + i);
#pragma GCC unroll 12
    for (int c = 0; c < NC; ++c) {
      const __m256 v = load8<E>(row, c0 + 8 * c);
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) a[h][c] = _mm256_fmadd_ps(b[h], v, a[h][c]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 12
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(acc + h * vd + c0 + 8 * c, a[h][c]);
}

// Every kv head of the tile, its columns in passes of NCM · 8 (the most accumulators that fit
// beside NH broadcast weights and one value), then 32, 16 and 8.
template <KvElem E, int NH>
void values_rows_avx2(const Geometry& G, int64_t kv_heads, const uint8_t* rows, size_t stride, int64_t f, int64_t t,
                      const float* w, int64_t ld, float* acc, int64_t acc_stride) {
  constexpr int NCM = NH == 1 ? 12 : NH == 2 ? 6 : NH == 3 ? 4 : 2;
  const size_t head = kv_row_bytes(E, G.vd);
  for (int64_t g = 0; g < kv_heads; ++g) {
    const uint8_t* r = rows + size_t(g) * head;
    const float* wg = w + g * NH * ld;
    float* ag = acc + g * acc_stride;
    int64_t c = 0;
    for (; c + 8 * NCM <= G.vd; c += 8 * NCM) values_span<E, NCM, NH>(r, stride, f, t, wg, ld, ag, G.vd, c);
    if constexpr (NCM > 4)
      for (; c + 32 <= G.vd; c += 32) values_span<E, 4, NH>(r, stride, f, t, wg, ld, ag, G.vd, c);
    if constexpr (NCM > 2)
      for (; c + 16 <= G.vd; c += 16) values_span<E, 2, NH>(r, stride, f, t, wg, ld, ag, G.vd, c);
    for (; c + 8 <= G.vd; c += 8) values_span<E, 1, NH>(r, stride, f, t, wg, ld, ag, G.vd, c);
  }
}

template <KvElem E>
bool scores_rows_dispatch(const Geometry& G, int64_t kv_heads, const float* q, const uint8_t* rows, size_t stride,
                          int64_t count, float* sc, int64_t ld) {
#define LOOM_SCORES_ROWS(HD)                                                                   \
  case HD:                                                                                     \
    switch (G.heads) {                                                                         \
      case 1: scores_rows_avx2<E, HD, 1>(G, kv_heads, q, rows, stride, count, sc, ld); return true; \
      case 2: scores_rows_avx2<E, HD, 2>(G, kv_heads, q, rows, stride, count, sc, ld); return true; \
      case 3: scores_rows_avx2<E, HD, 3>(G, kv_heads, q, rows, stride, count, sc, ld); return true; \
      case 4: scores_rows_avx2<E, HD, 4>(G, kv_heads, q, rows, stride, count, sc, ld); return true; \
      default: return false;                                                                   \
    }
  switch (G.hd) {
    LOOM_SCORES_ROWS(32)
    LOOM_SCORES_ROWS(64)
    LOOM_SCORES_ROWS(128)
    LOOM_SCORES_ROWS(256)
    default: return false;
  }
#undef LOOM_SCORES_ROWS
}

template <KvElem E>
bool values_rows_dispatch(const Geometry& G, int64_t kv_heads, const uint8_t* rows, size_t stride, int64_t f,
                          int64_t t, const float* w, int64_t ld, float* acc, int64_t acc_stride) {
  switch (G.heads) {
    case 1: values_rows_avx2<E, 1>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride); return true;
    case 2: values_rows_avx2<E, 2>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride); return true;
    case 3: values_rows_avx2<E, 3>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride); return true;
    case 4: values_rows_avx2<E, 4>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride); return true;
    default: return false;
  }
}

template <KvElem E>
bool scores_avx2_dispatch(const Geometry& G, const float* q, const uint8_t* rows, size_t stride, int64_t count,
                          float* sc, int64_t ld) {
  switch (G.hd) {
    case 32: scores_avx2<E, 32>(G, q, rows, stride, count, sc, ld); return true;
    case 64: scores_avx2<E, 64>(G, q, rows, stride, count, sc, ld); return true;
    case 128: scores_avx2<E, 128>(G, q, rows, stride, count, sc, ld); return true;
    case 256: scores_avx2<E, 256>(G, q, rows, stride, count, sc, ld); return true;
    default: return false;
  }
}
#endif

}  // namespace

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

// A decode tile: the AVX2 level's tile kernels where they apply (≤ 4 query heads per kv head;
// values: every head with one range), else the per-kv-head loop over scores_run / values_run.
void scores_rows(const Geometry& G, int64_t kv_heads, const float* q, const uint8_t* rows, size_t stride,
                 int64_t count, float* sc, int64_t ld, float* row) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  switch (G.elem) {
    case KvElem::f32: if (scores_rows_dispatch<KvElem::f32>(G, kv_heads, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::f16: if (scores_rows_dispatch<KvElem::f16>(G, kv_heads, q, rows, stride, count, sc, ld)) return; break;
    case KvElem::q8_0: if (scores_rows_dispatch<KvElem::q8_0>(G, kv_heads, q, rows, stride, count, sc, ld)) return; break;
  }
#endif
  const size_t head = kv_row_bytes(G.elem, G.hd);
  for (int64_t g = 0; g < kv_heads; ++g)
    scores_run(G, q + g * G.heads * G.hd, rows + size_t(g) * head, stride, count, sc + g * G.heads * ld, ld, row);
}

void values_rows(const Geometry& G, int64_t kv_heads, const uint8_t* rows, size_t stride, int64_t count,
                 const float* w, int64_t ld, float* acc, int64_t acc_stride, float* row, HeadRanges r) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  bool same = G.vd % 8 == 0;
  for (int64_t h = 1; h < G.heads && same; ++h) same = r.from[h] == r.from[0] && r.to[h] == r.to[0];
  if (same) {
    const int64_t f = r.from[0], t = r.to[0];
    if (f >= t) return;
    switch (G.elem) {
      case KvElem::f32: if (values_rows_dispatch<KvElem::f32>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride)) return; break;
      case KvElem::f16: if (values_rows_dispatch<KvElem::f16>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride)) return; break;
      case KvElem::q8_0: if (values_rows_dispatch<KvElem::q8_0>(G, kv_heads, rows, stride, f, t, w, ld, acc, acc_stride)) return; break;
    }
  }
#endif
  const size_t head = kv_row_bytes(G.elem, G.vd);
  for (int64_t g = 0; g < kv_heads; ++g)
    values_run(G, rows + size_t(g) * head, stride, count, w + g * G.heads * ld, ld, acc + g * acc_stride, row, r);
}

}  // namespace loom::backend::cpu::fast
