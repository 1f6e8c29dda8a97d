// The tensor-core path of the batched matmuls (matmul_mma.cu, reached through matmul_q8_parts
// with an MmaPath) on fresh random inputs, outputs poisoned with NaN: every weight type it takes,
// row counts that fill one to eight seq tiles, a partial last tile and two passes (70 rows),
// weights whose rows are not a multiple of the 16-row tile, both block shapes (K split over the
// warps of blocks of 4 or 8; four row tiles a block) — each against double-precision dots of the
// reference-dequantized weights with the dequantized q8_1 activations (the epilogues on this path:
// fused_test.cpp). Needs a GPU (run by scripts/gpu-check, not ctest).
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

// One store launch of `rows` fresh random activation rows through the MMA path on w, each output
// against the double-precision dot within rel of its sum of |terms|.
void check_store(std::mt19937_64& rng, const Weight& w, int64_t rows, int split_warps, MmaTiles tiles, double rel) {
  const int64_t N = w.N, K = w.K;
  const auto x = random_floats(rng, size_t(rows * K));
  auto dx = DeviceBuffer::of(x);
  DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * sizeof(float2));
  DeviceBuffer dy(size_t(rows * N) * sizeof(float)), scratch(mma_scratch_bytes(rows, K, tiles != MmaTiles::off));
  dy.poison();
  scratch.poison();
  quantize_q8_1(dx.get<float>(), K, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
  const MatmulPart part{w.type, w.packed.get<uint8_t>(), w.row_bytes, N, dy.get<float>(), N};
  matmul_q8_parts(&part, 1, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr, {},
                  {scratch.get(), scratch.bytes(), 1, split_warps, tiles});
  sync();
  const auto y = dy.to_host<float>();
  const auto xq = quantize_ref(x, K, rows, K).dequantized();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < N; ++n) {
      auto [ref, mag] = ref_dot(w, xq, r, n);
      ASSERT_NEAR(y[size_t(r * N + n)], ref, rel * mag + 1e-6) << "row " << r << " col " << n;
    }
}

TEST_P(MatmulMma, MatchesDequantizedWeightsDotQuantizedActivations) {
  const auto [type, N, K] = GetParam();
  SCOPED_TRACE(::testing::Message() << "type " << gguf::type_name(type) << " N " << N << " K " << K << " seed "
                                    << fresh_seed());
  ASSERT_TRUE(mma_device()) << "the tensor-core path needs sm_80 or later";
  ASSERT_TRUE(has_mma_kernel(type));
  std::mt19937_64 rng(fresh_seed() + uint64_t(type) * 131 + uint64_t(N * K));
  const Weight w = random_weight(rng, type, N, K);
  for (int64_t rows : {4, 8, 13, 24, 33, 64, 70})
  for (int shape : {4, 8, 0}) {  // K split over blocks of 4 or 8 warps (mma_wide_split); 0: the tiled f16 kernel
    SCOPED_TRACE(::testing::Message() << "rows " << rows << " shape " << shape);
    if (shape == 0) check_store(rng, w, rows, 4, MmaTiles::always, kF16Rel);
    else check_store(rng, w, rows, shape, MmaTiles::off, kIntDotRel);
  }
}

// N = 1040: 17 blocks of four row tiles, too few for that shape, so K is split at every row
// count; N = 16900: 265 blocks of four row tiles from 25 rows on (the other shape), the last
// block and tile part-filled. The tiled kernel: K = 576 ends in a chunk of 2 groups (legacy
// types); N = 67 is one block of 128 rows, so K is split over blocks, one chunk each (3; Q4_K
// at K = 4096 over 16 slices); Q6_K's other bytes start off 16-byte boundaries in every other
// block; N = 16900 needs no split on 132 SMs (its one chunk a block: the test below walks many).
INSTANTIATE_TEST_SUITE_P(
    WeightTypes, MatmulMma,
    ::testing::Values(Case{TensorType::Q4_0, 67, 576}, Case{TensorType::Q4_1, 67, 576}, Case{TensorType::Q5_0, 67, 576},
                      Case{TensorType::Q8_0, 67, 576}, Case{TensorType::Q4_K, 67, 512}, Case{TensorType::Q5_K, 67, 768},
                      Case{TensorType::Q6_K, 67, 768}, Case{TensorType::Q6_K, 1040, 256},
                      Case{TensorType::Q4_K, 200, 4096}, Case{TensorType::Q8_0, 130, 1056},
                      Case{TensorType::Q4_K, 16900, 256}),
    [](const auto& info) {
      return std::string(gguf::type_name(info.param.type)) + "_N" + std::to_string(info.param.N) + "_K" +
             std::to_string(info.param.K);
    });

// The tiled kernel's blocks walking several chunks each through its ring of stages (the cases
// above split K into one chunk a block): weights of two 128-row tiles an SM need no split, and K
// = 1024 is four chunks, so the ring of three stages wraps; 40 rows (five seq tiles of eight),
// Q4_K and Q6_K.
TEST(MatmulMma, TiledKernelWalksSeveralChunksABlock) {
  ASSERT_TRUE(mma_device());
  const int64_t N = 2 * 128 * int64_t(device_sms()) + 5, K = 1024, rows = 40;
  std::mt19937_64 rng(fresh_seed() + 7);
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed() + 7 << " N " << N);
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    SCOPED_TRACE(gguf::type_name(type));
    check_store(rng, random_weight(rng, type, N, K), rows, 4, MmaTiles::always, kF16Rel);
  }
}

// A scratch too small for the rows, or a split over other than 4 or 8 warps, is refused before
// any launch. (The parts launch with a residual, the gated epilogues and their q8_1 output on
// this path: fused_test.cpp's MatmulQ8Parts.TensorCorePathMixedTypesResidualAndGatedEpilogues.)
TEST(MatmulMma, TooSmallScratchAndOddSplitAreRefused) {
  ASSERT_TRUE(mma_device());
  std::mt19937_64 rng(fresh_seed());
  const int64_t K = 512;
  const Weight w = random_weight(rng, TensorType::Q4_K, 67, K);
  DeviceBuffer small(64), enough(mma_scratch_bytes(8, K));
  const MatmulPart p{TensorType::Q4_K, w.packed.get<uint8_t>(), w.row_bytes, 67, nullptr, 67};
  EXPECT_THROW(matmul_q8_parts(&p, 1, MatmulEpilogue::store, K, nullptr, nullptr, 8, nullptr, {},
                               {small.get(), small.bytes(), 4}),
               loom::Error);
  EXPECT_THROW(matmul_q8_parts(&p, 1, MatmulEpilogue::store, K, nullptr, nullptr, 8, nullptr, {},
                               {enough.get(), enough.bytes(), 4, 6}),
               loom::Error);
}

}  // namespace
}  // namespace loom::backend::cuda
