// Each CUDA kernel against a scalar CPU reference on fresh random inputs (a new seed per run,
// printed on failure), outputs poisoned with NaN before every launch. Needs a GPU: this binary
// is run by scripts/gpu-check on the device machine, not by ctest on the CPU-only CI machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"
#include "random_inputs.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

void sync() { LOOM_CUDA_CHECK(cudaDeviceSynchronize()); }

struct WeightCase {
  TensorType type;
  int64_t K;
};

class MatmulRows : public ::testing::TestWithParam<WeightCase> {};

TEST_P(MatmulRows, MatchesDequantizedDotsForEveryRowCount) {
  const auto [type, K] = GetParam();
  SCOPED_TRACE(::testing::Message() << "type " << gguf::type_name(type) << " K " << K << " seed " << fresh_seed());
  std::mt19937_64 rng(fresh_seed() + uint64_t(type) * 131 + uint64_t(K));
  const int64_t N = 67;  // not a multiple of the warps per block
  const size_t rb = quant::row_size(type, K);
  std::vector<uint8_t> w(rb * N);
  std::vector<float> wf(size_t(N * K));
  for (int64_t n = 0; n < N; ++n) {
    const auto src = random_floats(rng, size_t(K));
    quant::quantize_row(type, src.data(), w.data() + n * rb, K);
    quant::dequantize_row(type, w.data() + n * rb, wf.data() + n * K, K);
  }
  auto dw = DeviceBuffer::of(w);
  for (int64_t rows : {1, 5, 8, 13}) {
    const auto x = random_floats(rng, size_t(rows * K));
    auto dx = DeviceBuffer::of(x);
    DeviceBuffer dy(size_t(rows * N) * sizeof(float));
    dy.poison();
    matmul_rows(type, dw.get<uint8_t>(), rb, N, K, dx.get<float>(), K, rows, dy.get<float>(), N, nullptr);
    sync();
    const auto y = dy.to_host<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          ref += double(wf[n * K + k]) * x[r * K + k];
          mag += std::abs(double(wf[n * K + k]) * x[r * K + k]);
        }
        ASSERT_NEAR(y[r * N + n], ref, 1e-5 * mag + 1e-6) << "row " << r << " col " << n << " of " << rows;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WeightTypes, MatmulRows,
    ::testing::Values(WeightCase{TensorType::F32, 576}, WeightCase{TensorType::F16, 576},
                      WeightCase{TensorType::BF16, 576}, WeightCase{TensorType::Q4_0, 576},
                      WeightCase{TensorType::Q4_1, 576}, WeightCase{TensorType::Q5_0, 576},
                      WeightCase{TensorType::Q5_1, 576}, WeightCase{TensorType::Q8_0, 576},
                      WeightCase{TensorType::Q8_0, 4096}, WeightCase{TensorType::Q4_K, 768},
                      WeightCase{TensorType::Q5_K, 768}, WeightCase{TensorType::Q6_K, 768},
                      WeightCase{TensorType::Q4_K, 4096}, WeightCase{TensorType::Q6_K, 4096}),
    [](const auto& info) {
      return std::string(gguf::type_name(info.param.type)) + "_K" + std::to_string(info.param.K);
    });

TEST(EmbedRows, EqualsReferenceDequantizationAndNaNForBadIds) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::Q4_1, TensorType::F16}) {
    const int64_t V = 50, K = 512;
    const size_t rb = quant::row_size(type, K);
    std::vector<uint8_t> table(rb * V);
    for (int64_t v = 0; v < V; ++v) {
      const auto src = random_floats(rng, size_t(K));
      quant::quantize_row(type, src.data(), table.data() + v * rb, K);
    }
    const std::vector<int32_t> ids = {3, 49, 0, 17, 50, -1, 3};
    auto dt = DeviceBuffer::of(table);
    auto di = DeviceBuffer::of(ids);
    DeviceBuffer dout(ids.size() * K * sizeof(float));
    dout.poison();
    embed_rows(type, dt.get<uint8_t>(), rb, V, K, di.get<int32_t>(), int64_t(ids.size()), dout.get<float>(), nullptr);
    sync();
    const auto out = dout.to_host<float>();
    std::vector<float> ref(K);
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] < 0 || ids[r] >= V) {
        for (int64_t k = 0; k < K; ++k) ASSERT_TRUE(std::isnan(out[r * K + k]));
        continue;
      }
      quant::dequantize_row(type, table.data() + ids[r] * rb, ref.data(), K);
      for (int64_t k = 0; k < K; ++k) ASSERT_NEAR(out[r * K + k], ref[k], 1e-6f * (1 + std::abs(ref[k]))) << gguf::type_name(type);
    }
  }
}

