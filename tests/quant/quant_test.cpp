// Block types on fresh random inputs (seeded from the clock; the seed is in every failure
// message): quantize -> dequantize error bounds, vec_dot against the float dot of the
// dequantized operands, and clear errors for what is not supported.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"

using gguf::TensorType;
using namespace loom::quant;

namespace {

uint64_t fresh_seed() {
  return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::vector<float> gaussian(std::mt19937_64& rng, int64_t n, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  return x;
}

struct Bound {
  TensorType type;
  double max_rel_rmse;  // RMSE(dequant(quant(x)) - x) / std(x) for Gaussian x, must stay below
};

// Bounds for N(0, s) inputs: about 1.25x the error these formats were measured to reach on
// such data (printed by the test), so a real defect (a wrong shift, a lost scale bit) fails
// while the format's own error passes. Bit-exactness against ggml is tests/python/test_quant.py.
const Bound kBounds[] = {
    {TensorType::F16, 0.0003},  {TensorType::BF16, 0.0021}, {TensorType::Q8_0, 0.0066},
    {TensorType::Q8_1, 0.0068}, {TensorType::Q8_K, 0.0086}, {TensorType::Q6_K, 0.022},
    {TensorType::Q5_0, 0.053},  {TensorType::Q5_1, 0.047},  {TensorType::Q5_K, 0.045},
    {TensorType::Q4_0, 0.107},  {TensorType::Q4_1, 0.098},  {TensorType::Q4_K, 0.090},
    {TensorType::Q3_K, 0.19},   {TensorType::Q2_K, 0.37},
};

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, mean = 0, var = 0;
  for (size_t i = 0; i < x.size(); ++i) mean += x[i];
  mean /= double(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    var += (x[i] - mean) * (x[i] - mean);
  }
  return std::sqrt(err / var);
}

}  // namespace

TEST(Quant, RoundTripErrorWithinBound) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t n = 256 * 64;
  for (const auto& b : kBounds) {
    for (float scale : {1e-3f, 1.f, 30.f}) {
      const auto x = gaussian(rng, n, scale);
      std::vector<uint8_t> q(row_size(b.type, n));
      std::vector<float> y(static_cast<size_t>(n));
      quantize_row(b.type, x.data(), q.data(), n);
      dequantize_row(b.type, q.data(), y.data(), n);
      const double e = rel_rmse(x, y);
      if (scale == 1.f) std::printf("  %-5s rel RMSE %.5f (bound %.4f)\n", std::string(gguf::type_name(b.type)).c_str(), e, b.max_rel_rmse);
      EXPECT_LT(e, b.max_rel_rmse) << gguf::type_name(b.type) << " scale " << scale << " seed=" << seed;
      EXPECT_GT(e, 0.0) << gguf::type_name(b.type) << " is lossy; an exact round trip means a bug";
    }
  }
}

TEST(Quant, ZeroRowsStayZero) {
  const int64_t n = 512;
  std::vector<float> x(n, 0.f), y(n, 1.f);
  for (const auto& b : kBounds) {
    std::vector<uint8_t> q(row_size(b.type, n));
    quantize_row(b.type, x.data(), q.data(), n);
    dequantize_row(b.type, q.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.f) << gguf::type_name(b.type);
  }
}

TEST(Quant, VecDotMatchesDotOfDequantizedRows) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t n = 256 * 16;
  for (TensorType wt : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0,
                        TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
                        TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                        TensorType::Q6_K}) {
    const TensorType at = vec_dot_type(wt);
    for (int trial = 0; trial < 8; ++trial) {
      const auto w = gaussian(rng, n, 0.05f), a = gaussian(rng, n, 2.f);
      std::vector<uint8_t> wq(row_size(wt, n)), aq(row_size(at, n));
      quantize_row(wt, w.data(), wq.data(), n);
      quantize_row(at, a.data(), aq.data(), n);
      std::vector<float> wd(n), ad(n);
      dequantize_row(wt, wq.data(), wd.data(), n);
      dequantize_row(at, aq.data(), ad.data(), n);
      double want = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += double(wd[i]) * ad[i];
        mag += std::fabs(double(wd[i]) * ad[i]);
      }
      const double got = vec_dot(wt, wq.data(), aq.data(), n);
      // Float accumulation over blocks: 1e-5 of sum|w*a|. Q8_1 carries s = d*sum(q) rounded
      // to fp16, so Q4_1/Q5_1 may differ from the exact product by up to 2^-11 of |m*s|
      // per block: 2e-3 of sum|w*a| covers it.
      const double tol = (at == TensorType::Q8_1 ? 2e-3 : 1e-5) * mag;
      EXPECT_NEAR(got, want, tol) << gguf::type_name(wt) << " trial " << trial << " seed=" << seed;
    }
  }
}

TEST(Quant, UnsupportedTypesNameTheType) {
  std::vector<float> x(256, 1.f);
  std::vector<uint8_t> q(4096);
  try {
    quantize_row(TensorType::IQ2_XXS, x.data(), q.data(), 256);
    FAIL() << "expected loom::Error";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(TensorType::MXFP4, q.data(), x.data(), 32), loom::Error);
  EXPECT_THROW(vec_dot_type(TensorType::Q8_K), loom::Error);
  EXPECT_THROW(vec_dot(TensorType::Q8_1, q.data(), q.data(), 32), loom::Error);
  EXPECT_THROW(quantize_row(TensorType::Q4_K, x.data(), q.data(), 100), loom::Error);
  EXPECT_THROW(row_size(TensorType::Q4_0, 33), loom::Error);
}

TEST(Quant, VecDotTypesFollowGgml) {
  EXPECT_EQ(vec_dot_type(TensorType::Q4_0), TensorType::Q8_0);
  EXPECT_EQ(vec_dot_type(TensorType::Q4_1), TensorType::Q8_1);
  EXPECT_EQ(vec_dot_type(TensorType::Q5_0), TensorType::Q8_0);
  EXPECT_EQ(vec_dot_type(TensorType::Q5_1), TensorType::Q8_1);
  EXPECT_EQ(vec_dot_type(TensorType::Q8_0), TensorType::Q8_0);
  for (TensorType t : {TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                       TensorType::Q6_K})
    EXPECT_EQ(vec_dot_type(t), TensorType::Q8_K);
  EXPECT_EQ(vec_dot_type(TensorType::F32), TensorType::F32);
  EXPECT_EQ(vec_dot_type(TensorType::F16), TensorType::F16);
  EXPECT_EQ(vec_dot_type(TensorType::BF16), TensorType::BF16);
}
