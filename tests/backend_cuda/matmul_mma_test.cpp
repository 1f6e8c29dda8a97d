// The tensor-core path of the batched matmuls (matmul_mma.cu, reached through matmul_q8_parts
// with an MmaPath) on fresh random inputs, outputs poisoned with NaN: every weight type it takes,
// row counts that fill one to eight seq tiles, a partial last tile and two passes (70 rows),
// weights whose rows are not a multiple of the 16-row tile, both block shapes (K split over the
// warps; four row tiles a block), the residual and gated epilogues and the gated output's q8_1
// form — each against double-precision dots of the reference-dequantized weights with the
// dequantized q8_1 activations. Needs a GPU (run by scripts/gpu-check, not ctest).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "common/error.h"
#include "q8_reference.h"
#include "random_inputs.h"
#include "random_weight.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

void sync() { LOOM_CUDA_CHECK(cudaDeviceSynchronize()); }

struct Case {
  TensorType type;
  int64_t N, K;
};

class MatmulMma : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulMma, MatchesDequantizedWeightsDotQuantizedActivations) {
  const auto [type, N, K] = GetParam();
  SCOPED_TRACE(::testing::Message() << "type " << gguf::type_name(type) << " N " << N << " K " << K << " seed "
                                    << fresh_seed());
  ASSERT_TRUE(mma_device()) << "the tensor-core path needs sm_80 or later";
  ASSERT_TRUE(has_mma_kernel(type));
  std::mt19937_64 rng(fresh_seed() + uint64_t(type) * 131 + uint64_t(N * K));
  const Weight w = random_weight(rng, type, N, K);
  for (int64_t rows : {4, 8, 13, 24, 33, 64, 70}) {
    SCOPED_TRACE(::testing::Message() << "rows " << rows);
    const auto x = random_floats(rng, size_t(rows * K));
    auto dx = DeviceBuffer::of(x);
    DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * sizeof(float2));
    DeviceBuffer dy(size_t(rows * N) * sizeof(float)), scratch(mma_scratch_bytes(rows, K));
    dy.poison();
    scratch.poison();
    quantize_q8_1(dx.get<float>(), K, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
    const MatmulPart part{type, w.packed.get<uint8_t>(), w.row_bytes, N, dy.get<float>(), N};
    matmul_q8_parts(&part, 1, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr, {},
                    {scratch.get(), scratch.bytes(), 1});
    sync();
    const auto y = dy.to_host<float>();
    const auto xq = quantize_ref(x, K, rows, K).dequantized();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < N; ++n) {
        auto [ref, mag] = ref_dot(w, xq, r, n);
        ASSERT_NEAR(y[size_t(r * N + n)], ref, 1e-5 * mag + 1e-6) << "row " << r << " col " << n;
      }
  }
}

// N = 1040: 17 blocks of four row tiles, too few for that shape, so K is split at every row
// count; N = 16900: 265 blocks of four row tiles from 25 rows on (the other shape), the last
// block and tile part-filled.
INSTANTIATE_TEST_SUITE_P(
    WeightTypes, MatmulMma,
    ::testing::Values(Case{TensorType::Q4_0, 67, 576}, Case{TensorType::Q4_1, 67, 576}, Case{TensorType::Q5_0, 67, 576},
                      Case{TensorType::Q8_0, 67, 576}, Case{TensorType::Q4_K, 67, 512}, Case{TensorType::Q5_K, 67, 768},
                      Case{TensorType::Q6_K, 67, 768}, Case{TensorType::Q6_K, 1040, 256},
                      Case{TensorType::Q4_K, 16900, 256}),
    [](const auto& info) {
      return std::string(gguf::type_name(info.param.type)) + "_N" + std::to_string(info.param.N) + "_K" +
             std::to_string(info.param.K);
    });

