// Causal grouped-query attention of the fast backend, with the reference's semantics
// (reference_attention.cpp): s_j = q·k_j, soft-capped when softcap > 0, times scale; softmax
// over the keys of the query's sequence at positions p ≤ q (and q - p < window when window >
// 0); out = Σ w_j v_j. This step's keys and values are written into the cache first.
//
// Work is split over (query row, kv head): every key and value row of a kv head is converted
// from f16 once and used by all query heads of its group. A decode step with fewer such pairs
// than threads splits the group further, one query head per task. Rows are addressed through
// the cache's blocks (contiguous positions within a block), not one virtual call per row.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/vec_math.h"
#include "common/error.h"
#include "quant/fp16.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace loom::backend::cpu::fast {

namespace {

void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp32_to_fp16(src[i]);
}

void load_f32(KvElem e, const uint8_t* src, float* dst, int64_t n) {
  if (e == KvElem::f32) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp16_to_fp32(h[i]);
}

inline float dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float s = 0.f;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  s = _mm512_reduce_add_ps(acc);
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float w, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vw = _mm512_set1_ps(w);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#endif
  for (; i < n; ++i) y[i] += w * x[i];
}

// w[j] = exp(w[j] - mx); returns the sum.
inline double exp_shifted(float* w, int64_t n, float mx) {
  int64_t j = 0;
  double sum = 0.0;
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  for (; j + 16 <= n; j += 16) {
    const __m512 v = exp512(_mm512_sub_ps(_mm512_loadu_ps(w + j), vm));
    _mm512_storeu_ps(w + j, v);
    acc = _mm512_add_ps(acc, v);
  }
  sum = _mm512_reduce_add_ps(acc);
#endif
  for (; j < n; ++j) {
    w[j] = std::exp(w[j] - mx);
    sum += w[j];
  }
  return sum;
}

// With an f16 cache, llama.cpp's attention (flash attention off) multiplies the f16 keys and
// values by f32 operands converted to f16 first (ggml's vec_dot_type for F16): the query before
// q·k, and the normalized softmax weights before Σ w v. Loom rounds the same operands the same
// way, so scores and outputs agree with llama.cpp's to fp32 rounding rather than to f16
// rounding (~5e-4 relative), which the next activation quantization would otherwise amplify.
inline void round_f16(float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; i < n; ++i) x[i] = loom::quant::round_to_fp16(x[i]);
}

// Walks the rows of one layer and sequence position by position, asking the cache for a row
// pointer only at the start of each storage block.
struct RowWalker {
  const HostKvView& kv;
  int layer;
  int32_t seq, block;
  size_t stride;
  bool values;
  uint8_t* ptr = nullptr;
  const uint8_t* at(int32_t pos, bool first) {
    if (first || pos % block == 0)
      ptr = values ? kv.v_row(layer, seq, pos) : kv.k_row(layer, seq, pos);
    else
      ptr += stride;
    return ptr;
  }
};


#if defined(__AVX512F__)
constexpr int64_t kBlockRows = 16;  // query rows of one sequence per prefill task: one zmm lane each

// out[i][0, 16 NC) = sum over keys j of row i's range [lo[i], hi[i]] of w[j][r0 + i] * v[j], for
// R rows of a block and 16 NC value columns in registers: each value vector loaded feeds R rows'
// FMAs (a loop row by row streamed every value row of the block from L2 once per row). Keys run
// in ascending order for every row, as a single-row loop would add them: the row's own prefix,
// the range all R rows share, then its own suffix; keys outside a row's range are never read.
template <int R, int NC>
void values_tile(const float* sc, const float* vf, int64_t vd, const int32_t* lo, const int32_t* hi, int32_t kmin,
                 int64_t r0, float* out, int64_t out_stride) {
  int32_t clo = lo[0], chi = hi[0];
  for (int i = 1; i < R; ++i) clo = std::max(clo, lo[i]), chi = std::min(chi, hi[i]);
  const bool shared = clo <= chi;
  __m512 acc[R][NC];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int u = 0; u < NC; ++u) acc[i][u] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
    for (int32_t j = lo[i], je = shared ? clo : hi[i] + 1; j < je; ++j) {
      const __m512 w = _mm512_set1_ps(sc[int64_t(j - kmin) * kBlockRows + r0 + i]);
#pragma GCC unroll 4
      for (int u = 0; u < NC; ++u) acc[i][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vf + int64_t(j - kmin) * vd + 16 * u), acc[i][u]);
    }
  if (shared)
    for (int32_t j = clo; j <= chi; ++j) {
      const float* v = vf + int64_t(j - kmin) * vd;
      const float* wr = sc + int64_t(j - kmin) * kBlockRows + r0;
      __m512 x[NC];
#pragma GCC unroll 4
      for (int u = 0; u < NC; ++u) x[u] = _mm512_loadu_ps(v + 16 * u);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m512 w = _mm512_set1_ps(wr[i]);
#pragma GCC unroll 4
        for (int u = 0; u < NC; ++u) acc[i][u] = _mm512_fmadd_ps(w, x[u], acc[i][u]);
      }
    }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) {
    if (shared)
      for (int32_t j = chi + 1; j <= hi[i]; ++j) {
        const __m512 w = _mm512_set1_ps(sc[int64_t(j - kmin) * kBlockRows + r0 + i]);
#pragma GCC unroll 4
        for (int u = 0; u < NC; ++u) acc[i][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vf + int64_t(j - kmin) * vd + 16 * u), acc[i][u]);
      }
