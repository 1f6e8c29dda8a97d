// The decode fusion's kernels (decode_fused.cu, matmul_q8_parts, attention's q8_1 output) on
// fresh random inputs, outputs poisoned with NaN: each fused kernel against the unfused kernels
// it replaces (the same bits: they share their arithmetic) or, for the multi-weight matmul and
// its epilogues, against double-precision dots of the reference-dequantized weights; and a
// chain of them launched with programmatic dependent launch inside a CUDA graph against the
// same chain launched plainly. Needs a GPU (run by scripts/gpu-check, not ctest).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>
#include <utility>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/programmatic_launch.h"
#include "common/error.h"
#include "q8_reference.h"
#include "random_weight.h"
#include "quant/quant.h"
#include "random_inputs.h"
#include "same_bits.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

void sync() { LOOM_CUDA_CHECK(cudaDeviceSynchronize()); }

TEST(RmsNormQ8, SameBitsAsNormThenQuantize) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (int64_t cols : {576, 2048, 4096}) {
    const int64_t rows = 5;
    auto dx = DeviceBuffer::of(random_floats(rng, size_t(rows * cols))), dw = DeviceBuffer::of(random_floats(rng, size_t(cols)));
    DeviceBuffer out1(size_t(rows * cols) * 4), out2(size_t(rows * cols) * 4), q1(size_t(rows * cols)), q2(size_t(rows * cols)),
        ds1(size_t(rows * cols / 32) * 8), ds2(size_t(rows * cols / 32) * 8);
    for (auto* b : {&out1, &out2, &q1, &q2, &ds1, &ds2}) b->poison();
    rms_norm(dx.get<float>(), dw.get<float>(), 1e-5f, out1.get<float>(), rows, cols, cols, nullptr);
    quantize_q8_1(out1.get<float>(), cols, rows, cols, q1.get<int8_t>(), ds1.get<float2>(), nullptr);
    rms_norm_q8(dx.get<float>(), dw.get<float>(), 1e-5f, out2.get<float>(), rows, cols, q2.get<int8_t>(), ds2.get<float2>(),
                nullptr);
    sync();
    expect_same_bits<float>(out1, out2, "normalised");
    expect_same_bits<int8_t>(q1, q2, "codes");
    expect_same_bits<float2>(ds1, ds2, "scales");
  }
}

// GQA heads over a shuffled pool; normal and neox, partial rotation with frequency factors.
TEST(RopeKvStore, SameBitsAsRopeRopeAndStore) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t hd = 64, n_head = 8, n_kv = 2, rows = 3;
  const int32_t bs = 16, max_blocks = 4, n_blocks = 8;
  const std::vector<int32_t> tables = {5, 1, 3, 0, 2, 4, 7, 6}, seq = {0, 0, 1}, pos = {17, 60, 5};
  auto dt = DeviceBuffer::of(tables), ds = DeviceBuffer::of(seq), dp = DeviceBuffer::of(pos);
  const StepTables st{ds.get<int32_t>(), dp.get<int32_t>(), dt.get<int32_t>(), max_blocks};
  std::vector<float> ff(16);
  for (auto& f : ff) f = 1.f + std::abs(random_floats(rng, 1)[0]);
  auto dff = DeviceBuffer::of(ff);
  auto dq = DeviceBuffer::of(random_floats(rng, size_t(rows * n_head * hd)));
  auto dk = DeviceBuffer::of(random_floats(rng, size_t(rows * n_kv * hd)));
  auto dv = DeviceBuffer::of(random_floats(rng, size_t(rows * n_kv * hd)));
  const size_t pool = size_t(n_blocks) * bs * n_kv * hd * 2;
  for (bool neox : {false, true})
    for (int64_t n_rot : {int64_t(64), int64_t(32)}) {
      SCOPED_TRACE(::testing::Message() << "neox " << neox << " n_rot " << n_rot);
      const float* f = n_rot == 32 ? dff.get<float>() : nullptr;
      DeviceBuffer q1(size_t(rows * n_head * hd) * 4), q2(q1.bytes()), kr(size_t(rows * n_kv * hd) * 4);
      DeviceBuffer k1(pool), v1(pool), k2(pool), v2(pool);
      for (auto* b : {&q1, &q2, &kr, &k1, &v1, &k2, &v2}) b->poison();
      const KvView kv1{k1.get<__half>(), v1.get<__half>(), n_kv * hd, n_kv * hd, bs};
      const KvView kv2{k2.get<__half>(), v2.get<__half>(), n_kv * hd, n_kv * hd, bs};
      rope(dq.get<float>(), dp.get<int32_t>(), q1.get<float>(), rows, n_head * hd, hd, n_rot, 500000.f, 0.25f, f, neox, nullptr);
      rope(dk.get<float>(), dp.get<int32_t>(), kr.get<float>(), rows, n_kv * hd, hd, n_rot, 500000.f, 0.25f, f, neox, nullptr);
      kv_store(kv1, st, kr.get<float>(), dv.get<float>(), rows, nullptr);
      const RopeSpec rs{hd, n_rot, 500000.f, 0.25f, f, neox};
      rope_kv_store(rs, dq.get<float>(), n_head, q2.get<float>(), dk.get<float>(), dv.get<float>(), kv2, st, rows, nullptr);
      sync();
      expect_same_bits<float>(q1, q2, "roped queries");
      expect_same_bits<uint16_t>(k1, k2, "key pool");
      expect_same_bits<uint16_t>(v1, v2, "value pool");
    }
}