// q, k, v of three types in one launch (one with a residual), then gate and up with each gated
// epilogue and the output's q8_1 form, on the tensor-core path; and the warp-per-row path below
// min_rows gives the same results within the same bound.
TEST(MatmulMma, PartsResidualGatedEpiloguesAndQ8Output) {
  ASSERT_TRUE(mma_device());
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t K = 512;
  std::vector<Weight> w;
  w.push_back(random_weight(rng, TensorType::Q4_K, 67, K));
  w.push_back(random_weight(rng, TensorType::Q6_K, 33, K));
  w.push_back(random_weight(rng, TensorType::Q5_0, 64, K));
  w.push_back(random_weight(rng, TensorType::Q8_0, 64, K));
  for (int64_t rows : {5, 16, 40}) {
    SCOPED_TRACE(::testing::Message() << "rows " << rows);
    const auto x = random_floats(rng, size_t(rows * K));
    auto dx = DeviceBuffer::of(x);
    DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * 8), scratch(mma_scratch_bytes(rows, K));
    quantize_q8_1(dx.get<float>(), K, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
    const auto xq = quantize_ref(x, K, rows, K).dequantized();
    const MmaPath mma{scratch.get(), scratch.bytes(), 4};
    std::vector<DeviceBuffer> ys;
    for (int i = 0; i < 3; ++i) ys.emplace_back(size_t(rows * w[i].N) * 4), ys.back().poison();
    const auto res = random_floats(rng, size_t(rows * w[1].N));
    auto dres = DeviceBuffer::of(res);
    std::vector<MatmulPart> parts;
    for (int i = 0; i < 3; ++i)
      parts.push_back({w[i].type, w[i].packed.get<uint8_t>(), w[i].row_bytes, w[i].N, ys[i].get<float>(), w[i].N});
    parts[1].residual = dres.get<float>();
    parts[1].ld_residual = w[1].N;
    matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr, {},
                    mma);
    sync();
    for (int i = 0; i < 3; ++i) {
      const auto y = ys[i].to_host<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t n = 0; n < w[i].N; ++n) {
          auto [ref, mag] = ref_dot(w[i], xq, r, n);
          const double extra = i == 1 ? res[size_t(r * w[1].N + n)] : 0.0;
          ASSERT_NEAR(y[size_t(r * w[i].N + n)], ref + extra, 1e-5 * mag + 1e-6 * (1 + std::abs(extra)))
              << "part " << i << " row " << r << " col " << n;
        }
    }
    const int64_t N = 64;
    DeviceBuffer codes(size_t(rows * N)), scales(size_t(rows * N / 32) * 8), counters(size_t(N / 32) * 4);
    LOOM_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    for (MatmulEpilogue e : {MatmulEpilogue::swiglu, MatmulEpilogue::geglu}) {
      DeviceBuffer dy(size_t(rows * N) * 4);
      for (auto* b : {&dy, &codes, &scales}) b->poison();
      const MatmulPart gu[2] = {{w[2].type, w[2].packed.get<uint8_t>(), w[2].row_bytes, N, dy.get<float>(), N},
                                {w[3].type, w[3].packed.get<uint8_t>(), w[3].row_bytes, N, nullptr, 0}};
      matmul_q8_parts(gu, 2, e, K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                      {codes.get<int8_t>(), scales.get<float2>(), counters.get<int>()}, mma);
      sync();
      const auto y = dy.to_host<float>();
      const Q8Rows yq = quantize_ref(y, N, rows, N);
      const auto c = codes.to_host<int8_t>();
      const auto d = scales.to_host<float2>();
      for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], yq.q[i]) << "output code " << i;
      for (size_t b = 0; b < d.size(); ++b) ASSERT_TRUE(d[b].x == yq.d[b] && d[b].y == yq.sum[b]) << "output block " << b;
      for (int v : counters.to_host<int>()) ASSERT_EQ(v, 0) << "counters are left zero";
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t n = 0; n < N; ++n) {
          auto [g, gm] = ref_dot(w[2], xq, r, n);
          auto [u, um] = ref_dot(w[3], xq, r, n);
          const double act = e == MatmulEpilogue::swiglu ? g / (1 + std::exp(-g))
                                                         : 0.5 * g * (1 + std::tanh(0.7978845608 * g * (1 + 0.044715 * g * g)));
          const double tol = 1.2 * 1e-5 * gm * std::abs(u) + 1e-5 * um * std::abs(act) + 1e-5 * (1 + std::abs(act * u));
          ASSERT_NEAR(y[size_t(r * N + n)], act * u, tol) << "row " << r << " col " << n;
        }
    }
  }
  // A scratch too small for the rows is refused before any launch.
  DeviceBuffer small(64);
  const MatmulPart p{TensorType::Q4_K, w[0].packed.get<uint8_t>(), w[0].row_bytes, 67, nullptr, 67};
  EXPECT_THROW(matmul_q8_parts(&p, 1, MatmulEpilogue::store, K, nullptr, nullptr, 8, nullptr, {},
                               {small.get(), small.bytes(), 4}),
               loom::Error);
}

}  // namespace
}  // namespace loom::backend::cuda