#pragma GCC unroll 4
    for (int u = 0; u < NC; ++u) _mm512_storeu_ps(out + i * out_stride + 16 * u, acc[i][u]);
  }
}

// values_tile for rows r0 .. r0 + R - 1 over all vd columns, 64 at a time.
template <int R>
void values_rows(const float* sc, const float* vf, int64_t vd, const int32_t* lo, const int32_t* hi, int32_t kmin,
                 int64_t r0, float* out, int64_t out_stride) {
  int64_t c = 0;
  for (; c + 64 <= vd; c += 64) values_tile<R, 4>(sc, vf + c, vd, lo, hi, kmin, r0, out + c, out_stride);
  switch ((vd - c) / 16) {
    case 1: values_tile<R, 1>(sc, vf + c, vd, lo, hi, kmin, r0, out + c, out_stride); break;
    case 2: values_tile<R, 2>(sc, vf + c, vd, lo, hi, kmin, r0, out + c, out_stride); break;
    case 3: values_tile<R, 3>(sc, vf + c, vd, lo, hi, kmin, r0, out + c, out_stride); break;
    default: break;
  }
}

// Prefill attention of rows [t0, t1) (one sequence, at most 16 rows) for kv head g: the keys
// and values of the rows' union range are converted to f32 once, then for each query head of
// the group the scores of all 16 rows against a key are one vector (queries transposed, so
// no horizontal sums), softmax runs lane-wise, and each row's output accumulates in registers.
void attend_block(const AttentionSpec& a, Exec& e, const float* q, float* out, int64_t t0, int64_t t1, int64_t g,
                  int thread) {
  const HostKvView& kv = e.kv;
  const KvElem elem = kv.elem();
  const size_t esz = elem == KvElem::f16 ? 2 : 4;
  const int64_t hd = a.head_dim, vd = a.value_dim, rows = t1 - t0;
  const int64_t kw = a.n_kv * hd, vw = a.n_kv * vd, qw = a.n_head * hd, ow = a.n_head * vd;
  const int32_t sq = e.batch.seq(t0);
  alignas(64) int32_t lo[kBlockRows], hi[kBlockRows];
  int32_t kmin = INT32_MAX, kmax = 0;
  for (int64_t r = 0; r < kBlockRows; ++r) {
    if (r < rows) {
      hi[r] = e.positions[t0 + r];
      lo[r] = a.window > 0 ? int32_t(std::max<int64_t>(0, int64_t(hi[r]) - a.window + 1)) : 0;
      kmin = std::min(kmin, lo[r]);
      kmax = std::max(kmax, hi[r]);
    } else {
      lo[r] = 1;
      hi[r] = 0;  // empty range: padding lane
    }
  }
  const int64_t n = kmax - kmin + 1;
  float* kf = e.scratch_for(thread, size_t(n * (hd + vd + kBlockRows) + hd * kBlockRows + 64));
  float* vf = kf + n * hd;
  float* sc = vf + n * vd;               // [n][16]
  float* qt = sc + n * kBlockRows;       // [hd][16]
  RowWalker keys{kv, a.layer, sq, kv.block_size(), size_t(kw) * esz, false};
  RowWalker vals{kv, a.layer, sq, kv.block_size(), size_t(vw) * esz, true};
  for (int64_t j = 0; j < n; ++j) {
    load_f32(elem, keys.at(kmin + int32_t(j), j == 0) + size_t(g * hd) * esz, kf + j * hd, hd);
    load_f32(elem, vals.at(kmin + int32_t(j), j == 0) + size_t(g * vd) * esz, vf + j * vd, vd);
  }
  const __m512i vlo = _mm512_load_si512(lo), vhi = _mm512_load_si512(hi);
  const __m512 vscale = _mm512_set1_ps(a.scale);
  const int64_t group = a.n_head / a.n_kv;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t d = 0; d < hd; ++d)
      for (int64_t r = 0; r < kBlockRows; ++r) qt[d * kBlockRows + r] = r < rows ? q[(t0 + r) * qw + h * hd + d] : 0.f;
    if (elem == KvElem::f16) round_f16(qt, hd * kBlockRows);
    // Scores, 8 keys at a time for independent FMA chains.
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      __m512 acc[8];
      for (int u = 0; u < 8; ++u) acc[u] = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; ++d) {
        const __m512 qd = _mm512_loadu_ps(qt + d * kBlockRows);
        for (int u = 0; u < 8; ++u) acc[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kf[(j + u) * hd + d]), acc[u]);
      }
      for (int u = 0; u < 8; ++u) _mm512_storeu_ps(sc + (j + u) * kBlockRows, acc[u]);
    }
    for (; j < n; ++j) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; ++d) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qt + d * kBlockRows), _mm512_set1_ps(kf[j * hd + d]), acc);
      _mm512_storeu_ps(sc + j * kBlockRows, acc);
    }
    // Lane-wise masked softmax over the keys.
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (j = 0; j < n; ++j) {
      __m512 v = _mm512_loadu_ps(sc + j * kBlockRows);
      if (a.softcap > 0) {
        const __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(1.0f / a.softcap));
        const __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f),
                                       _mm512_add_ps(exp512(_mm512_add_ps(x, x)), _mm512_set1_ps(1.0f))));
        v = _mm512_mul_ps(t, _mm512_set1_ps(a.softcap));
      }
      v = _mm512_mul_ps(v, vscale);
      const __m512i kp = _mm512_set1_epi32(kmin + int32_t(j));
      const __mmask16 m = _mm512_cmple_epi32_mask(vlo, kp) & _mm512_cmpge_epi32_mask(vhi, kp);
      v = _mm512_mask_blend_ps(m, _mm512_set1_ps(-INFINITY), v);
      _mm512_storeu_ps(sc + j * kBlockRows, v);
      mx = _mm512_max_ps(mx, v);
    }
    mx = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), mx, _mm512_setzero_ps());
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < n; ++j) {
      const __m512 v = _mm512_loadu_ps(sc + j * kBlockRows);
      const __mmask16 live = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
      const __m512 w = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(v, mx)));
      _mm512_storeu_ps(sc + j * kBlockRows, w);
      sum = _mm512_add_ps(sum, w);
    }
    // Normalized weights (rounded to f16 with an f16 cache, see round_f16).
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    for (j = 0; j < n; ++j) {
      __m512 w = _mm512_mul_ps(_mm512_loadu_ps(sc + j * kBlockRows), inv);
      if (elem == KvElem::f16) w = _mm512_cvtph_ps(_mm512_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT));
      _mm512_storeu_ps(sc + j * kBlockRows, w);
    }
    // Weighted values, 4 rows x 64 output columns in registers at a time (values_tile).
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const int64_t nr = std::min<int64_t>(4, rows - r0);
      float* o = out + (t0 + r0) * ow + h * vd;
      switch (nr) {
        case 1: values_rows<1>(sc, vf, vd, lo + r0, hi + r0, kmin, r0, o, ow); break;
        case 2: values_rows<2>(sc, vf, vd, lo + r0, hi + r0, kmin, r0, o, ow); break;
        case 3: values_rows<3>(sc, vf, vd, lo + r0, hi + r0, kmin, r0, o, ow); break;
        default: values_rows<4>(sc, vf, vd, lo + r0, hi + r0, kmin, r0, o, ow); break;
      }
    }
  }
}
#endif

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
  if (elem == KvElem::q8_0) loom::fail("%{}: the fast CPU backend has no q8_0 KV cache yet (--kv-type f16)", s.op->result);
  const size_t esz = elem == KvElem::f16 ? 2 : 4;
  const int64_t kw = a.n_kv * a.head_dim, vw = a.n_kv * a.value_dim, qw = a.n_head * a.head_dim, ow = a.n_head * a.value_dim;

  parallel_rows(e, T, kw + vw, [&](int64_t b, int64_t en) {
    for (int64_t t = b; t < en; ++t) {
      const int32_t sq = e.batch.seq(t), p = e.positions[t];
      void* kd = kv.k_row(a.layer, sq, p);
      void* vd = kv.v_row(a.layer, sq, p);
      if (elem == KvElem::f32) {
        std::memcpy(kd, kx + t * kw, size_t(kw) * 4);
        std::memcpy(vd, vx + t * vw, size_t(vw) * 4);
      } else {
        f32_to_f16(kx + t * kw, static_cast<uint16_t*>(kd), kw);
        f32_to_f16(vx + t * vw, static_cast<uint16_t*>(vd), vw);
      }
    }
  });