// Every way attention writes its output: the decode kernel with one chunk a row (the table
// bound within one chunk, and without scratch), with several chunks merged by the combine
// kernel (2 and 16 chunks) or by each row's last block (merge_in_kernel), the prefill kernel
// (more than 8 rows), and the tensor-core prompt kernel (21 rows of one sequence: a whole
// 16-row tile and a partial one).
TEST(AttentionQ8, OutputCodesAreTheQuantizedOutput) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  AttentionShape a;
  a.n_head = 8, a.n_kv = 2, a.head_dim = 64, a.value_dim = 64, a.scale = 0.125f;
  const int32_t bs = 16, n_blocks = 64;
  const int64_t kw = a.n_kv * 64, width = a.n_head * 64;
  std::vector<int32_t> tables(n_blocks);  // sequence 0's table, read as 4, 8 or 64 entries wide
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);
  std::vector<uint16_t> kh(size_t(n_blocks) * bs * kw), vh(kh.size());
  for (auto& x : kh) x = quant::fp32_to_fp16(random_floats(rng, 1)[0]);
  for (auto& x : vh) x = quant::fp32_to_fp16(random_floats(rng, 1)[0]);
  auto dk = DeviceBuffer::of(kh), dv = DeviceBuffer::of(vh), dt = DeviceBuffer::of(tables);
  const KvView kv{dk.get<__half>(), dv.get<__half>(), kw, kw, bs};
  struct Case {
    const char* what;
    int32_t max_blocks;
    std::vector<int32_t> pos;
    bool scratch;
    int chunks;  // expected: 1 = no scratch needed
    bool tensor_cores = false;
    bool merge_in_kernel = false;
  };
  const std::vector<int32_t> ten = {118, 119, 120, 121, 122, 123, 124, 125, 126, 127};
  std::vector<int32_t> prompt(21);
  std::iota(prompt.begin(), prompt.end(), 107);
  const Case cases[] = {{"one chunk: the bound within kMinChunk", 4, {40, 63}, true, 1},
                        {"one chunk: no scratch", 8, {120, 127}, false, 2},
                        {"two chunks merged", 8, {120, 127}, true, 2},
                        {"sixteen chunks merged", 64, {1000, 1023}, true, 16},
                        {"sixteen chunks merged by each row's last block", 64, {1000, 1023}, true, 16, false, true},
                        {"prefill kernel", 8, ten, true, 1},
                        {"tensor-core prompt kernel", 8, prompt, true, 1, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const int64_t rows = int64_t(c.pos.size());
    const std::vector<int32_t> seq(c.pos.size(), 0);
    auto dq = DeviceBuffer::of(random_floats(rng, size_t(rows * width)));
    auto ds = DeviceBuffer::of(seq), dp = DeviceBuffer::of(c.pos);
    const StepTables st{ds.get<int32_t>(), dp.get<int32_t>(), dt.get<int32_t>(), c.max_blocks, 1};
    a.tensor_cores = c.tensor_cores;
    a.merge_in_kernel = c.merge_in_kernel;
    const size_t split = attention_scratch_floats(a, kv, st, rows);
    auto counters = DeviceBuffer::of(std::vector<uint32_t>(std::max<size_t>(attention_counter_words(a, rows), 1), 0));
    ASSERT_EQ(split, c.chunks > 1 ? size_t(rows * width / 64) * size_t(c.chunks) * 66 : 0u);
    DeviceBuffer scratch(std::max<size_t>(split, 1) * 4), out(size_t(rows * width) * 4), q8(size_t(rows * width)),
        q8ds(size_t(rows * width / 32) * 8);
    for (auto* b : {&scratch, &out, &q8, &q8ds}) b->poison();
    const bool use = c.scratch && split > 0;
    attention(a, kv, st, dq.get<float>(), out.get<float>(), rows, nullptr, use ? scratch.get<float>() : nullptr,
              use ? split : 0, q8.get<int8_t>(), q8ds.get<float2>(), counters.get<unsigned>());
    sync();
    const auto o = out.to_host<float>();
    for (size_t i = 0; i < o.size(); ++i) ASSERT_TRUE(std::isfinite(o[i])) << "output " << i;
    const Q8Rows ref = quantize_ref(o, width, rows, width);
    const auto q = q8.to_host<int8_t>();
    const auto d = q8ds.to_host<float2>();
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], ref.q[i]) << "code " << i;
    for (size_t b = 0; b < d.size(); ++b) {
      ASSERT_EQ(d[b].x, ref.d[b]) << "block " << b;
      ASSERT_EQ(d[b].y, ref.sum[b]) << "block " << b;
    }
  }
}

