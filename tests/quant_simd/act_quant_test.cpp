// quantize_activations at every ISA level must write exactly the bytes of the scalar
// quant::ggml::quantize_activations, on fresh random rows and on rows built to hit rounding ties.
#include <gtest/gtest.h>

#include "common/error.h"
#include "quant/ggml_order.h"
#include "test_util.h"

namespace loom::quant::simd::test {
namespace {

using gguf::TensorType;

void expect_same_bytes(TensorType t, const std::vector<float>& x, uint64_t seed, Isa l) {
  const int64_t n = int64_t(x.size());
  const size_t bytes = row_size(t, n);
  std::vector<uint8_t> ref(bytes, 0xAA), got(bytes, 0x55);
  ggml::quantize_activations(t, x.data(), ref.data(), n);
  force_isa(l);
  quantize_activations(t, x.data(), got.data(), n);
  for (size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(int(ref[i]), int(got[i])) << gguf::type_name(t) << " isa " << level_name(l) << " byte " << i
                                        << " of " << bytes << " seed " << seed;
}

TEST(QuantizeActivations, RandomRowsMatchReferenceBytes) {
  IsaGuard guard;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (TensorType t : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K})
    for (int64_t n : {256, 512, 2048, 4096})
      for (int rep = 0; rep < 8; ++rep) {
        const auto x = random_floats(rng, n);
        for (Isa l : levels()) expect_same_bytes(t, x, seed, l);
      }
}

// Blocks whose scale comes out as exactly 1 so that x*id lands on halves (2.5, -3.5, ...):
// all three types round them to even; also an all-zero block and a block whose
// largest magnitude appears with both signs (the first one sets Q8_K's sign).
TEST(QuantizeActivations, TiesZerosAndSignOfMax) {
  IsaGuard guard;
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 60) - 30) + ((i & 1) ? 0.5f : 0.0f);
  for (size_t b = 0; b < 8; ++b) x[b * 32] = 127.0f;  // Q8_0: amax 127 -> d = 1
  x[256 + 3] = -127.0f;                                 // Q8_K second block: max = -127 first
  x[256 + 9] = 127.0f;
  x[0] = -127.0f;  // first Q8_K block's max is -127 -> iscale = 1
  for (size_t i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero Q8_0 block
  for (TensorType t : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K})
    for (Isa l : levels()) expect_same_bytes(t, x, 0, l);
  std::vector<float> z(256, 0.0f);
  for (TensorType t : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K})
    for (Isa l : levels()) expect_same_bytes(t, z, 0, l);
}

TEST(QuantizeActivations, RejectsOtherTypesAndPartialBlocks) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> y(4096);
  EXPECT_THROW(quantize_activations(TensorType::Q4_0, x.data(), y.data(), 256), loom::Error);
  EXPECT_THROW(quantize_activations(TensorType::Q8_K, x.data(), y.data(), 100), loom::Error);
  EXPECT_THROW(quantize_activations(TensorType::Q8_0, x.data(), y.data(), 40), loom::Error);
}

TEST(Dispatch, IsaNameMatchesLevel) {
  IsaGuard guard;
  for (Isa l : levels()) {
    force_isa(l);
    const std::string n = isa_name();
    EXPECT_EQ(n, l == Isa::avx512 ? "avx512vnni" : l == Isa::avx2 ? "avx2" : "scalar");
  }
}

}  // namespace
}  // namespace loom::quant::simd::test