#if defined(__AVX512F__)
  // Prefill: blocks of up to 16 consecutive rows of one sequence.
  if (T >= 8 && a.head_dim % 16 == 0 && a.value_dim % 16 == 0) {
    std::vector<std::pair<int64_t, int64_t>> blocks;
    for (int64_t t = 0; t < T;) {
      int64_t u = t + 1;
      while (u < T && u - t < kBlockRows && e.batch.seq(u) == e.batch.seq(t)) ++u;
      blocks.push_back({t, u});
      t = u;
    }
    // A step of many sequences' decode tokens (continuous batching) has blocks of one row,
    // which would use one lane of 16: those go row by row below.
    if (int64_t(blocks.size()) * 4 <= T) {
      e.pool.for_each(int64_t(blocks.size()) * a.n_kv, [&](int64_t task, int thread) {
        const auto [t0, t1] = blocks[task / a.n_kv];
        attend_block(a, e, q, out, t0, t1, task % a.n_kv, thread);
      });
      return;
    }
  }
#endif
  const int64_t group = a.n_head / a.n_kv;
  const int64_t splits = T * a.n_kv >= 2 * e.pool.size() ? 1 : group;  // heads of a group per task: group / splits
  const int64_t per_task = group / splits;
  const int32_t block = kv.block_size();
  e.pool.for_each(T * a.n_kv * splits, [&](int64_t task, int thread) {
    const int64_t t = task / (a.n_kv * splits), g = (task / splits) % a.n_kv, h0 = g * group + (task % splits) * per_task;
    const int32_t sq = e.batch.seq(t), p = e.positions[t];
    const int32_t lo = a.window > 0 ? int32_t(std::max<int64_t>(0, int64_t(p) - a.window + 1)) : 0;
    const int64_t n = p - lo + 1;
    const int64_t hd = a.head_dim;
    float* sc = e.scratch_for(thread, size_t(per_task * (n + a.value_dim + hd) + hd + a.value_dim));
    float* acc = sc + per_task * n;
    float* qh = acc + per_task * a.value_dim;  // the task's query heads (rounded as in round_f16)
    float* row = qh + per_task * hd;
    std::memcpy(qh, q + t * qw + h0 * hd, size_t(per_task * hd) * sizeof(float));
    if (elem == KvElem::f16) round_f16(qh, per_task * hd);
    RowWalker keys{kv, a.layer, sq, block, size_t(kw) * esz, false};
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* kr = keys.at(lo + int32_t(j), j == 0) + size_t(g * a.head_dim) * esz;
      load_f32(elem, kr, row, a.head_dim);
      for (int64_t h = 0; h < per_task; ++h) sc[h * n + j] = dot(qh + h * hd, row, hd);
    }
    for (int64_t h = 0; h < per_task; ++h) {
      float* w = sc + h * n;
      if (a.softcap > 0)
        for (int64_t j = 0; j < n; ++j) w[j] = std::tanh(w[j] / a.softcap) * a.softcap;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        w[j] *= a.scale;
        mx = std::max(mx, w[j]);
      }
      const float inv = float(1.0 / exp_shifted(w, n, mx));
      for (int64_t j = 0; j < n; ++j) w[j] *= inv;
      if (elem == KvElem::f16) round_f16(w, n);
    }
    std::memset(acc, 0, size_t(per_task * a.value_dim) * sizeof(float));
    RowWalker vals{kv, a.layer, sq, block, size_t(vw) * esz, true};
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* vr = vals.at(lo + int32_t(j), j == 0) + size_t(g * a.value_dim) * esz;
      load_f32(elem, vr, row, a.value_dim);
      for (int64_t h = 0; h < per_task; ++h) axpy(sc[h * n + j], row, acc + h * a.value_dim, a.value_dim);
    }
    for (int64_t h = 0; h < per_task; ++h)
      std::memcpy(out + t * ow + (h0 + h) * a.value_dim, acc + h * a.value_dim, size_t(a.value_dim) * sizeof(float));
  });
}

}  // namespace loom::backend::cpu::fast