// q, k, v of three types in one launch (one with a residual), then gate and up with each
// gated epilogue, which also writes its output's q8_1 form.
std::vector<Weight> parts_weights(std::mt19937_64& rng, int64_t K) {
  std::vector<Weight> w;
  w.push_back(random_weight(rng, TensorType::Q4_K, 67, K));
  w.push_back(random_weight(rng, TensorType::Q6_K, 33, K));
  w.push_back(random_weight(rng, TensorType::Q5_0, 64, K));
  w.push_back(random_weight(rng, TensorType::Q8_0, 64, K));
  w.push_back(random_weight(rng, TensorType::Q4_K, 64, K));
  w.push_back(random_weight(rng, TensorType::Q4_K, 64, K));
  return w;
}

// The checks of both tests below, for each row count; tensor_cores: through the MMA path
// (matmul_mma.cu, every row count at or above its min_rows of 4), else the warp-per-row kernel
// with at most max_warps warps (matmul_q8_parts).
void check_parts_and_gated(std::mt19937_64& rng, const std::vector<Weight>& w, int64_t K,
                           std::initializer_list<int64_t> row_counts, bool tensor_cores, int split_warps = 4,
                           int64_t max_warps = 0, bool tiled = false) {
  const double rel = tiled ? kF16Rel : kIntDotRel;  // random_weight.h
  for (int64_t rows : row_counts) {
    SCOPED_TRACE(::testing::Message() << "rows " << rows);
    const auto x = random_floats(rng, size_t(rows * K));
    auto dx = DeviceBuffer::of(x);
    DeviceBuffer dq(size_t(rows * K)), dds(size_t(rows * K / 32) * 8);
    DeviceBuffer scratch(tensor_cores ? mma_scratch_bytes(rows, K, tiled) : 0);
    const MmaTiles tiles = tiled ? MmaTiles::always : MmaTiles::off;
    const MmaPath mma = tensor_cores ? MmaPath{scratch.get(), scratch.bytes(), 4, split_warps, tiles} : MmaPath{};
    quantize_q8_1(dx.get<float>(), K, rows, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
    const auto xq = quantize_ref(x, K, rows, K).dequantized();
    // Store, part 1 with a residual.
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
                    mma, max_warps);
    sync();
    for (int i = 0; i < 3; ++i) {
      const auto y = ys[i].to_host<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t n = 0; n < w[i].N; ++n) {
          auto [ref, mag] = ref_dot(w[i], xq, r, n);
          const double extra = i == 1 ? res[size_t(r * w[1].N + n)] : 0.0;
          ASSERT_NEAR(y[size_t(r * w[i].N + n)], ref + extra, rel * mag + 1e-6 * (1 + std::abs(extra)))
              << "part " << i << " row " << r << " col " << n;
        }
    }
    // Gated: gate Q5_0 and up Q8_0, then both Q4_K (one stream of both weights' rows), equal
    // N, with the output's q8_1 form written too.
    const int64_t N = 64;
    DeviceBuffer codes(size_t(rows * N)), scales(size_t(rows * N / 32) * 8), counters(size_t(N / 32) * 4);
    LOOM_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
    for (const auto& [gi, ui] : {std::pair{2, 3}, std::pair{4, 5}})
    for (MatmulEpilogue e : {MatmulEpilogue::swiglu, MatmulEpilogue::geglu}) {
      SCOPED_TRACE(::testing::Message() << "gate " << gguf::type_name(w[size_t(gi)].type) << " up "
                                        << gguf::type_name(w[size_t(ui)].type));
      const Weight &wg = w[size_t(gi)], &wu = w[size_t(ui)];
      DeviceBuffer dy(size_t(rows * N) * 4);
      for (auto* b : {&dy, &codes, &scales}) b->poison();
      const MatmulPart gu[2] = {{wg.type, wg.packed.get<uint8_t>(), wg.row_bytes, N, dy.get<float>(), N},
                                {wu.type, wu.packed.get<uint8_t>(), wu.row_bytes, N, nullptr, 0}};
      matmul_q8_parts(gu, 2, e, K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                      {codes.get<int8_t>(), scales.get<float2>(), counters.get<int>()}, mma, max_warps);
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
          auto [g, gm] = ref_dot(wg, xq, r, n);
          auto [u, um] = ref_dot(wu, xq, r, n);
          const double act = e == MatmulEpilogue::swiglu ? g / (1 + std::exp(-g))
                                                         : 0.5 * g * (1 + std::tanh(0.7978845608 * g * (1 + 0.044715 * g * g)));
          // Each dot is within rel of its magnitude; the activation's slope is at most ~1.13.
          const double tol = 1.2 * rel * gm * std::abs(u) + rel * um * std::abs(act) + 1e-5 * (1 + std::abs(act * u));
          ASSERT_NEAR(y[size_t(r * N + n)], act * u, tol) << "row " << r << " col " << n;
        }
    }
  }
}

