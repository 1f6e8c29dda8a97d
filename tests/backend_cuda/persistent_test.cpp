// The persistent decode step's matmul phases (decode_persistent.cu) against the launched kernels
// they stand for, on fresh random inputs: a chain of phases must give the launched chain's bits.
// Each block of the persistent kernel stages a phase's input row itself (through the RMS norm
// where the phase has one) and quantizes it a 32-block a thread; the launched chain runs
// rms_norm_q8 or quantize_q8_1, then matmul_q8_parts. The phases: three weights of three types
// on a normed row (one with a residual), a gated phase (swiglu) on the first one's row unnormed,
// a lone matmul on the gated phase's row normed. K 576 (fewer 32-blocks than a block's
// threads), 4096 and 14336 (3.5 blocks a thread); the grid as many blocks as fit, then one an SM.
// Needs a GPU (run by scripts/gpu-check, not ctest). The attention and rope phases are checked
// end to end (e2e_logits.py, "decode, decode_persistent = true: the decode's bits").
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/decode_persistent.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "random_inputs.h"
#include "same_bits.h"
#include "random_weight.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

// One run of the chain's outputs. y1 and y2 are rows of K that the next phase reads: their first
// 256 entries are the phase's outputs, the rest the same random floats in every run (so the
// weights stay 256 rows, not K).
struct Outputs {
  DeviceBuffer y1, ya, yb, y2, y3;
  Outputs(const std::vector<float>& fill1, const std::vector<float>& fill2, int64_t na, int64_t nb, int64_t n3)
      : y1(DeviceBuffer::of(fill1)), ya(size_t(na) * 4), yb(size_t(nb) * 4), y2(DeviceBuffer::of(fill2)), y3(size_t(n3) * 4) {
    for (auto* b : {&ya, &yb, &y3}) b->poison();
  }
};

TEST(PersistentStep, MatmulPhasesSameBitsAsLaunchedNormsAndMatmuls) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (const int64_t K : {int64_t(576), int64_t(4096), int64_t(14336)}) {
    SCOPED_TRACE(::testing::Message() << "K " << K);
    const bool kq = K % 256 == 0;  // the k-quants' rows are whole super-blocks
    const int64_t n1 = 256, na = 64, nb = 96, n3 = 100;
    const Weight w1 = random_weight(rng, kq ? TensorType::Q4_K : TensorType::Q4_0, n1, K);
    const Weight wa = random_weight(rng, kq ? TensorType::Q6_K : TensorType::Q8_0, na, K);
    const Weight wb = random_weight(rng, TensorType::Q5_0, nb, K);
    const Weight wg = random_weight(rng, kq ? TensorType::Q4_K : TensorType::Q4_1, n1, K);
    const Weight wu = random_weight(rng, kq ? TensorType::Q4_K : TensorType::Q4_1, n1, K);
    const Weight w3 = random_weight(rng, TensorType::Q8_0, n3, K);
    auto x = DeviceBuffer::of(random_floats(rng, size_t(K)));
    auto norm1 = DeviceBuffer::of(random_floats(rng, size_t(K))), norm3 = DeviceBuffer::of(random_floats(rng, size_t(K)));
    auto res = DeviceBuffer::of(random_floats(rng, size_t(nb)));
    const std::vector<float> fill1 = random_floats(rng, size_t(K)), fill2 = random_floats(rng, size_t(K));
    const float eps = 1e-5f;

    auto part = [](const Weight& w, float* y) { return MatmulPart{w.type, w.packed.get<uint8_t>(), w.row_bytes, w.N, y, w.N}; };
    auto first = [&](Outputs& o) {
      std::vector<MatmulPart> p = {part(w1, o.y1.get<float>()), part(wa, o.ya.get<float>()), part(wb, o.yb.get<float>())};
      p[2].residual = res.get<float>(), p[2].ld_residual = nb;
      return p;
    };
    auto gated = [&](Outputs& o) { return std::vector<MatmulPart>{part(wg, o.y2.get<float>()), part(wu, nullptr)}; };

    // Launched: a norm or quantize kernel, then the phase's launch.
    Outputs launched(fill1, fill2, na, nb, n3);
    DeviceBuffer normed{size_t(K) * 4}, q{size_t(K)}, ds{size_t(K / 32) * 8};
    rms_norm_q8(x.get<float>(), norm1.get<float>(), eps, normed.get<float>(), 1, K, q.get<int8_t>(), ds.get<float2>(), nullptr);
    const auto p1 = first(launched);
    matmul_q8_parts(p1.data(), 3, MatmulEpilogue::store, K, q.get<int8_t>(), ds.get<float2>(), 1, nullptr);
    quantize_q8_1(launched.y1.get<float>(), K, 1, K, q.get<int8_t>(), ds.get<float2>(), nullptr);
    const auto p2 = gated(launched);
    matmul_q8_parts(p2.data(), 2, MatmulEpilogue::swiglu, K, q.get<int8_t>(), ds.get<float2>(), 1, nullptr);
    rms_norm_q8(launched.y2.get<float>(), norm3.get<float>(), eps, normed.get<float>(), 1, K, q.get<int8_t>(),
                ds.get<float2>(), nullptr);
    const MatmulPart p3 = part(w3, launched.y3.get<float>());
    matmul_q8_parts(&p3, 1, MatmulEpilogue::store, K, q.get<int8_t>(), ds.get<float2>(), 1, nullptr);
    LOOM_CUDA_CHECK(cudaDeviceSynchronize());

    for (const PersistentLaunch how : {PersistentLaunch{}, PersistentLaunch{.blocks_per_sm = 1}}) {
      SCOPED_TRACE(::testing::Message() << "blocks an SM " << how.blocks_per_sm << " (0: as many as fit)");
      Outputs o(fill1, fill2, na, nb, n3);
      PersistentStep step;
      PersistentMatmul m1{first(o), MatmulEpilogue::store, K, x.get<float>(), norm1.get<float>(), eps};
      PersistentMatmul m2{gated(o), MatmulEpilogue::swiglu, K, o.y1.get<float>()};
      PersistentMatmul m3{{part(w3, o.y3.get<float>())}, MatmulEpilogue::store, K, o.y2.get<float>(), norm3.get<float>(), eps};
      for (const auto* m : {&m1, &m2, &m3}) {
        ASSERT_EQ(PersistentStep::unsupported(*m), "");
        step.add(*m);
      }
      step.upload(how);
      step.launch(nullptr);
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      expect_same_bits<float>(o.y1, launched.y1, "first phase, part 0");
      expect_same_bits<float>(o.ya, launched.ya, "first phase, part 1");
      expect_same_bits<float>(o.yb, launched.yb, "first phase, part 2 (residual)");
      expect_same_bits<float>(o.y2, launched.y2, "gated phase");
      expect_same_bits<float>(o.y3, launched.y3, "lone matmul");
    }
  }
}

