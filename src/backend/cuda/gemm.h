// The prefill GEMM: y[t][n] = sum_k W[n][k] x[t][k] on the tensor cores, f16 operands and f32
// accumulation, through cuBLAS. cuBLAS is loaded at run time (dlopen), so the binary links and
// starts on a machine without it (CI, a bare driver install); there the plan keeps the
// integer-dot kernels for every row count and says so in its explain() lines.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/device_buffer.h"

namespace loom::backend::cuda {

class Gemm {
 public:
  // A handle bound to `stream`, or null with `why` set when cuBLAS cannot be loaded.
  static std::unique_ptr<Gemm> open(cudaStream_t stream, std::string& why);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  // W: N rows of K halves; x: T rows of K halves; y: T rows, ldy floats apart.
  void f16(const __half* w, const __half* x, int64_t N, int64_t T, int64_t K, float* y, int64_t ldy);

 private:
  Gemm() = default;
  struct Api;
  const Api* api_ = nullptr;
  void* handle_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace loom::backend::cuda
