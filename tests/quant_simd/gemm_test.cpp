// gemm at every ISA level against the scalar quant::vec_dot, element by element, on fresh
// random weights (random floats through quantize_row, and raw random blocks with finite
// scales) and random quantized activations.
//
// Tolerance: the kernels' integer partial sums are exact; only the order and grouping of the
// float accumulation (one multiply-add per block or super-block) differs from the reference.
// Both sides' rounding error is bounded by a few ulps times the number of float additions
// times sum|w_i*a_i| (w, a dequantized), so we require |got - ref| <= 1e-4 * sum|w_i*a_i|
// (+1e-30 for all-zero rows) -- more than 10x above the worst case for k <= 2048.
#include <gtest/gtest.h>

#include "common/error.h"
#include "test_util.h"

namespace loom::quant::simd::test {
namespace {

using gguf::TensorType;

// Byte offsets of the fp16 scale fields in one block, to make raw random blocks finite.
std::vector<int> half_fields(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: return {0};
    case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K: return {0, 2};
    case TensorType::Q2_K: return {80, 82};
    case TensorType::Q3_K: return {108};
    case TensorType::Q6_K: return {208};
    default: return {};
  }
}

std::vector<uint8_t> random_weights(TensorType t, int64_t rows, int64_t k, bool raw, std::mt19937_64& rng) {
  const size_t rb = row_size(t, k);
  std::vector<uint8_t> w(rb * size_t(rows));
  if (!raw) {
    for (int64_t r = 0; r < rows; ++r) {
      const auto x = random_floats(rng, k);
      quantize_row(t, x.data(), w.data() + r * rb, k);
    }
    return w;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = uint8_t(byte(rng));
  std::uniform_real_distribution<float> sc(-0.125f, 0.125f);
  if (t == TensorType::F32) {
    for (size_t i = 0; i < w.size(); i += 4) {
      const float f = sc(rng) * 8;
      std::memcpy(&w[i], &f, 4);
    }
  } else if (t == TensorType::F16 || t == TensorType::BF16) {
    for (size_t i = 0; i < w.size(); i += 2) {
      const float f = sc(rng) * 8;
      const uint16_t h = t == TensorType::F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
      std::memcpy(&w[i], &h, 2);
    }
  } else {
    const size_t bb = size_t(block_bytes(t));
    for (size_t off = 0; off < w.size(); off += bb)
      for (int f : half_fields(t)) {
        const uint16_t h = fp32_to_fp16(sc(rng));
        std::memcpy(&w[off + size_t(f)], &h, 2);
      }
  }
  return w;
}

void check_gemm(TensorType wt, int64_t k, int64_t n_act, bool raw, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n_rows = 11;  // covers the 4- and 2-row tiles and their tails
  const TensorType at = act_type(wt);
  const size_t wrb = row_size(wt, k), arb = row_size(at, k) + 8;  // padded activation rows
  const auto w = random_weights(wt, n_rows, k, raw, rng);
  std::vector<uint8_t> act(arb * size_t(n_act));
  std::vector<float> actf(size_t(k) * size_t(n_act));
  for (int64_t a = 0; a < n_act; ++a) {
    const auto x = random_floats(rng, k);
    quantize_row(at, x.data(), act.data() + a * arb, k);
    dequantize_row(at, act.data() + a * arb, actf.data() + a * k, k);
  }
  std::vector<float> wf(static_cast<size_t>(k));
  std::vector<double> ref(size_t(n_rows * n_act)), mag(size_t(n_rows * n_act));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(wt, w.data() + r * wrb, wf.data(), k);
    for (int64_t a = 0; a < n_act; ++a) {
      double m = 0;
      for (int64_t i = 0; i < k; ++i) m += std::fabs(double(wf[size_t(i)]) * actf[size_t(a * k + i)]);
      mag[size_t(a * n_rows + r)] = m;
      ref[size_t(a * n_rows + r)] =
          (wt == TensorType::F16 || wt == TensorType::BF16)
              ? vec_dot(TensorType::F32, wf.data(), act.data() + a * arb, k)
              : vec_dot(wt, w.data() + r * wrb, act.data() + a * arb, k);
    }
  }
  const size_t stride = size_t(n_rows + 3);
  for (Isa l : levels()) {
    force_isa(l);
    std::vector<float> out(stride * size_t(n_act), -7.0f);
    gemm(wt, w.data(), wrb, n_rows, act.data(), arb, n_act, out.data(), stride, k);
    for (int64_t a = 0; a < n_act; ++a)
      for (int64_t r = 0; r < n_rows; ++r) {
        const double rv = ref[size_t(a * n_rows + r)], gv = out[size_t(a) * stride + size_t(r)];
        const double tol = 1e-4 * mag[size_t(a * n_rows + r)] + 1e-30;
        ASSERT_LE(std::fabs(gv - rv), tol)
            << gguf::type_name(wt) << " isa " << level_name(l) << " k " << k << " n_act " << n_act
            << (raw ? " raw" : " quantized") << " row " << r << " act " << a << " ref " << rv << " got " << gv
            << " seed " << seed;
      }
    for (int64_t a = 0; a < n_act; ++a)  // padding between output rows untouched
      for (size_t r = size_t(n_rows); r < stride; ++r) ASSERT_EQ(out[size_t(a) * stride + r], -7.0f);
  }
}

class GemmVsReference : public ::testing::TestWithParam<TensorType> {};

TEST_P(GemmVsReference, RandomWeightsAllTilesAllLevels) {
  IsaGuard guard;
  const TensorType wt = GetParam();
  const uint64_t seed = fresh_seed();
  const bool k_type = block_elems(wt) == 256;
  std::vector<int64_t> ks{256, 512, 2048};
  if (!k_type) ks.insert(ks.end(), {576, 640});
  if (block_elems(wt) == 1) ks.push_back(100);  // float tails
  uint64_t s = seed;
  for (int64_t k : ks)
    for (int64_t n_act : {1, 2, 3, 4, 5, 8, 13})
      for (bool raw : {false, true}) check_gemm(wt, k, n_act, raw, s++);
}

INSTANTIATE_TEST_SUITE_P(Types, GemmVsReference,
                         ::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                           TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K,
                                           TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                           TensorType::Q6_K, TensorType::F32, TensorType::F16,
                                           TensorType::BF16),
                         [](const auto& info) { return std::string(gguf::type_name(info.param)); });

TEST(Gemm, RejectsUnsupportedTypesAndBadShapes) {
  std::vector<uint8_t> w(4096), a(4096);
  std::vector<float> out(16);
  EXPECT_THROW(gemm(TensorType::IQ4_NL, w.data(), 18, 1, a.data(), 34, 1, out.data(), 1, 32), loom::Error);
  EXPECT_THROW(gemm(TensorType::Q4_K, w.data(), 144, 1, a.data(), 292, 1, out.data(), 1, 100), loom::Error);
  EXPECT_THROW(gemm(TensorType::Q4_0, w.data(), 10, 1, a.data(), 34, 1, out.data(), 1, 32), loom::Error);
  EXPECT_THROW(act_type(TensorType::Q8_K), loom::Error);
  EXPECT_EQ(act_type(TensorType::Q4_1), TensorType::Q8_1);
  EXPECT_EQ(act_type(TensorType::F16), TensorType::F32);
}

}  // namespace
}  // namespace loom::quant::simd::test
