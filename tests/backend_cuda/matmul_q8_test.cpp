// The integer-dot decode path (matmul_q8.cu) against scalar CPU references on fresh random
// inputs, outputs poisoned with NaN: quantize_q8_1 against a scalar q8_1 quantizer written to
// the kernel's contract, and matmul_q8 on packed weights against the double-precision dot of
// the reference-dequantized weights with the dequantized q8_1 activations. Needs a GPU (run by
// scripts/gpu-check, not ctest).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "common/error.h"
#include "quant/quant.h"
#include "q8_reference.h"
#include "random_inputs.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

TEST(QuantizeQ8_1, CodesScalesAndSumsEqualTheScalarQuantizer) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t rows = 5, K = 4096, ldx = K + 64;  // a stride wider than the row
  auto x = random_floats(rng, size_t(rows * ldx));
  for (int i = 0; i < 32; ++i) x[size_t(ldx + 64 + i)] = 0.f;  // an all-zero block: d = 0, codes 0
  auto dx = DeviceBuffer::of(x);
  DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * sizeof(float2));
  dq.poison();
  dds.poison();
  quantize_q8_1(dx.get<float>(), ldx, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const auto q = dq.to_host<int8_t>();
  const auto ds = dds.to_host<float2>();
  const Q8Rows ref = quantize_ref(x, ldx, rows, K);
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], ref.q[i]) << "element " << i;
  for (size_t b = 0; b < ds.size(); ++b) {
    ASSERT_EQ(ds[b].x, ref.d[b]) << "block " << b;
    ASSERT_EQ(ds[b].y, ref.sum[b]) << "block " << b;
  }
}

struct Case {
  TensorType type;
  int64_t K;
};

class MatmulQ8 : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulQ8, MatchesDequantizedWeightsDotQuantizedActivations) {
  const auto [type, K] = GetParam();
  SCOPED_TRACE(::testing::Message() << "type " << gguf::type_name(type) << " K " << K << " seed " << fresh_seed());
  ASSERT_TRUE(has_q8_kernel(type, K));
  std::mt19937_64 rng(fresh_seed() + uint64_t(type) * 977 + uint64_t(K));
  const int64_t N = 67;  // not a multiple of the warps per block
  const size_t rb = quant::row_size(type, K);
  std::vector<uint8_t> w(rb * N);
  std::vector<float> wf(size_t(N * K));
  for (int64_t n = 0; n < N; ++n) {
    const auto src = random_floats(rng, size_t(K));
    quant::quantize_row(type, src.data(), w.data() + n * rb, K);
    quant::dequantize_row(type, w.data() + n * rb, wf.data() + n * K, K);
  }
  const auto packed = pack_rows(type, w.data(), N, K);
  ASSERT_EQ(packed.size() % size_t(N), 0u);
  auto dw = DeviceBuffer::of(packed);
  // Grids: the resident warps (one tile a warp here, N being small: a pair of rows at one
  // activation row, the odd N's last pair one row; a row at several), 5 warps streaming 6 or 7
  // pairs (13 or 14 rows) each, and one tile a warp named.
  for (int64_t rows : {1, 3, 8, 13})
  for (int64_t warps : {int64_t(0), int64_t(5), kWarpPerRow}) {
    SCOPED_TRACE(::testing::Message() << "max_warps " << warps);
    const auto x = random_floats(rng, size_t(rows * K));
    auto dx = DeviceBuffer::of(x);
    DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * sizeof(float2)), dy(size_t(rows * N) * sizeof(float));
    dy.poison();
    quantize_q8_1(dx.get<float>(), K, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
    matmul_q8(type, dw.get<uint8_t>(), packed.size() / size_t(N), N, K, dq.get<int8_t>(), dds.get<float2>(), rows,
              dy.get<float>(), N, nullptr, warps);
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto y = dy.to_host<float>();
    const auto xq = quantize_ref(x, K, rows, K).dequantized();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += double(wf[n * K + k]) * xq[r * K + k];
          mag += std::abs(double(wf[n * K + k]) * xq[r * K + k]);
        }
        ASSERT_NEAR(y[r * N + n], ref, 1e-5 * mag + 1e-6) << "row " << r << " col " << n << " of " << rows;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WeightTypes, MatmulQ8,
    ::testing::Values(Case{TensorType::Q4_0, 576}, Case{TensorType::Q4_1, 576}, Case{TensorType::Q5_0, 576},
                      Case{TensorType::Q8_0, 576}, Case{TensorType::Q8_0, 4096}, Case{TensorType::Q4_K, 768},
                      Case{TensorType::Q5_K, 768}, Case{TensorType::Q6_K, 768}, Case{TensorType::Q4_K, 4096},
                      Case{TensorType::Q6_K, 4096}, Case{TensorType::Q5_K, 2048}),
    [](const auto& info) {
      return std::string(gguf::type_name(info.param.type)) + "_K" + std::to_string(info.param.K);
    });

TEST(MatmulQ8, TypesWithoutAKernelAreRefused) {
  EXPECT_FALSE(has_q8_kernel(TensorType::F16, 4096));
  EXPECT_FALSE(has_q8_kernel(TensorType::Q4_K, 576));  // not a whole number of 256-blocks
  EXPECT_THROW(pack_rows(TensorType::F32, nullptr, 1, 64), loom::Error);
}

}  // namespace
}  // namespace loom::backend::cuda