// The warp-per-row kernel: rows 1, 3 and 11 (two passes of at most 8); with the resident
// warps (here one tile a warp: the weights are small), with 3 warps (ranges of many tiles,
// q8_1 output groups shared by two warps) and 7, and with one tile a warp named.
TEST(MatmulQ8Parts, MixedTypesResidualAndGatedEpilogues) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t K = 512;
  const std::vector<Weight> w = parts_weights(rng, K);
  for (int64_t warps : {int64_t(0), int64_t(3), int64_t(7), kWarpPerRow}) {
    SCOPED_TRACE(::testing::Message() << "max_warps " << warps);
    check_parts_and_gated(rng, w, K, {1, 3, 11}, false, 4, warps);
  }

  // Refused before any launch: gated parts of unequal rows, a q8_1 output without a gated
  // epilogue or of rows not a multiple of 32.
  const MatmulPart gate{TensorType::Q4_K, w[0].packed.get<uint8_t>(), w[0].row_bytes, 67, nullptr, 0};
  MatmulPart up = gate;
  up.N = 66;
  const MatmulPart unequal[2] = {gate, up}, equal[2] = {gate, gate};
  int8_t* some = reinterpret_cast<int8_t*>(8);
  EXPECT_THROW(matmul_q8_parts(unequal, 2, MatmulEpilogue::swiglu, K, nullptr, nullptr, 1, nullptr), loom::Error);
  EXPECT_THROW(matmul_q8_parts(equal, 1, MatmulEpilogue::store, K, nullptr, nullptr, 1, nullptr,
                               {some, reinterpret_cast<float2*>(8), reinterpret_cast<int*>(8)}),
               loom::Error);
  EXPECT_THROW(matmul_q8_parts(equal, 2, MatmulEpilogue::swiglu, K, nullptr, nullptr, 1, nullptr,
                               {some, reinterpret_cast<float2*>(8), reinterpret_cast<int*>(8)}),
               loom::Error);
}

