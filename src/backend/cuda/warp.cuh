// The one place that knows the warp width and the integer SIMD intrinsics (a HIP port changes
// kWarpSize, the shuffle wrappers and dot4/sub4, nothing else).
#pragma once
#include <cuda_runtime.h>

namespace loom::backend::cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Four-way int8 dot product into a 32-bit accumulator, and bytewise subtraction: the two
// integer SIMD operations the quantized kernels use (HIP: __builtin_amdgcn_sdot4 and a
// plain per-byte loop; keep them here so a port changes this file).
__device__ __forceinline__ int dot4(int a, int b, int acc) { return __dp4a(a, b, acc); }
__device__ __forceinline__ int sub4(int a, int b) { return int(__vsub4(unsigned(a), unsigned(b))); }

}  // namespace loom::backend::cuda
