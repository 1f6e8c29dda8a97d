// The one place that knows the warp width and the integer SIMD intrinsics (a HIP port changes
// kWarpSize, LaneMask, the collectives' wrappers and dot4/sub4, nothing else).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace loom::backend::cuda {

constexpr int kWarpSize = 32;
using LaneMask = unsigned;  // one bit a lane (a 64-lane port: uint64_t)
constexpr LaneMask kFullMask = 0xffffffffu;

// The warp collectives every kernel uses, over all lanes unless a mask is named (a HIP port:
// __shfl_xor etc. without the mask, and match_any as a loop of ballots).
template <class T>
__device__ __forceinline__ T shfl_xor(T v, int offset) { return __shfl_xor_sync(kFullMask, v, offset); }
template <class T>
__device__ __forceinline__ T shfl_down(T v, int offset) { return __shfl_down_sync(kFullMask, v, offset); }
template <class T>
__device__ __forceinline__ T shfl(T v, int src_lane) { return __shfl_sync(kFullMask, v, src_lane); }
__device__ __forceinline__ LaneMask ballot(bool p) { return __ballot_sync(kFullMask, p); }
// The lanes of `active` (the calling lanes) whose v equals this lane's.
__device__ __forceinline__ LaneMask match_any(LaneMask active, int v) { return __match_any_sync(active, v); }
__device__ __forceinline__ int lane_count(LaneMask m) { return __popc(m); }
__device__ __forceinline__ int first_lane(LaneMask m) { return __ffs(m) - 1; }
__device__ __forceinline__ LaneMask lanes_below(int lane) { return (LaneMask(1) << lane) - 1; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}

// The sum over each aligned group of kLanes lanes (a power of two <= kWarpSize), every lane of
// the group getting it: the xor partners of offsets < kLanes stay inside the group.
template <int kLanes>
__device__ __forceinline__ float lanes_sum(float v) {
  static_assert(kLanes > 0 && kLanes <= kWarpSize && (kLanes & (kLanes - 1)) == 0, "lanes_sum: a power of two");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}

// The maximum over each aligned group of kLanes lanes, every lane of the group getting it (as
// lanes_sum).
template <int kLanes>
__device__ __forceinline__ float lanes_max(float v) {
  static_assert(kLanes > 0 && kLanes <= kWarpSize && (kLanes & (kLanes - 1)) == 0, "lanes_max: a power of two");
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v = fmaxf(v, shfl_xor(v, o));
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, shfl_xor(v, o));
  return v;
}

// The sum of squares of x[0, n) across a block of kThreads threads (blockDim.x == kThreads): each
// thread's strided partial sum, warp sums, then warp 0 over the warps' sums; every thread gets
// the total. The plain RMS norm (pointwise.cu) and the fused norm + q8_1 (decode_fused.cu) both
// reduce through this one function, so they add in the same order and agree bit for bit.
template <int kThreads>
__device__ __forceinline__ float block_sum_squares(const float* __restrict__ x, int64_t n) {
  __shared__ float partial[kThreads / kWarpSize];
  // Eight loads in flight per thread before their squares are added (a row is often read
  // from L2 by a single block, and one dependent load at a time made a 4096-wide norm cost
  // ~20 us); the additions stay in the order of the plain loop, so the sum has its bits.
  float sum = 0.f;
  int64_t c = threadIdx.x;
  for (; c + 7 * int64_t(blockDim.x) < n; c += 8 * int64_t(blockDim.x)) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = x[c + i * int64_t(blockDim.x)];
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += v[i] * v[i];
  }
  for (; c < n; c += blockDim.x) sum += x[c] * x[c];
  sum = warp_sum(sum);
  if (threadIdx.x % kWarpSize == 0) partial[threadIdx.x / kWarpSize] = sum;
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    float v = threadIdx.x < blockDim.x / kWarpSize ? partial[threadIdx.x] : 0.f;
    v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// Four-way int8 dot product into a 32-bit accumulator, and bytewise subtraction: the two
// integer SIMD operations the quantized kernels use (HIP: __builtin_amdgcn_sdot4 and a
// plain per-byte loop; keep them here so a port changes this file).
__device__ __forceinline__ int dot4(int a, int b, int acc) { return __dp4a(a, b, acc); }
__device__ __forceinline__ int sub4(int a, int b) { return int(__vsub4(unsigned(a), unsigned(b))); }

}  // namespace loom::backend::cuda