// The same on the tensor-core path (its gated output's q8_1 form written by the quantize
// kernel after the launch): rows 5, 16 and 40 (one seq tile, two, and five padded to eight);
// again with store launches splitting K over blocks of 8 warps (mma_wide_split), and on the
// tiled f16 kernel (MmaPath::tiled; 70 rows: two passes, the tickets reused).
TEST(MatmulQ8Parts, TensorCorePathMixedTypesResidualAndGatedEpilogues) {
  ASSERT_TRUE(mma_device()) << "the tensor-core path needs sm_80 or later";
  std::mt19937_64 rng(fresh_seed() + 1);
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed() + 1);
  const int64_t K = 512;
  const std::vector<Weight> w = parts_weights(rng, K);
  check_parts_and_gated(rng, w, K, {5, 16, 40}, true);
  {
    SCOPED_TRACE("K split over 8 warps");
    check_parts_and_gated(rng, w, K, {5, 16, 40}, true, 8);
  }
  SCOPED_TRACE("tiled f16");
  check_parts_and_gated(rng, w, K, {5, 16, 40, 70}, true, 4, 0, true);
}

// The q/k/v launch of one activation row with rope and the KV store in its epilogue
// (MatmulPart::Out): the same bits as storing q, k and v and running rope_kv_store, for q and
// k of one type and v of another (two launches), whole and partial rotation with frequency
// factors, grids of the resident warps, 3 warps (ranges past one RopeWarp's 64 tiles: the
// launch gets more) and one tile a warp; and the inputs it refuses.
TEST(MatmulQ8Parts, RopeKvEpilogueSameBitsAsStoreThenRopeKvStore) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t K = 512, hd = 64, n_head = 4, n_kv = 2;
  const int32_t bs = 16, max_blocks = 4, n_blocks = 8;
  std::vector<Weight> w;
  w.push_back(random_weight(rng, TensorType::Q4_K, n_head * hd, K));
  w.push_back(random_weight(rng, TensorType::Q4_K, n_kv * hd, K));
  w.push_back(random_weight(rng, TensorType::Q6_K, n_kv * hd, K));
  const std::vector<int32_t> tables = {5, 1, 3, 0, 2, 4, 7, 6}, seq = {1}, pos = {int32_t(rng() % 64)};
  auto dt = DeviceBuffer::of(tables), dsq = DeviceBuffer::of(seq), dp = DeviceBuffer::of(pos);
  const StepTables st{dsq.get<int32_t>(), dp.get<int32_t>(), dt.get<int32_t>(), max_blocks};
  std::vector<float> ff(16);
  for (auto& f : ff) f = 1.f + std::abs(random_floats(rng, 1)[0]);
  auto dff = DeviceBuffer::of(ff);
  const auto x = random_floats(rng, size_t(K));
  auto dx = DeviceBuffer::of(x);
  DeviceBuffer dq{size_t(K)}, dds{size_t(K / 32) * 8};
  quantize_q8_1(dx.get<float>(), K, 1, K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
  const size_t pool = size_t(n_blocks) * bs * n_kv * hd * 2;
  for (int64_t n_rot : {int64_t(64), int64_t(32)})
    for (int64_t warps : {int64_t(0), int64_t(3), kWarpPerRow}) {
      SCOPED_TRACE(::testing::Message() << "n_rot " << n_rot << " max_warps " << warps);
      const RopeSpec rs{hd, n_rot, 500000.f, 0.25f, n_rot == 32 ? dff.get<float>() : nullptr, false};
      DeviceBuffer q0(size_t(n_head * hd) * 4), k0(size_t(n_kv * hd) * 4), v0(k0.bytes()), q1(q0.bytes()), q2(q0.bytes());
      DeviceBuffer k1(pool), v1(pool), k2(pool), v2(pool);
      for (auto* b : {&q0, &k0, &v0, &q1, &q2, &k1, &v1, &k2, &v2}) b->poison();
      const KvView kv1{k1.get<__half>(), v1.get<__half>(), n_kv * hd, n_kv * hd, bs};
      const KvView kv2{k2.get<__half>(), v2.get<__half>(), n_kv * hd, n_kv * hd, bs};
      std::vector<MatmulPart> parts;
      for (auto [i, y] : {std::pair{0, &q0}, std::pair{1, &k0}, std::pair{2, &v0}})
        parts.push_back({w[size_t(i)].type, w[size_t(i)].packed.get<uint8_t>(), w[size_t(i)].row_bytes, w[size_t(i)].N,
                         y->get<float>(), w[size_t(i)].N});
      matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 1, nullptr, {}, {},
                      warps);
      rope_kv_store(rs, q0.get<float>(), n_head, q1.get<float>(), k0.get<float>(), v0.get<float>(), kv1, st, 1, nullptr);
      parts[0].out = MatmulPart::Out::rope_q, parts[0].y = q2.get<float>();
      parts[1].out = MatmulPart::Out::rope_k, parts[1].y = nullptr;
      parts[2].out = MatmulPart::Out::kv_v, parts[2].y = nullptr;
      const RopeKvOut rope{rs, kv2, st};
      matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 1, nullptr, {}, {},
                      warps, &rope);
      sync();
      expect_same_bits<float>(q1, q2, "roped queries");
      expect_same_bits<uint16_t>(k1, k2, "key pool");
      expect_same_bits<uint16_t>(v1, v2, "value pool");
      // Refused: several activation rows, neox pairs, a key part not the pool's width, a rope
      // output without the rope.
      EXPECT_THROW(matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 2,
                                   nullptr, {}, {}, warps, &rope),
                   loom::Error);
      RopeKvOut neox = rope;
      neox.rope.neox = true;
      EXPECT_THROW(matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 1,
                                   nullptr, {}, {}, warps, &neox),
                   loom::Error);
      std::vector<MatmulPart> narrow = parts;
      narrow[1].N = hd;
      EXPECT_THROW(matmul_q8_parts(narrow.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 1,
                                   nullptr, {}, {}, warps, &rope),
                   loom::Error);
      EXPECT_THROW(matmul_q8_parts(parts.data(), 3, MatmulEpilogue::store, K, dq.get<int8_t>(), dds.get<float2>(), 1,
                                   nullptr, {}, {}, warps),
                   loom::Error);
    }
}

