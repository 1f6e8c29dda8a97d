// Kernel launches with programmatic dependent launch (Hopper's PDL). A decode step is a chain
// of small kernels, each reading what the one before wrote; launched plainly, each starts only
// once its predecessor has drained, and the gap (block scheduling, the prologue, the first
// loads) is paid ~10 times per layer. Launched by launch() with the attribute on, a kernel's
// blocks are scheduled as soon as every block of the previous kernel has called
// allow_next_kernel(), and each waits in wait_previous_kernel() until that kernel has finished
// and its writes are visible (griddepcontrol.wait waits for completion and the memory flush).
// Work before the wait must read nothing an earlier kernel of the step writes: weights only.
//
// Every kernel launched through launch() calls allow_next_kernel() and then
// wait_previous_kernel() before its first read of activations, in every thread. On other
// architectures (and in a HIP port) both are no-ops and the launch is a plain one.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/programmatic_launch.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

// smem: the launch's dynamic shared memory in bytes (past 48 KiB the kernel must have been
// allowed it by cudaFuncSetAttribute).
template <typename... Params, typename... Args>
void launch_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr = {};
  if (programmatic_launch()) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  LOOM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, Params(args)...));
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s, Args... args) {
  launch_smem(kernel, grid, block, 0, s, args...);
}

__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Start pulling `bytes` at p (a weight row, read after the wait) into L2 while the previous
// kernel finishes: one 128-byte line per lane per 4 KiB.
__device__ __forceinline__ void prefetch_l2(const void* p, size_t bytes, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  for (size_t o = size_t(lane) * 128; o < bytes; o += kWarpSize * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p) + o));
#endif
}

}  // namespace loom::backend::cuda
