// Bandwidth of the CUDA decode kernels on Llama-3-8B-shaped weights: each case is timed with
// CUDA events over many launches (weights rotated across enough copies to exceed the L2),
// reported as weight bytes read per second against a device-to-device copy measured in the
// same run (bytes read + written). Kernels per case: "f32" the dequantizing matmul_rows on f32
// activations, "q8" matmul_q8 (warp per row) on packed weights and q8_1 activations, "mma" the
// tensor-core path of batches (matmul_mma.cu), "glu"/"glu-mma" the 8B gate/up launch (the
// activation quantization, shared by the matmuls reading one input, is timed on its own row). Run by
// scripts/gpu-check; prints one table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"

using namespace loom::backend::cuda;
using gguf::TensorType;

namespace {

float time_ms(int iters, const auto& fn) {
  cudaEvent_t a, b;
  LOOM_CUDA_CHECK(cudaEventCreate(&a));
  LOOM_CUDA_CHECK(cudaEventCreate(&b));
  fn(0);  // warm-up
  LOOM_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) fn(i);
  LOOM_CUDA_CHECK(cudaEventRecord(b));
  LOOM_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows reach the log as they are measured
  const size_t copy_bytes = size_t(2) << 30;
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  LOOM_CUDA_CHECK(cudaMemset(src.get(), 1, copy_bytes));
  const float copy_ms = time_ms(10, [&](int) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice));
  });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n\n", copy_gbs);
  std::printf("| %-6s | %-6s | %-12s | %-4s | %-9s | %-9s | %-8s |\n", "type", "kernel", "N x K", "rows", "us", "GB/s",
              "of copy");
  std::printf("|--------|--------|--------------|------|-----------|-----------|----------|\n");
  struct Case { TensorType t; int64_t N, K; };
  const Case cases[] = {{TensorType::Q4_K, 4096, 4096}, {TensorType::Q4_K, 14336, 4096}, {TensorType::Q6_K, 4096, 14336},
                        {TensorType::Q4_K, 1024, 4096}, {TensorType::Q6_K, 128256, 4096}, {TensorType::Q8_0, 4096, 4096},
                        {TensorType::Q5_0, 4096, 4096}, {TensorType::Q4_0, 4096, 4096}, {TensorType::Q4_1, 4096, 4096},
                        {TensorType::Q5_K, 4096, 4096}, {TensorType::F16, 4096, 4096}, {TensorType::F32, 4096, 4096}};
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd;
  for (const auto& c : cases) {
    const size_t rb = loom::quant::row_size(c.t, c.K), bytes = rb * c.N;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / bytes + 1));  // > L2 in rotation
    std::vector<float> row(c.K);
    std::vector<uint8_t> host(bytes);
    for (int64_t n = 0; n < c.N; ++n) {
      for (auto& x : row) x = nd(rng);
      loom::quant::quantize_row(c.t, row.data(), host.data() + n * rb, c.K);
    }
    const bool q8 = has_q8_kernel(c.t, c.K);
    const std::vector<uint8_t> packed = q8 ? pack_rows(c.t, host.data(), c.N, c.K) : std::vector<uint8_t>();
    std::vector<DeviceBuffer> w, wp;
    for (int i = 0; i < copies; ++i) {
      w.push_back(DeviceBuffer::of(host));
      if (q8) wp.push_back(DeviceBuffer::of(packed));
    }
    const std::string type(gguf::type_name(c.t));
    auto report = [&](const char* kernel, int rows, float ms, double b) {
      const double gbs = b / (ms * 1e-3) / 1e9;
      std::printf("| %-6s | %-6s | %5lld x %-5lld | %-4d | %9.1f | %9.0f | %7.0f%% |\n", type.c_str(), kernel,
                  (long long)c.N, (long long)c.K, rows, ms * 1e3, gbs, 100 * gbs / copy_gbs);
    };
    for (int rows : {1, 8, 32, 64}) {
      if (rows > 8 && !q8) continue;
      std::vector<float> x(size_t(rows * c.K));
      for (auto& v : x) v = nd(rng);
      auto dx = DeviceBuffer::of(x);
      DeviceBuffer dy(size_t(rows * c.N) * sizeof(float));
      DeviceBuffer dq(size_t(rows * c.K)), dds(size_t(rows * c.K / 32) * sizeof(float2));
      DeviceBuffer scratch(mma_scratch_bytes(rows, c.K));
      const MmaPath mma{scratch.get(), scratch.bytes(), 1};
      const bool tc = q8 && rows > 1 && has_mma_kernel(c.t) && mma_device();
      if (rows <= 8)
        report("f32", rows, time_ms(50, [&](int i) {
                 matmul_rows(c.t, w[i % copies].get<uint8_t>(), rb, c.N, c.K, dx.get<float>(), c.K, rows, dy.get<float>(),
                             c.N, nullptr);
               }), double(bytes));
      if (!q8) continue;
      quantize_q8_1(dx.get<float>(), c.K, rows, c.K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
      report("q8", rows, time_ms(50, [&](int i) {
               matmul_q8(c.t, wp[i % copies].get<uint8_t>(), packed.size() / size_t(c.N), c.N, c.K, dq.get<int8_t>(),
                         dds.get<float2>(), rows, dy.get<float>(), c.N, nullptr);
             }), double(packed.size()));
      const size_t prb = packed.size() / size_t(c.N);
      if (tc)  // the tensor-core path (pack of the activations included)
        report("mma", rows, time_ms(50, [&](int i) {
                 const MatmulPart part{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N};
                 matmul_q8_parts(&part, 1, MatmulEpilogue::store, c.K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                                 {}, mma);
               }), double(packed.size()));
      if (c.N == 14336 && copies > 1) {  // the gate/up launch of the 8B shape: two weights, swiglu epilogue
        for (bool with_tc : {false, true}) {
          if (with_tc && !tc) continue;
          report(with_tc ? "glu-mma" : "glu", rows, time_ms(50, [&](int i) {
                   const MatmulPart parts[2] = {{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N},
                                                {c.t, wp[(i + 1) % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N}};
                   matmul_q8_parts(parts, 2, MatmulEpilogue::swiglu, c.K, dq.get<int8_t>(), dds.get<float2>(), rows,
                                   nullptr, {}, with_tc ? mma : MmaPath{});
                 }), 2.0 * double(packed.size()));
        }
      }
      report("quant", rows, time_ms(50, [&](int) {
               quantize_q8_1(dx.get<float>(), c.K, rows, c.K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
             }), double(rows * c.K * 4));
    }
  }
  return 0;
}
