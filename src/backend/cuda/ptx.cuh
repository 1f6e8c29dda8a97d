// The PTX the tensor-core kernels write by hand, in one place (a HIP port replaces this file):
// tensor-core MMAs, ldmatrix, and global -> shared copies that bypass registers (cp.async).
// The MMAs and ldmatrix exist from sm_80 on and the kernels that use them run only there
// (mma_device()); elsewhere they compile to nothing. A cp.async below sm_80 is a plain 16-byte
// copy, done before it returns, and its commit and wait are no-ops.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace loom::backend::cuda {

// c += a b, m16n8k16, f16 operands, f32 sums. Fragments (g = lane / 4, t = lane % 4; the lower
// column in the lower half): a = A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..];
// b = B[2t..][g], B[2t+8..][g]; c = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_f16(c, a[0], a[1], a[2], a[3], b0, b1);
}

// c += a b, m16n8k32, s8 operands, s32 sums.
__device__ __forceinline__ void mma_k32(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// 4 8x8 b16 matrices shared -> fragments (.trans: each thread gets a column pair instead of a row
// pair). Lanes 8i .. 8i + 7 give the row addresses of matrix i; lane l gets elements (l / 4,
// 2 (l % 4) ..) of each.
template <bool kTrans> __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
#endif
}

// A shared pointer as the 32-bit address cp.async takes: a kernel converts its base once and adds
// offsets, where a generic pointer per copy costs a conversion each.
__device__ __forceinline__ unsigned shared_address(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }

// 16 bytes from gmem (16-byte aligned) to shared address s, bypassing L1 (.cg).
__device__ __forceinline__ void cp_async16(unsigned s, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
#else
  *static_cast<uint4*>(__cvta_shared_to_generic(s)) = *static_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) { cp_async16(shared_address(smem), gmem); }

// The copies issued since the last commit form a group; wait until at most N groups are pending.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

}  // namespace loom::backend::cuda