// norm + q8 -> matmul with a residual -> norm + q8 -> ..., 24 kernels deep, captured in a graph
// with programmatic dependent launch and replayed: the same bits as the plain launches (a
// kernel reading before its predecessor finished would differ).
TEST(ProgrammaticLaunch, GraphChainEqualsPlainLaunches) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t K = 1024, depth = 12;
  Weight w = random_weight(rng, TensorType::Q4_K, K, K);
  auto dn = DeviceBuffer::of(random_floats(rng, size_t(K)));
  const auto x0 = random_floats(rng, size_t(K));
  cudaStream_t s = nullptr;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto run_chain = [&](bool pdl, DeviceBuffer& x) {
    DeviceBuffer h{size_t(K) * 4}, q{size_t(K)}, ds{size_t(K / 32) * 8};
    x.upload(x0.data(), x.bytes());
    const bool was = programmatic_launch();
    programmatic_launch() = pdl;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int64_t i = 0; i < depth; ++i) {
      rms_norm_q8(x.get<float>(), dn.get<float>(), 1e-5f, h.get<float>(), 1, K, q.get<int8_t>(), ds.get<float2>(), s);
      MatmulPart p{w.type, w.packed.get<uint8_t>(), w.row_bytes, K, x.get<float>(), K, x.get<float>(), K};
      matmul_q8_parts(&p, 1, MatmulEpilogue::store, K, q.get<int8_t>(), ds.get<float2>(), 1, s);
    }
    LOOM_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    programmatic_launch() = was;
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    LOOM_CUDA_CHECK(cudaGraphLaunch(ge, s));
    LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  };
  DeviceBuffer plain(size_t(K) * 4), pdl(size_t(K) * 4);
  run_chain(false, plain);
  run_chain(true, pdl);
  cudaStreamDestroy(s);
  expect_same_bits<float>(plain, pdl, "chain output");
}

}  // namespace
}  // namespace loom::backend::cuda
