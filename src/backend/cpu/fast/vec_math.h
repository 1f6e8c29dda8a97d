// Vectorized fp32 row math of the fast CPU backend: AVX-512 or AVX2 where the build targets
// it, a scalar loop otherwise (the compiler's auto-vectorizer covers the simple ones). The
// transcendental functions use a Cephes-style exp, which keeps the results within fp32 noise
// of the reference's std::exp/std::tanh. Its contract: relative error at most 2e-7 over its
// domain [-87.3, 88.3] (Cephes expf publishes a 1.7e-7 peak; arguments are clamped to the
// domain); tests/backend_fast/attention_kernels_test.cpp holds it, and the softmax and swiglu
// rows built on it, to that bound.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/fp16.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace loom::backend::cpu::fast {

#if defined(__AVX512F__)
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.7f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, fx);
}
inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__)
// The same Cephes exp in 8 lanes; 2^n built in the exponent bits (x clamped so n stays in
// [-126, 127]).
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
// Lanes [0, n) on (n < 8), for the masked loads and stores of a row's tail.
inline __m256i tail_mask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline float hsum256(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
#endif

inline float silu1(float x) { return x / (1.0f + std::exp(-x)); }
inline float gelu_tanh1(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// o[i] = silu(g[i]) * u[i]
inline void swiglu_row(const float* g, const float* u, float* o, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
  }
#elif defined(__AVX2__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
#endif
  for (; i < n; ++i) o[i] = silu1(g[i]) * u[i];
}

// GELU (tanh form) as ggml-cpu evaluates it (GGML_GELU_FP16): through a table indexed by the
// fp16 rounding of x that holds fp16 results, 0 for x <= -10 and x for x >= 10. Same values as
// the reference's gelu_tanh (reference_pointwise.cpp); the table is built on first use.
inline const float* gelu_f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(1 << 16);
    for (uint32_t h = 0; h < (1u << 16); ++h) {
      const float x = loom::quant::fp16_to_fp32(uint16_t(h));
      t[h] = loom::quant::round_to_fp16(gelu_tanh1(x));
    }
    return t;
  }();
  return table.data();
}

inline float gelu_f16(float x, const float* table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return table[loom::quant::fp32_to_fp16(x)];
}

// o[i] = gelu(g[i]) * u[i], gelu as gelu_f16_table
inline void geglu_row(const float* g, const float* u, float* o, int64_t n) {
  const float* table = gelu_f16_table();
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    __m512 gl = _mm512_i32gather_ps(idx, table, 4);
    gl = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), gl, x);
    gl = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), gl);
    _mm512_storeu_ps(o + i, _mm512_mul_ps(gl, _mm512_loadu_ps(u + i)));
  }
#endif
  for (; i < n; ++i) o[i] = gelu_f16(g[i], table) * u[i];
}

// Sum of squares as ggml's rms_norm takes it: each square in fp32, accumulated in double (a
// fp32 sum moves the norm by ~1e-6 relative, enough to move activations across the rounding
// boundaries of the next Q8 activation quantization).
inline double sum_squares(const float* x, int64_t n) {
  int64_t i = 0;
  double s = 0.0;
#if defined(__AVX512F__)
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
  }
  s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
#elif defined(__AVX2__)
  // Lanes of doubles as above (the scalar loop's one chain of dependent adds made the norms of
  // a qwen3 prefill, with their per-head Q/K norms, 2% of its time on AVX2 hosts).
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  const __m256d a = _mm256_add_pd(a0, a1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
#endif
  for (; i < n; ++i) s += double(x[i] * x[i]);
  return s;
}

// o[i] = x[i] * s * w[i]
inline void scale_mul_row(const float* x, float s, const float* w, float* o, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(s);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(w + i)));
#elif defined(__AVX2__)
  const __m256 vs = _mm256_set1_ps(s);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
#endif
  for (; i < n; ++i) o[i] = x[i] * s * w[i];
}

// Softmax pieces of attention. Every element goes through the same exp (exp512, or exp256 on
// the AVX2 level; the tail masked), so an element's value does not depend on where a slice
// starts; sums add lanes.

// s[j] = s[j] * scale; returns max_j s[j].
inline float scale_max(float* s, int64_t n, float scale) {
  int64_t j = 0;
  float mx = -INFINITY;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + j), vs);
    _mm512_storeu_ps(s + j, v);
    m = _mm512_max_ps(m, v);
  }
  if (j < n) {
    const __mmask16 k = __mmask16((1u << (n - j)) - 1);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vs);
    _mm512_mask_storeu_ps(s + j, k, v);
    m = _mm512_mask_max_ps(m, k, m, v);
    j = n;
  }
  mx = _mm512_reduce_max_ps(m);
#elif defined(__AVX2__)
  const __m256 vs = _mm256_set1_ps(scale);
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
    _mm256_storeu_ps(s + j, v);
    m = _mm256_max_ps(m, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  for (const float l : lanes) mx = std::max(mx, l);
#endif
  for (; j < n; ++j) s[j] *= scale, mx = std::max(mx, s[j]);
  return mx;
}

// max_j s[j] (n >= 1), exact: the softmax max of scores that come out of the kernel scaled.
inline float row_max(const float* s, int64_t n) {
  int64_t j = 0;
  float mx = -INFINITY;
#if defined(__AVX512F__)
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
  mx = _mm512_reduce_max_ps(m);
#elif defined(__AVX2__)
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  for (const float l : lanes) mx = std::max(mx, l);
#endif
  for (; j < n; ++j) mx = std::max(mx, s[j]);
  return mx;
}

// s[j] = exp(s[j] - mx); returns Σ_j s[j], summed in lanes (then across them) in a fixed order
// that depends only on n: the exp of attention's softmax, taken once per score.
inline double exp_store_sum(float* s, int64_t n, float mx) {
  int64_t j = 0;
  double sum = 0.0;
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    const __mmask16 k = __mmask16((1u << (n - j)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vm));
    _mm512_mask_storeu_ps(s + j, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
    j = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__)
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < n) {
    const __m256i k = tail_mask8(n - j);
    const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(s + j, k), vm)), _mm256_castsi256_ps(k));
    _mm256_maskstore_ps(s + j, k, e);
    acc = _mm256_add_ps(acc, e);
    j = n;
  }
  sum = hsum256(acc);
#endif
  for (; j < n; ++j) s[j] = std::exp(s[j] - mx), sum += s[j];
  return sum;
}

// w[j] = w[j] * f, rounded to f16 precision when f16 is set: exp(s - m) of a chunk turned into
// the normalized weight, f = exp(m - M) / S for the row's overall max M and sum S.
inline void scale_weights(float* w, int64_t n, float f, bool f16) {
  int64_t j = 0;
#if defined(__AVX512F__)
  const __m512 vf = _mm512_set1_ps(f);
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + j), vf);
    if (f16) v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm512_mask_storeu_ps(w + j, k, v);
  }
#elif defined(__AVX2__)
  const __m256 vf = _mm256_set1_ps(f);
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(w + j), vf);
    if (f16) v = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm256_storeu_ps(w + j, v);
  }
#endif
  for (; j < n; ++j) {
    w[j] *= f;
    if (f16) w[j] = loom::quant::round_to_fp16(w[j]);
  }
}

}  // namespace loom::backend::cpu::fast
