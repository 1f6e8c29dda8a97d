// quant::ggml's scalar copies of llama.cpp's x86 arithmetic: properties that hold whatever the
// oracle (bit-identity with ggml itself is tests/python/test_quant.py and test_correctness.py).
// Fresh random inputs, seed printed on failure.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/error.h"
#include "quant/fp16.h"
#include "quant/ggml_order.h"
#include "quant/quant.h"

namespace g = loom::quant::ggml;
using gguf::TensorType;

namespace {

uint64_t fresh_seed() { return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()); }

int64_t ulps(float a, float b) {
  return std::llabs(int64_t(std::bit_cast<int32_t>(a)) - int64_t(std::bit_cast<int32_t>(b)));
}

TEST(GgmlOrder, ExpfWithinTwoUlpsOfLibmAndSaturates) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = u(rng);
    ASSERT_LE(ulps(g::expf(x), std::exp(x)), 2) << "x=" << x << " seed " << seed;
  }
  EXPECT_EQ(g::expf(-INFINITY), 0.0f);
  EXPECT_EQ(g::expf(-1000.0f), 0.0f);
  EXPECT_EQ(g::expf(1000.0f), INFINITY);
  EXPECT_EQ(g::expf(0.0f), 1.0f);
  EXPECT_NEAR(g::silu(3.0f), 3.0f / (1.0f + std::exp(-3.0f)), 1e-6f);
}

// The registers' own horizontal adds, as ggml writes them (GCC's _mm512_reduce_add_ps and
// ggml's hsum_float_8), on values whose float sum depends on the grouping.
__attribute__((target("avx512f"))) float reduce16_intrinsic(const float* v) {
  return _mm512_reduce_add_ps(_mm512_loadu_ps(v));
}
__attribute__((target("avx2"))) float hsum8_intrinsic(const float* v) {
  const __m256 x = _mm256_loadu_ps(v);
  __m128 r = _mm256_extractf128_ps(x, 1);
  r = _mm_add_ps(r, _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

TEST(GgmlOrder, HorizontalSumsAssociateAsTheRegisters) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2"))
    GTEST_SKIP() << "this CPU lacks AVX-512F/AVX2: the intrinsics this test compares the scalar sums with cannot run "
                    "here (a platform limit, not a missing input)";
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> e(-30.0f, 30.0f);
  std::normal_distribution<float> nd;
  int differ = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    float v[16];
    for (float& x : v) x = nd(rng) * std::exp2(e(rng));
    ASSERT_EQ(std::bit_cast<uint32_t>(g::hsum16(v)), std::bit_cast<uint32_t>(reduce16_intrinsic(v))) << "seed " << seed;
    ASSERT_EQ(std::bit_cast<uint32_t>(g::hsum8(v)), std::bit_cast<uint32_t>(hsum8_intrinsic(v))) << "seed " << seed;
    float seq = 0;
    for (float x : v) seq += x;
    differ += seq != g::hsum16(v);
  }
  EXPECT_GT(differ, 0);  // the inputs do tell association orders apart
}

TEST(GgmlOrder, RowDotAndSoftmaxSumIgnoreZeroTermsAndStayNearTheExactSum) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  for (bool batched : {true, false}) {
    for (int64_t n : {64, 256, 200}) {
      std::vector<float> a(n), b(n);
      for (int64_t i = 0; i < n; ++i) a[i] = (i % 3 == 0) ? 0.0f : nd(rng), b[i] = nd(rng);
      g::RowDot all(batched, n), sparse(batched, n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        all.add(i, a[i], b[i]);
        if (a[i] != 0.0f) sparse.add(i, a[i], b[i]);
        exact += double(a[i]) * b[i];
        mag += std::fabs(double(a[i]) * b[i]);
      }
      EXPECT_EQ(all.sum(), sparse.sum()) << "seed " << seed;
      EXPECT_NEAR(all.sum(), exact, 1e-6 * mag) << "batched " << batched << " n " << n << " seed " << seed;
    }
  }
  g::SoftmaxSum s1, s2;
  double exact = 0;
  for (int64_t c = 0; c < 300; ++c) {
    const float e = (c % 5 == 0) ? 0.0f : std::fabs(nd(rng));
    s1.add(c, e);
    if (e != 0.0f) s2.add(c, e);
    exact += e;
  }
  const double t1 = s1.sum();
  EXPECT_EQ(t1, s2.sum());
  EXPECT_NEAR(t1, exact, 1e-5 * exact);
  EXPECT_EQ(s1.sum(), 0.0);  // sum() starts over
}

TEST(GgmlOrder, RuntimeQuantizerRoundsTiesToEvenAndScalesBy127OverAmax) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16) + 0.5f;  // amax 15.5 -> id 127/15.5
  x[0] = 127.0f;                                              // amax 127 -> id 1: halves are ties
  loom::quant::BlockQ8_0 b;
  g::quantize_activations(TensorType::Q8_0, x.data(), &b, 32);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(int(b.qs[j]), int(std::nearbyint(x[j]))) << j;
  EXPECT_EQ(int(b.qs[0]), 127);
  EXPECT_EQ(loom::quant::fp16_to_fp32(b.d), 1.0f);
  std::vector<uint8_t> y(64);
  EXPECT_THROW(g::quantize_activations(TensorType::Q4_0, x.data(), y.data(), 32), loom::Error);
  EXPECT_THROW(g::quantize_activations(TensorType::Q8_0, x.data(), y.data(), 31), loom::Error);
}

TEST(GgmlOrder, ExactnessFlagsFollowTheKernelChoice) {
  EXPECT_TRUE(g::dot_is_exact(TensorType::Q4_0, 1));
  EXPECT_TRUE(g::dot_is_exact(TensorType::Q4_K, 1));
  EXPECT_TRUE(g::dot_is_exact(TensorType::Q3_K, 8));
  EXPECT_FALSE(g::dot_is_exact(TensorType::Q3_K, 7));
  EXPECT_FALSE(g::dot_is_exact(TensorType::F32, 64));
}

}  // namespace
