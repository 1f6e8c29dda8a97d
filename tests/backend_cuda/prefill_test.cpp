// The prefill path: weights_to_f16 (stored and packed layouts) against the reference
// dequantization rounded to f16, and the cuBLAS GEMM against a double-precision product of the
// same f16 operands, on fresh random inputs with outputs poisoned. Needs a GPU (gpu-check).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "random_inputs.h"

namespace loom::backend::cuda {
namespace {

using gguf::TensorType;

std::vector<float> halves_to_floats(const std::vector<uint16_t>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = quant::fp16_to_fp32(h[i]);
  return f;
}

TEST(WeightsToF16, StoredAndPackedRowsEqualReferenceDequantization) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t N = 37, K = 512;
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q4_K,
                       TensorType::Q5_K, TensorType::Q6_K, TensorType::F16, TensorType::F32}) {
    SCOPED_TRACE(gguf::type_name(t));
    const size_t rb = quant::row_size(t, K);
    std::vector<uint8_t> w(rb * N);
    std::vector<float> ref(size_t(N * K));
    for (int64_t n = 0; n < N; ++n) {
      const auto src = random_floats(rng, size_t(K));
      quant::quantize_row(t, src.data(), w.data() + n * rb, K);
      quant::dequantize_row(t, w.data() + n * rb, ref.data() + n * K, K);
    }
    for (bool packed : {false, true}) {
      if (packed && !has_q8_kernel(t, K)) continue;
      const auto bytes = packed ? pack_rows(t, w.data(), N, K) : w;
      auto dw = DeviceBuffer::of(bytes);
      DeviceBuffer out(size_t(N * K) * 2);
      out.poison();
      weights_to_f16(t, packed, dw.get<uint8_t>(), bytes.size() / size_t(N), N, K, out.get<__half>(), nullptr);
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = halves_to_floats(out.to_host<uint16_t>());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-3 * std::abs(ref[i]) + 1e-7) << "element " << i << (packed ? " packed" : " stored");
    }
  }
}

TEST(Gemm, F16ProductMatchesDoubleReference) {
  std::string why;
  cudaStream_t s = nullptr;
  LOOM_CUDA_CHECK(cudaStreamCreate(&s));
  auto gemm = Gemm::open(s, why);
  if (!gemm) GTEST_SKIP() << why;
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const int64_t N = 200, T = 77, K = 576, ldy = N + 8;
  auto w = random_floats(rng, size_t(N * K)), x = random_floats(rng, size_t(T * K));
  std::vector<uint16_t> wh(w.size()), xh(x.size());
  for (size_t i = 0; i < w.size(); ++i) wh[i] = quant::fp32_to_fp16(w[i]), w[i] = quant::fp16_to_fp32(wh[i]);
  for (size_t i = 0; i < x.size(); ++i) xh[i] = quant::fp32_to_fp16(x[i]), x[i] = quant::fp16_to_fp32(xh[i]);
  auto dw = DeviceBuffer::of(wh), dx = DeviceBuffer::of(xh);
  DeviceBuffer dy(size_t(T * ldy) * sizeof(float));
  dy.poison();
  gemm->f16(dw.get<__half>(), dx.get<__half>(), N, T, K, dy.get<float>(), ldy);
  LOOM_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto y = dy.to_host<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) ref += double(w[n * K + k]) * x[t * K + k], mag += std::abs(double(w[n * K + k]) * x[t * K + k]);
      ASSERT_NEAR(y[t * ldy + n], ref, 1e-5 * mag + 1e-6) << "row " << t << " col " << n;
    }
  gemm.reset();
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace loom::backend::cuda