float silu(float x) { return x / (1 + std::exp(-x)); }
float gelu(float x) { return 0.5f * x * (1 + std::tanh(0.7978845608f * x * (1 + 0.044715f * x * x))); }

TEST(Pointwise, BinaryUnaryNormAndSlice) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t rows = 7, cols = 320;
  const auto a = random_floats(rng, rows * cols), b = random_floats(rng, rows * cols), w = random_floats(rng, cols);
  auto da = DeviceBuffer::of(a), db = DeviceBuffer::of(b), dw = DeviceBuffer::of(w);
  DeviceBuffer dout(rows * cols * sizeof(float));
  auto run = [&](auto launch, auto expect, const char* what) {
    dout.poison();
    launch();
    sync();
    const auto out = dout.to_host<float>();
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float e = expect(i);
      ASSERT_NEAR(out[i], e, 2e-6f * (1 + std::abs(e))) << what << " at " << i;
    }
  };
  run([&] { binary(Binary::add, da.get<float>(), db.get<float>(), rows, dout.get<float>(), rows, cols, nullptr); },
      [&](int64_t i) { return a[i] + b[i]; }, "add");
  run([&] { binary(Binary::mul, da.get<float>(), dw.get<float>(), 1, dout.get<float>(), rows, cols, nullptr); },
      [&](int64_t i) { return a[i] * w[i % cols]; }, "mul broadcast");
  run([&] { binary(Binary::swiglu, da.get<float>(), db.get<float>(), rows, dout.get<float>(), rows, cols, nullptr); },
      [&](int64_t i) { return silu(a[i]) * b[i]; }, "swiglu");
  run([&] { binary(Binary::geglu, da.get<float>(), db.get<float>(), rows, dout.get<float>(), rows, cols, nullptr); },
      [&](int64_t i) { return gelu(a[i]) * b[i]; }, "geglu");
  run([&] { scale(da.get<float>(), 0.125f, dout.get<float>(), rows * cols, nullptr); },
      [&](int64_t i) { return a[i] * 0.125f; }, "scale");
  run([&] { softcap(da.get<float>(), 1.5f, dout.get<float>(), rows * cols, nullptr); },
      [&](int64_t i) { return std::tanh(a[i] / 1.5f) * 1.5f; }, "softcap");
  for (int64_t group : {cols, int64_t(64)}) {
    auto dwg = DeviceBuffer::of(std::vector<float>(w.begin(), w.begin() + group));
    run([&] { rms_norm(da.get<float>(), dwg.get<float>(), 1e-6f, dout.get<float>(), rows, cols, group, nullptr); },
        [&](int64_t i) {
          const int64_t g0 = i / group * group;
          double ss = 0;
          for (int64_t c = 0; c < group; ++c) ss += double(a[g0 + c]) * a[g0 + c];
          return float(a[i] / std::sqrt(ss / group + 1e-6) * w[i % group]);
        },
        "rms_norm");
  }
  DeviceBuffer dsl(rows * 100 * sizeof(float));
  dsl.poison();
  slice(da.get<float>(), cols, 37, dsl.get<float>(), rows, 100, nullptr);
  sync();
  const auto sl = dsl.to_host<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 100; ++c) ASSERT_EQ(sl[r * 100 + c], a[r * cols + 37 + c]);
  const std::vector<int32_t> idx = {6, 0, 3};
  auto didx = DeviceBuffer::of(idx);
  DeviceBuffer dg(idx.size() * cols * sizeof(float));
  dg.poison();
  gather_rows(da.get<float>(), didx.get<int32_t>(), dg.get<float>(), int64_t(idx.size()), cols, nullptr);
  sync();
  const auto g = dg.to_host<float>();
  for (size_t r = 0; r < idx.size(); ++r)
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(g[r * cols + c], a[idx[r] * cols + c]);
}

