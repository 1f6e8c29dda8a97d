// The PTX the tensor-core kernels write by hand, in one place (a HIP port replaces this file):
// tensor-core MMAs, ldmatrix, global -> shared copies that bypass registers (cp.async), and
// Hopper's warpgroup MMAs (wgmma, sm_90a only; below). The MMAs and ldmatrix exist from sm_80 on
// and the kernels that use them run only there (mma_device()); elsewhere they compile to nothing.
// A cp.async below sm_80 is a plain 16-byte copy, done before it returns, and its commit and wait
// are no-ops.
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

// Hopper's warpgroup MMAs (wgmma): compiled only for sm_90a (LOOM_WGMMA: the arch-specific
// features are not in plain sm_90 code), elsewhere nothing, so a kernel that uses them keeps an
// mma.sync path for the builds without (LOOM_WGMMA 0). A warpgroup is four consecutive warps;
// each wgmma is issued by all four with the same B operand.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOOM_WGMMA 1
#else
#define LOOM_WGMMA 0
#endif

// A shared-memory operand's descriptor, no swizzle: the start address, and the byte distances
// between core matrices (8 rows of 16 bytes, each stored whole) adjacent in K (lbo) and in M or N
// (sbo), each in units of 16 bytes (bits 0-13, 16-29, 32-45).
__device__ __forceinline__ uint64_t wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return uint64_t((addr & 0x3FFFFu) >> 4) | uint64_t((lbo & 0x3FFFFu) >> 4) << 16 | uint64_t((sbo & 0x3FFFFu) >> 4) << 32;
}
// Orders the registers the warpgroup wrote (A fragments, accumulators) before the wgmmas after it.
__device__ __forceinline__ void wgmma_fence() {
#if LOOM_WGMMA
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
// The wgmmas issued since the last commit form a group (waited for by wgmma_wait).
__device__ __forceinline__ void wgmma_commit() {
#if LOOM_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Shared memory written through the generic proxy (stores, cp.async) made visible to the async
// proxy that wgmma reads it through: after the writes, before the barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if LOOM_WGMMA
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// d[t][.] += a b, m64n(8 NT)k16 (NT 4 or 8: the forms the tiled matmul takes), f16 operands, f32 sums, asynchronous (wgmma_commit, then
// wgmma_wait before d is read). The warp's A fragment is its 16 rows of the 64 (warp % 4), in
// mma_f16's order; B (K x N, K-major: each of the N rows' 16 elements in two core matrices) comes
// from shared memory by descriptor; d[t] is the C fragment of columns 8t .. 8t + 7, mma_f16's.
template <int NT> __device__ __forceinline__ void wgmma_f16(float (&d)[NT][4], const uint32_t (&a)[4], uint64_t b);
template <> __device__ __forceinline__ void wgmma_f16<4>(float (&d)[4][4], const uint32_t (&a)[4], uint64_t b) {
#if LOOM_WGMMA
  asm volatile(
      "{.reg .pred p; setp.ne.b32 p, %21, 0; "
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;}"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
        "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
#endif
}
template <> __device__ __forceinline__ void wgmma_f16<8>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
#if LOOM_WGMMA
  asm volatile(
      "{.reg .pred p; setp.ne.b32 p, %37, 0; "
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;}"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
        "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
#endif
}

// Waits until at most Pending committed groups are in flight. The accumulators pass through an
// empty asm after it, so the compiler reads them only after the wait (a wgmma writes them when it
// completes, not when issued).
template <int Pending, int NT> __device__ __forceinline__ void wgmma_wait(float (&d)[NT][4]) {
#if LOOM_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#pragma unroll
  for (int t = 0; t < NT; ++t) asm volatile("" : "+f"(d[t][0]), "+f"(d[t][1]), "+f"(d[t][2]), "+f"(d[t][3])::"memory");
#endif
}

}  // namespace loom::backend::cuda
