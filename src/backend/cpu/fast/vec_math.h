// Vectorized fp32 row math of the fast CPU backend: AVX-512 where the build targets it, a
// scalar loop otherwise (the compiler's auto-vectorizer covers the simple ones). The
// transcendental functions use a Cephes-style exp (relative error ~2e-7), which keeps the
// results within fp32 noise of the reference's std::exp/std::tanh.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
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
#endif
  for (; i < n; ++i) o[i] = silu1(g[i]) * u[i];
}

// o[i] = gelu_tanh(g[i]) * u[i], tanh(y) = 1 - 2 / (exp(2y) + 1)
inline void geglu_row(const float* g, const float* u, float* o, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f), half = _mm512_set1_ps(0.5f);
  const __m512 c0 = _mm512_set1_ps(0.79788456080286535587989211986876f), c1 = _mm512_set1_ps(0.044715f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(c0, x), _mm512_fmadd_ps(_mm512_mul_ps(c1, x), x, one));
    const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(exp512(_mm512_add_ps(y, y)), one)));
    const __m512 gl = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, t));
    _mm512_storeu_ps(o + i, _mm512_mul_ps(gl, _mm512_loadu_ps(u + i)));
  }
#endif
  for (; i < n; ++i) o[i] = gelu_tanh1(g[i]) * u[i];
}

// Sum of squares, accumulated in fp32 lanes (the reference uses double; the difference is
// far below the tolerance a Q8 activation quantization already costs).
inline float sum_squares(const float* x, int64_t n) {
  int64_t i = 0;
  float s = 0.f;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  s = hsum512(acc);
#endif
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

// o[i] = x[i] * s * w[i]
inline void scale_mul_row(const float* x, float s, const float* w, float* o, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(s);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(w + i)));
#endif
  for (; i < n; ++i) o[i] = x[i] * s * w[i];
}

}  // namespace loom::backend::cpu::fast