// The traced stage probe (the kernel bench's split of a phase's cost): it counts each staging
// block's phases, each at least one block and at most the grid, with a positive time for every
// step, and writes no outputs; a step uploaded without the trace refuses to report one.
TEST(PersistentStep, StageProbeTracesItsStagingBlocks) {
  std::mt19937_64 rng(fresh_seed() + 2);
  const int64_t K = 4096, N = 64;
  const int phases = 3, launches = 4;
  const Weight w = random_weight(rng, TensorType::Q4_K, N, K);
  auto x = DeviceBuffer::of(random_floats(rng, size_t(K))), norm = DeviceBuffer::of(random_floats(rng, size_t(K)));
  DeviceBuffer y(size_t(N) * 4);
  y.poison();
  const std::vector<float> before = y.to_host<float>();
  PersistentStep step;
  for (int i = 0; i < phases; ++i)
    step.add(PersistentMatmul{{MatmulPart{w.type, w.packed.get<uint8_t>(), w.row_bytes, N, y.get<float>(), N}},
                              MatmulEpilogue::store, K, x.get<float>(), norm.get<float>(), 1e-5f});
  step.upload({1, PersistentProbe::stage});
  EXPECT_THROW(step.stage_trace(), std::exception);
  step.upload({1, PersistentProbe::stage, true});
  for (int i = 0; i < launches; ++i) step.launch(nullptr);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  const StageTrace t = step.stage_trace();
  int dev = 0, sms = 0;
  LOOM_CUDA_CHECK(cudaGetDevice(&dev));
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  EXPECT_GE(t.phases, phases * launches);
  EXPECT_LE(t.phases, static_cast<long long>(phases) * launches * sms);
  EXPECT_EQ(t.phases % (phases * launches), 0) << "the same blocks stage every phase";
  for (const double us : {t.barrier_us, t.load_us, t.sum_us, t.quantize_us}) {
    EXPECT_GT(us, 0.0);
    EXPECT_LT(us, 1e5);
  }
  const std::vector<float> after = y.to_host<float>();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * 4), 0) << "a probe writes no outputs";
}

// What the step refuses before anything runs: a row or norm weights not 16-byte aligned, K not
// a multiple of 32, a matmul writing the row it reads, gate and up of two types.
TEST(PersistentStep, RefusesWhatItCannotStage) {
  std::mt19937_64 rng(fresh_seed() + 1);
  const int64_t K = 256;
  const Weight w = random_weight(rng, TensorType::Q4_K, 32, K), v = random_weight(rng, TensorType::Q8_0, 32, K);
  DeviceBuffer x(size_t(K + 4) * 4), y(32 * 4);
  const MatmulPart pw{w.type, w.packed.get<uint8_t>(), w.row_bytes, 32, y.get<float>(), 32};
  const MatmulPart pv{v.type, v.packed.get<uint8_t>(), v.row_bytes, 32, nullptr, 0};
  EXPECT_EQ(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K, x.get<float>()}), "");
  EXPECT_NE(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K, x.get<float>() + 1}), "");
  EXPECT_EQ(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K, x.get<float>(), x.get<float>() + 4, 1e-5f}), "");
  EXPECT_NE(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K, x.get<float>(), x.get<float>() + 1, 1e-5f}), "");
  EXPECT_NE(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K - 16, x.get<float>()}), "");
  EXPECT_NE(PersistentStep::unsupported(PersistentMatmul{{pw}, MatmulEpilogue::store, K, y.get<float>()}), "");
  EXPECT_NE(PersistentStep::unsupported(PersistentMatmul{{pw, pv}, MatmulEpilogue::swiglu, K, x.get<float>()}), "");
}

}  // namespace
}  // namespace loom::backend::cuda
