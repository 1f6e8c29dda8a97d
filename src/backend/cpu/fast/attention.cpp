// Causal grouped-query attention of the fast backend, with the reference's semantics
// (reference_attention.cpp): s_j = q·k_j, soft-capped when softcap > 0, times scale; softmax
// over the keys of the query's sequence at positions p ≤ q (and q - p < window when window >
// 0); out = Σ w_j v_j. This step's keys and values are written into the cache first.
//
// Prefill (AVX-512 builds, 8+ rows) runs here in blocks of 16 query rows of one sequence per kv
// head; every other step goes to attention_decode.cpp (split over the KV range). Rows are read
// through kv_rows.h (contiguous runs within the cache's blocks); elements through kv_elem.h.
#include <algorithm>
#include <climits>
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
  KvRows keys{kv, a.layer, sq, false, kv_row_bytes(elem, kw)}, vals{kv, a.layer, sq, true, kv_row_bytes(elem, vw)};
  const size_t k_head = kv_row_bytes(elem, g * hd), v_head = kv_row_bytes(elem, g * vd);
  keys.runs(kmin, kmax + 1, [&](int32_t p0, const uint8_t* r, int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      kv_row_to_f32(elem, r + size_t(i) * keys.stride + k_head, kf + (p0 - kmin + i) * hd, hd);
  });
  vals.runs(kmin, kmax + 1, [&](int32_t p0, const uint8_t* r, int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      kv_row_to_f32(elem, r + size_t(i) * vals.stride + v_head, vf + (p0 - kmin + i) * vd, vd);
  });
  std::vector<float> qr(elem == KvElem::q8_0 ? size_t(hd) : 0);
  const __m512i vlo = _mm512_load_si512(lo), vhi = _mm512_load_si512(hi);
  const __m512 vscale = _mm512_set1_ps(a.scale);
  const int64_t group = a.n_head / a.n_kv;
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (int64_t d = 0; d < hd; ++d)
      for (int64_t r = 0; r < kBlockRows; ++r) qt[d * kBlockRows + r] = r < rows ? q[(t0 + r) * qw + h * hd + d] : 0.f;
    if (elem == KvElem::f16) round_f16(qt, hd * kBlockRows);
    if (elem == KvElem::q8_0)  // quantized per row and head, over the head's 32-element blocks
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t d = 0; d < hd; ++d) qr[d] = qt[d * kBlockRows + r];
        round_q8_0(qr.data(), hd);
        for (int64_t d = 0; d < hd; ++d) qt[d * kBlockRows + r] = qr[d];
      }
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
  run_attention_decode(a, e, q, out);
}

}  // namespace loom::backend::cpu::fast