TEST(Rope, NormalAndNeoxWithFactorsAndPartialRotation) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t rows = 6, head_dim = 64, heads = 3, cols = heads * head_dim;
  const std::vector<int32_t> pos = {0, 1, 17, 500, 4095, 8191};
  const auto x = random_floats(rng, rows * cols);
  std::vector<float> ff(16);
  for (auto& f : ff) f = 1.f + std::abs(random_floats(rng, 1)[0]);
  auto dx = DeviceBuffer::of(x), dp = DeviceBuffer::of(pos), dff = DeviceBuffer::of(ff);
  DeviceBuffer dout(rows * cols * sizeof(float));
  for (bool neox : {false, true})
    for (int64_t n_rot : {int64_t(64), int64_t(32)}) {
      const bool use_ff = n_rot == 32;
      dout.poison();
      rope(dx.get<float>(), dp.get<int32_t>(), dout.get<float>(), rows, cols, head_dim, n_rot, 10000.f, 0.5f,
           use_ff ? dff.get<float>() : nullptr, neox, nullptr);
      sync();
      const auto out = dout.to_host<float>();
      const float ts = std::pow(10000.f, -2.0f / float(n_rot));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < heads; ++h) {
          const float* xi = x.data() + r * cols + h * head_dim;
          const float* o = out.data() + r * cols + h * head_dim;
          float theta = float(pos[r]);
          for (int64_t i = 0; i < n_rot / 2; ++i) {
            const float th = 0.5f * (use_ff ? theta / ff[i] : theta);
            theta *= ts;
            const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
            const double c = std::cos(double(th)), s = std::sin(double(th));
            const double tol = 1e-5 * (std::abs(xi[i0]) + std::abs(xi[i1])) + 1e-6;
            ASSERT_NEAR(o[i0], xi[i0] * c - xi[i1] * s, tol) << "neox " << neox << " n_rot " << n_rot;
            ASSERT_NEAR(o[i1], xi[i0] * s + xi[i1] * c, tol);
          }
          for (int64_t d = n_rot; d < head_dim; ++d) ASSERT_EQ(o[d], xi[d]);
        }
    }
}

TEST(KvStore, WritesRowsThroughBlockTables) {
  std::mt19937_64 rng(fresh_seed());
  const int32_t bs = 4, max_blocks = 3;
  const int64_t kw = 64, vw = 32;
  const std::vector<int32_t> tables = {5, 1, 3, 0, 2, 4}, seq = {0, 0, 1}, pos = {5, 9, 2};
  const auto k = random_floats(rng, 3 * kw), v = random_floats(rng, 3 * vw);
  DeviceBuffer dkp(6 * bs * kw * 2), dvp(6 * bs * vw * 2);
  dkp.poison();
  dvp.poison();
  auto dt = DeviceBuffer::of(tables), ds = DeviceBuffer::of(seq), dp = DeviceBuffer::of(pos);
  auto dk = DeviceBuffer::of(k), dv = DeviceBuffer::of(v);
  kv_store({dkp.get<__half>(), dvp.get<__half>(), kw, vw, bs}, {ds.get<int32_t>(), dp.get<int32_t>(), dt.get<int32_t>(), max_blocks},
           dk.get<float>(), dv.get<float>(), 3, nullptr);
  sync();
  const auto kh = dkp.to_host<uint16_t>(), vh = dvp.to_host<uint16_t>();
  for (int r = 0; r < 3; ++r) {
    const int64_t row = int64_t(tables[seq[r] * max_blocks + pos[r] / bs]) * bs + pos[r] % bs;
    for (int64_t c = 0; c < kw; ++c) ASSERT_EQ(kh[row * kw + c], quant::fp32_to_fp16(k[r * kw + c]));
    for (int64_t c = 0; c < vw; ++c) ASSERT_EQ(vh[row * vw + c], quant::fp32_to_fp16(v[r * vw + c]));
  }
}

// `loom bench --ceiling`'s decode ceiling on this backend: the card's copy rate, measured by
// the meter with memory the program's peak does not count, leaving no CUDA error behind.
TEST(DeviceMeter, CopyRateIsTheCardsAndOutsideThePeak) {
  const auto meter = make_cuda_meter();
  DeviceBuffer held(size_t(1) << 20);
  const double peak = *meter->peak_bytes();
  const auto gbs = meter->copy_gbs();
  ASSERT_TRUE(gbs.has_value());
  // HBM cards copy at 1-5 TB/s (read + write); a figure outside (0.1, 20) TB/s is no copy rate.
  EXPECT_GT(*gbs, 100.0);
  EXPECT_LT(*gbs, 20000.0);
  EXPECT_EQ(*meter->peak_bytes(), peak);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace loom::backend::cuda
