// Elementwise and row-wise ops: add, mul, SwiGLU, GeGLU (tanh GELU), scale, softcap, RMS norm,
// column slices. One thread per element, or one block per normalised group.
#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

template <Binary Op>
__global__ void binary_kernel(const float* __restrict__ a, const float* __restrict__ b, int64_t b_rows,
                              float* __restrict__ out, int64_t rows, int64_t cols) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float x = a[i], y = b[b_rows == 1 ? i % cols : i];
  if constexpr (Op == Binary::add) out[i] = x + y;
  else if constexpr (Op == Binary::mul) out[i] = x * y;
  else if constexpr (Op == Binary::swiglu) out[i] = silu(x) * y;
  else out[i] = gelu_tanh(x) * y;
}

__global__ void scale_kernel(const float* __restrict__ x, float f, float* __restrict__ out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * f;
}

__global__ void softcap_kernel(const float* __restrict__ x, float cap, float* __restrict__ out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tanhf(x[i] * (1.0f / cap)) * cap;
}

// Blocks (group, part) per group of `group` elements: each takes the group's sum of squares
// (the same bits in every block), then x * rsqrt(mean + eps) * w over its part of the group.
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps,
                                float* __restrict__ out, int64_t group) {
  allow_next_kernel();
  wait_previous_kernel();
  const float* xg = x + int64_t(blockIdx.x) * group;
  float* og = out + int64_t(blockIdx.x) * group;
  const float s = rsqrtf(block_sum_squares<kThreads>(xg, group) / float(group) + eps);
  for (int64_t c = blockIdx.y * blockDim.x + threadIdx.x; c < group; c += gridDim.y * blockDim.x) og[c] = xg[c] * s * w[c];
}

__global__ void slice_kernel(const float* __restrict__ x, int64_t ldx, int64_t start, float* __restrict__ out,
                             int64_t rows, int64_t cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[i] = x[(i / cols) * ldx + start + i % cols];
}

__global__ void gather_kernel(const float* __restrict__ in, const int32_t* __restrict__ idx, float* __restrict__ out,
                              int64_t rows, int64_t cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[i] = in[int64_t(idx[i / cols]) * cols + i % cols];
}

}  // namespace

void binary(Binary op, const float* a, const float* b, int64_t b_rows, float* out, int64_t rows, int64_t cols,
            cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  const dim3 grid(blocks_for(n)), block(kThreads);
  switch (op) {
    case Binary::add: launch(binary_kernel<Binary::add>, grid, block, s, a, b, b_rows, out, rows, cols); break;
    case Binary::mul: launch(binary_kernel<Binary::mul>, grid, block, s, a, b, b_rows, out, rows, cols); break;
    case Binary::swiglu: launch(binary_kernel<Binary::swiglu>, grid, block, s, a, b, b_rows, out, rows, cols); break;
    case Binary::geglu: launch(binary_kernel<Binary::geglu>, grid, block, s, a, b, b_rows, out, rows, cols); break;
  }
}

void scale(const float* x, float factor, float* out, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, factor, out, n);
  LOOM_CUDA_CHECK_LAUNCH();
}

void softcap(const float* x, float cap, float* out, int64_t n, cudaStream_t s) {
  if (!(cap > 0)) cuda_invalid("softcap: cap must be > 0");
  if (n <= 0) return;
  softcap_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, cap, out, n);
  LOOM_CUDA_CHECK_LAUNCH();
}

void rms_norm(const float* x, const float* w, float eps, float* out, int64_t rows, int64_t cols, int64_t group,
              cudaStream_t s) {
  if (group <= 0 || cols % group) cuda_invalid("rms_norm: the group must divide the row width");
  const int64_t groups = rows * (cols / group);
  if (groups <= 0) return;
  const int64_t parts = std::min<int64_t>(16, (group + 4 * kThreads - 1) / (4 * kThreads));  // ~4 elements a thread
  launch(rms_norm_kernel, dim3(unsigned(groups), unsigned(parts)), dim3(kThreads), s, x, w, eps, out, group);
}

void slice(const float* x, int64_t ldx, int64_t start, float* out, int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  slice_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, ldx, start, out, rows, cols);
  LOOM_CUDA_CHECK_LAUNCH();
}

void gather_rows(const float* in, const int32_t* idx, float* out, int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  gather_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, idx, out, rows, cols);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::backend::cuda
