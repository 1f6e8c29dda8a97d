// x8 layouts (packed.h): pack/unpack are inverse bijections on raw random blocks, and
// gemm_packed at every ISA level matches the scalar quant::vec_dot on the stored rows (same
// tolerance argument as gemm_test.cpp: exact integer sums, float order only).
#include <gtest/gtest.h>

#include "common/error.h"
#include "quant/simd/packed.h"
#include "test_util.h"

namespace loom::quant::simd::test {
namespace {

using gguf::TensorType;

std::vector<uint8_t> weights(TensorType t, int64_t rows, int64_t k, bool raw, std::mt19937_64& rng) {
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
  std::vector<int> halves = (t == TensorType::Q4_K || t == TensorType::Q4_1) ? std::vector<int>{0, 2} : t == TensorType::Q6_K ? std::vector<int>{208} : std::vector<int>{0};
  const size_t bb = size_t(block_bytes(t));
  for (size_t off = 0; off < w.size(); off += bb)
    for (int f : halves) {
      const uint16_t h = fp32_to_fp16(sc(rng));
      std::memcpy(&w[off + size_t(f)], &h, 2);
    }
  return w;
}

const TensorType kTypes[] = {TensorType::Q8_0, TensorType::Q5_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q4_K, TensorType::Q6_K};

TEST(Packed, RoundTripIsIdentity) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (TensorType t : kTypes)
    for (int64_t k : {256, 512, 2048}) {
      const int64_t rows = 8 * (1 + int64_t(rng() % 4));
      const auto w = weights(t, rows, k, true, rng);
      std::vector<uint8_t> p(packed_group_bytes(t, k) * size_t(rows / 8)), back(w.size(), 0xcd);
      if (t != TensorType::Q4_K) {
        EXPECT_EQ(p.size(), w.size());
      }
      pack_rows(t, w.data(), row_size(t, k), rows, k, p.data());
      unpack_rows(t, p.data(), rows, k, back.data(), row_size(t, k));
      ASSERT_EQ(w, back) << gguf::type_name(t) << " k " << k << " seed " << seed;
    }
}

void check(TensorType wt, int64_t k, int64_t n_rows, int64_t n_act, bool raw, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const TensorType at = act_type(wt);
  const size_t wrb = row_size(wt, k), arb = row_size(at, k) + 8;
  const auto w = weights(wt, n_rows, k, raw, rng);
  std::vector<uint8_t> p(packed_group_bytes(wt, k) * size_t(n_rows / 8));
  pack_rows(wt, w.data(), wrb, n_rows, k, p.data());
  std::vector<uint8_t> act(arb * size_t(n_act));
  std::vector<float> actf(size_t(k * n_act)), wf(static_cast<size_t>(k));
  for (int64_t a = 0; a < n_act; ++a) {
    const auto x = random_floats(rng, k);
    quantize_row(at, x.data(), act.data() + a * arb, k);
    dequantize_row(at, act.data() + a * arb, actf.data() + a * k, k);
  }
  std::vector<double> ref(size_t(n_rows * n_act)), mag(size_t(n_rows * n_act));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(wt, w.data() + r * wrb, wf.data(), k);
    for (int64_t a = 0; a < n_act; ++a) {
      double m = 0;
      for (int64_t i = 0; i < k; ++i) m += std::fabs(double(wf[size_t(i)]) * actf[size_t(a * k + i)]);
      mag[size_t(a * n_rows + r)] = m;
      ref[size_t(a * n_rows + r)] = vec_dot(wt, w.data() + r * wrb, act.data() + a * arb, k);
    }
  }
  const size_t stride = size_t(n_rows + 5);
  for (Isa l : levels()) {
    force_isa(l);
    std::vector<float> out(stride * size_t(n_act), -7.0f);
    gemm_packed(wt, p.data(), n_rows, act.data(), arb, n_act, out.data(), stride, k);
    for (int64_t a = 0; a < n_act; ++a) {
      for (int64_t r = 0; r < n_rows; ++r) {
        const double rv = ref[size_t(a * n_rows + r)], gv = out[size_t(a) * stride + size_t(r)];
        ASSERT_LE(std::fabs(gv - rv), 1e-4 * mag[size_t(a * n_rows + r)] + 1e-30)
            << gguf::type_name(wt) << " isa " << level_name(l) << " k " << k << " rows " << n_rows << " n_act " << n_act
            << (raw ? " raw" : " quantized") << " row " << r << " act " << a << " ref " << rv << " got " << gv << " seed " << seed;
      }
      for (size_t r = size_t(n_rows); r < stride; ++r) ASSERT_EQ(out[size_t(a) * stride + r], -7.0f);
    }
  }
}

class PackedVsReference : public ::testing::TestWithParam<TensorType> {};

TEST_P(PackedVsReference, AllActTilesAllLevels) {
  IsaGuard guard;
  const TensorType wt = GetParam();
  uint64_t s = fresh_seed();
  std::vector<int64_t> ks{256, 512, 2048};
  if (block_elems(wt) == 32) ks.insert(ks.end(), {576, 640});
  for (int64_t k : ks)
    // Every tile shape: decode tiles of 1-4 rows, and the GEMM tiles of every level (AVX-512:
    // 2 groups x 8 rows; AVX2: 2 groups x 6 rows, or 1 x 12 for Q6_K) with their tails of 1-4
    // rows and of one group; odd and even group counts.
    // 70 rows: AVX2 expands Q4_K's chunks only from 64 rows on.
    for (int64_t n_act : {1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 17, 25, 70})
      for (bool raw : {false, true})
        check(wt, k, n_act == 17 || n_act == 25 || n_act == 70 ? 40 : n_act == 13 ? 56 : n_act == 8 || n_act == 12 ? 24 : 16, n_act, raw, s++);
}

