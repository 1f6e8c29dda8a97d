#include "backend/cuda/check.h"

#include "common/error.h"

namespace loom::backend::cuda {

void cuda_fail(const char* call, cudaError_t err, const char* file, int line) {
  loom::fail("CUDA: {} failed: {} ({}:{})", call, cudaGetErrorString(err), file, line);
}

void cuda_invalid(const char* what) { loom::fail("CUDA backend: {}", what); }

}  // namespace loom::backend::cuda
