// Every CUDA runtime call of the backend goes through LOOM_CUDA_CHECK: a failure becomes a
// loom::Error naming the call, the CUDA error and the source line, never a silent wrong result.
// Kernel launches are followed by LOOM_CUDA_CHECK_LAUNCH(), which reads the launch error.
// (No fmt here: this header is included by .cu files, which nvcc compiles.)
#pragma once
#include <cuda_runtime.h>

namespace loom::backend::cuda {
[[noreturn]] void cuda_fail(const char* call, cudaError_t err, const char* file, int line);  // check.cpp
[[noreturn]] void cuda_invalid(const char* what);  // a kernel entry point called with bad arguments
}

#define LOOM_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    const cudaError_t loom_cuda_err_ = (call);                                            \
    if (loom_cuda_err_ != cudaSuccess)                                                    \
      ::loom::backend::cuda::cuda_fail(#call, loom_cuda_err_, __FILE__, __LINE__);        \
  } while (0)

#define LOOM_CUDA_CHECK_LAUNCH() LOOM_CUDA_CHECK(cudaGetLastError())