INSTANTIATE_TEST_SUITE_P(Types, PackedVsReference, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(gguf::type_name(info.param)); });

// Packed weights of `rows` rows and n_act activation rows of their activation type (fill()
// draws new ones in place: new bytes at the same address).
struct PackedCall {
  TensorType wt;
  int64_t k, n_act;
  size_t arb;
  std::vector<uint8_t> packed, act;
  PackedCall(TensorType t, int64_t k_, int64_t rows, int64_t n, std::mt19937_64& rng)
      : wt(t), k(k_), n_act(n), arb(row_size(act_type(t), k_)) {
    const auto w = weights(wt, rows, k, false, rng);
    packed.resize(packed_group_bytes(wt, k) * size_t(rows / 8));
    act.resize(arb * size_t(n_act));
    pack_rows(wt, w.data(), row_size(wt, k), rows, k, packed.data());
  }
  void fill(std::mt19937_64& rng) {
    for (int64_t a = 0; a < n_act; ++a) {
      const auto x = random_floats(rng, k);
      quantize_row(act_type(wt), x.data(), act.data() + a * arb, k);
    }
  }
};

// act_version (packed.h): calls that name their activation bytes give the bits of calls that
// do not, whether a thread's prepared activation data is reused (same version: another tile of
// weight rows over the same rows) or must be made again (a new version over new bytes at the
// same address, or the same version over another row count).
TEST(Packed, ActVersionReusesOnlyWhatItNames) {
  IsaGuard guard;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (TensorType wt : kTypes)
    for (Isa l : levels()) {
      force_isa(l);
      const int64_t k = 512, rows = 32, n_act = 13;
      PackedCall c(wt, k, rows, n_act, rng);
      const auto& p = c.packed;
      auto& act = c.act;
      const size_t arb = c.arb;
      auto fill = [&] { c.fill(rng); };
      // Two tiles of 16 weight rows each, as matmul.cpp calls them.
      auto run = [&](uint64_t version, int64_t n) {
        std::vector<float> out(size_t(rows * n));
        for (int64_t r0 = 0; r0 < rows; r0 += 16)
          gemm_packed(wt, p.data() + size_t(r0 / 8) * packed_group_bytes(wt, k), 16, act.data(), arb, n, out.data() + r0,
                      size_t(rows), k, version);
        return out;
      };
      const uint64_t v = rng() | 1;
      for (int64_t n : {n_act, int64_t(3)})  // the GEMM tiles and the decode tiles
        for (int round = 0; round < 2; ++round) {
          fill();  // new bytes at the same address: a new version
          const auto named = run(v + round, n), again = run(v + round, n);
          ASSERT_EQ(run(0, n), named) << gguf::type_name(wt) << " isa " << level_name(l) << " n " << n << " seed " << seed;
          ASSERT_EQ(named, again) << gguf::type_name(wt) << " isa " << level_name(l) << " n " << n << " seed " << seed;
        }
    }
}

// A call of many activation rows (the AVX2 GEMM on chunks expanded to one byte per code, for
// Q4_K only from 64 rows) gives every row the bits of a call of that row alone (the decode
// tile), at every level: gemm_invariance_test.cpp's contract at a width it does not reach.
TEST(Packed, WideCallsGiveTheBitsOfOneRowCalls) {
  IsaGuard guard;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (TensorType wt : kTypes)
    for (Isa l : levels()) {
      force_isa(l);
      const int64_t k = 512, rows = 40, n_act = 70;
      PackedCall c(wt, k, rows, n_act, rng);
      c.fill(rng);
      const auto& p = c.packed;
      const auto& act = c.act;
      const size_t arb = c.arb;
      std::vector<float> wide(size_t(rows * n_act)), one(wide.size());
      gemm_packed(wt, p.data(), rows, act.data(), arb, n_act, wide.data(), size_t(rows), k);
      for (int64_t a = 0; a < n_act; ++a)
        gemm_packed(wt, p.data(), rows, act.data() + a * arb, arb, 1, one.data() + a * rows, size_t(rows), k);
      ASSERT_EQ(0, std::memcmp(wide.data(), one.data(), wide.size() * sizeof(float)))
          << gguf::type_name(wt) << " isa " << level_name(l) << " seed " << seed;
    }
}

TEST(Packed, RejectsBadShapes) {
  std::vector<uint8_t> w(1 << 16), a(4096);
  std::vector<float> out(64);
  EXPECT_THROW(pack_rows(TensorType::Q5_1, w.data(), 24, 8, 32, a.data()), loom::Error);
  EXPECT_THROW(pack_rows(TensorType::Q8_0, w.data(), 34, 7, 32, a.data()), loom::Error);
  EXPECT_THROW(gemm_packed(TensorType::Q4_K, w.data(), 8, a.data(), 292, 1, out.data(), 8, 100), loom::Error);
}

}  // namespace
}  // namespace loom::quant::simd::test
