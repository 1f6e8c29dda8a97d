// Batch invariance of the kernels: the bits of out[a][r] depend on weight row r and activation
// row a only, not on how many activation rows share the call (1-4: the decode tiles, 5+: the
// prefill GEMM tiles of several groups and rows, with tails of 1-4 rows and row chunks), nor on
// which rows the call covers (row tiles of 1, 2 or 4 and their tails) -- at every ISA level,
// for gemm() on stored rows and gemm_packed() on x8 groups. Inner dims of several (super-)
// blocks, since a sum of one or two block products is the same in any order.
// The reference side of this contract is the same call with a single activation row and a
// single weight row; gemm_test.cpp / packed_test.cpp check that against quant::vec_dot.
#include <gtest/gtest.h>

#include "quant/simd/packed.h"
#include "test_util.h"

namespace loom::quant::simd::test {
namespace {

using gguf::TensorType;

struct Case {
  TensorType wt;
  int64_t k, rows, n_act;
  std::vector<uint8_t> w, act;
  size_t wrb, arb;
};

Case make_case(TensorType wt, int64_t k, int64_t rows, int64_t n_act, std::mt19937_64& rng) {
  Case c{wt, k, rows, n_act, {}, {}, row_size(wt, k), row_size(act_type(wt), k)};
  c.w.resize(c.wrb * size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto x = random_floats(rng, k);
    quantize_row(wt, x.data(), c.w.data() + r * c.wrb, k);
  }
  c.act.resize(c.arb * size_t(n_act));
  for (int64_t a = 0; a < n_act; ++a) {
    const auto x = random_floats(rng, k);
    quantize_activations(act_type(wt), x.data(), c.act.data() + a * c.arb, k);
  }
  return c;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// out of one call over weight rows [r0, r1) and activation rows [a0, a1), row-major n_act x rows.
void call(const Case& c, bool packed, const std::vector<uint8_t>& pk, int64_t r0, int64_t r1, int64_t a0,
          int64_t a1, std::vector<float>& out) {
  float* o = out.data() + a0 * c.rows + r0;
  const uint8_t* x = c.act.data() + a0 * c.arb;
  if (packed)
    gemm_packed(c.wt, pk.data() + size_t(r0 / kPackRows) * packed_group_bytes(c.wt, c.k), r1 - r0, x, c.arb,
                a1 - a0, o, size_t(c.rows), c.k);
  else
    gemm(c.wt, c.w.data() + size_t(r0) * c.wrb, c.wrb, r1 - r0, x, c.arb, a1 - a0, o, size_t(c.rows), c.k);
}

void check_invariant(TensorType wt, int64_t k, bool packed, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t rows = 24, n_act = 21;  // 3 x8 groups; 21 activations: GEMM tiles of 6, 8 or 12 rows and their tails
  const Case c = make_case(wt, k, rows, n_act, rng);
  std::vector<uint8_t> pk;
  if (packed) {
    pk.resize(packed_group_bytes(wt, k) * size_t(rows / kPackRows));
    pack_rows(wt, c.w.data(), c.wrb, rows, k, pk.data());
  }
  const int64_t step = packed ? kPackRows : 1;
  for (Isa l : levels()) {
    force_isa(l);
    // The reference: one activation row per call, all rows (the decode GEMV shape).
    std::vector<float> one(size_t(rows * n_act));
    for (int64_t a = 0; a < n_act; ++a) call(c, packed, pk, 0, rows, a, a + 1, one);
    // Every split of the activations into calls of n rows, and calls over sub-ranges of rows.
    for (int64_t n : {2, 3, 5, 7, 8, 9, 11, 13, 21}) {
      for (int64_t r_split : {rows, step, 2 * step, 3 * step}) {
        std::vector<float> got(size_t(rows * n_act), -7.0f);
        for (int64_t a0 = 0; a0 < n_act; a0 += n)
          for (int64_t r0 = 0; r0 < rows; r0 += r_split)
            call(c, packed, pk, r0, std::min(rows, r0 + r_split), a0, std::min(n_act, a0 + n), got);
        for (int64_t a = 0; a < n_act; ++a)
          for (int64_t r = 0; r < rows; ++r) {
            const size_t i = size_t(a * rows + r);
            ASSERT_TRUE(same_bits(one[i], got[i]))
                << gguf::type_name(wt) << (packed ? " packed" : " rows") << " isa " << level_name(l) << " k " << k
                << ": activation " << a << " row " << r << " alone " << one[i] << " vs " << got[i] << " in calls of "
                << n << " activations x " << r_split << " rows; seed " << seed;
          }
      }
    }
  }
}

class GemmInvariance : public ::testing::TestWithParam<TensorType> {};

TEST_P(GemmInvariance, RowBitsIndependentOfCallShape) {
  IsaGuard guard;
  const TensorType wt = GetParam();
  uint64_t seed = fresh_seed();
  const bool k_type = block_elems(wt) == 256;
  for (int64_t k : k_type ? std::vector<int64_t>{768, 1536} : std::vector<int64_t>{640, 768})
    check_invariant(wt, k, false, seed++);
  if (has_packed_layout(wt))
    for (int64_t k : k_type ? std::vector<int64_t>{768} : std::vector<int64_t>{640}) check_invariant(wt, k, true, seed++);
}

INSTANTIATE_TEST_SUITE_P(Types, GemmInvariance,
                         ::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                                           TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K,
                                           TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                           TensorType::Q6_K, TensorType::F32, TensorType::F16,
                                           TensorType::BF16),
                         [](const auto& info) { return std::string(gguf::type_name(info.param)); });

}  // namespace
}  // namespace loom::quant::simd::test
