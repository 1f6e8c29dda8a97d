// The tensor-core matmuls' shared pieces: the activations' fragment order and each weight type's step
// (a group's codes and coefficients for a warp's two rows), read by the int8 kernel (matmul_mma.cu)
// and the tiled f16 kernel (matmul_mma_tiled.cu), on ptx.cuh's MMAs; and what matmul_mma_parts asks
// of the tiled kernel.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda::mma_detail {

using gguf::TensorType;

constexpr int kTile = 16;     // weight rows per warp tile
constexpr int kSeqTile = 8;   // activation rows per MMA
constexpr int kMaxSeqTiles = 8;
constexpr int kMaxParts = 4;

// The MMA's k order is a permutation of the group's elements, the same for weights and
// activations (a dot product does not depend on the order of its terms): lane tid of a quad
// holds elements 8 tid .. 8 tid + 7 of a group, as its k = 4 tid .. (a0/b0) and 16 + 4 tid ..
// (a2/b1) — so each lane's share of a row's group is 8 contiguous bytes, one load, where the
// PTX order would take two 4-byte loads 16 bytes apart.
//
// The activations in fragment order: for seq tile t and group g, lane l's int2 holds the 8
// codes of row 8t + l/4 at group offset 8(l%4); scales hold, per (t, g), the float2 {d, d * sum}
// of rows 8t .. 8t + 7 (a lane reads rows 2(l%4) and 2(l%4) + 1 as one float4).
//
// For the tiled f16 kernel (MmaPath::tiled) the activations are instead d * code rounded to f16:
// per (t, g) 512 bytes, lane l's 8 elements (row 8t + l/4, group offset 8(l%4)) as four 4-byte
// words, word j at word 32j + l of them, so the bytes are four 8 x 16-byte core matrices, the
// layout ldmatrix and wgmma read (pack_x_f16_kernel).
struct XTiles {
  const int2* __restrict__ codes;
  const float4* __restrict__ scales;
  int64_t groups;  // K / 32
  const uint4* __restrict__ halves = nullptr;
};

__device__ __forceinline__ uint2 u64(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
__device__ __forceinline__ uint32_t lo4(uint32_t v) { return v & 0x0F0F0F0Fu; }
__device__ __forceinline__ uint32_t hi4(uint32_t v) { return (v >> 4) & 0x0F0F0F0Fu; }
__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(p)));
}
// The fifth bits of four elements (bits 0..3 of b) moved to bit 4 of each byte.
__device__ __forceinline__ uint32_t spread5(uint32_t b) {
  return ((b & 1) << 4) | ((b & 2) << 11) | ((b & 4) << 18) | ((b & 8) << 25);
}

// One 32-element group of the warp's two rows (gid and gid + 8 of the tile) in a lane: its 8
// elements of each row (w0: row 0, w1: row 1; .x the first four) and each row's (a, b)
// coefficients of acc += a d(x) sum + b d(x) sum(x codes). Q6_K: a lane's 8 elements lie in
// one 16-element half (`half`); the group takes two MMAs, each with the other half's lanes
// zeroed, and c0, c1 scale the first half's sums, c0h, c1h the second's.
struct Group {
  uint2 w0, w1;
  float2 c0, c1, c0h, c1h;
  int half = -1;
};

// Per type: groups per step (a step's loads serve them all) and the step itself. A step reads a
// row's quant bytes from w (the row's start) and, for the repacked types (packed_layout.h), its
// other bytes from a (where they start: the row's nb quant ranges past w); s counts steps from w.
// The row is in global memory (matmul_mma_kernel) or a chunk of it in shared memory
// (matmul_mma_tiled_kernel, w and a that chunk's copies).
template <TensorType T> struct MmaType;

template <TensorType T> struct Legacy {  // Q4_0, Q4_1, Q5_0, Q8_0: one 32-element block per group
  static constexpr int kGroups = 1;
  template <typename F>
  __device__ static void step(const uint8_t* w0, const uint8_t* a0, const uint8_t* w1, const uint8_t* a1, int64_t s,
                              int tid, F&& f) {
    constexpr PackedLayout L = packed_layout(T);
    Group g;
    const uint8_t* x0 = a0 + s * L.aux_bytes();
    const uint8_t* x1 = a1 + s * L.aux_bytes();
    const float d0 = half_at(x0), d1 = half_at(x1);
    if constexpr (T == TensorType::Q8_0) {
      g.w0 = u64(w0 + s * 32 + 8 * tid), g.w1 = u64(w1 + s * 32 + 8 * tid);
      g.c0 = make_float2(d0, 0.f), g.c1 = make_float2(d1, 0.f);
    } else {
      // Byte j holds element j (low nibble) and j + 16 (high): elements 8 tid.. are the low
      // nibbles of bytes 8 tid.. for tid < 2, the high nibbles of bytes 8 (tid - 2).. after.
      const uint2 v0 = u64(w0 + s * 16 + 8 * (tid % 2)), v1 = u64(w1 + s * 16 + 8 * (tid % 2));
      const bool hi = tid >= 2;
      g.w0 = hi ? make_uint2(hi4(v0.x), hi4(v0.y)) : make_uint2(lo4(v0.x), lo4(v0.y));
      g.w1 = hi ? make_uint2(hi4(v1.x), hi4(v1.y)) : make_uint2(lo4(v1.x), lo4(v1.y));
      if constexpr (T == TensorType::Q5_0) {  // qh bit e is element e's fifth bit
        const uint32_t h0 = uint32_t(*reinterpret_cast<const uint16_t*>(x0 + 2)) |
                            (uint32_t(*reinterpret_cast<const uint16_t*>(x0 + 4)) << 16);
        const uint32_t h1 = uint32_t(*reinterpret_cast<const uint16_t*>(x1 + 2)) |
                            (uint32_t(*reinterpret_cast<const uint16_t*>(x1 + 4)) << 16);
        g.w0.x |= spread5(h0 >> (8 * tid)), g.w0.y |= spread5(h0 >> (8 * tid + 4));
        g.w1.x |= spread5(h1 >> (8 * tid)), g.w1.y |= spread5(h1 >> (8 * tid + 4));
        g.c0 = make_float2(d0, -16.f * d0), g.c1 = make_float2(d1, -16.f * d1);
      } else if constexpr (T == TensorType::Q4_1) {
        g.c0 = make_float2(d0, half_at(x0 + 2)), g.c1 = make_float2(d1, half_at(x1 + 2));
      } else {
        g.c0 = make_float2(d0, -8.f * d0), g.c1 = make_float2(d1, -8.f * d1);
      }
    }
    f(0, g);
  }
};
template <> struct MmaType<TensorType::Q4_0> : Legacy<TensorType::Q4_0> {};
template <> struct MmaType<TensorType::Q4_1> : Legacy<TensorType::Q4_1> {};
template <> struct MmaType<TensorType::Q5_0> : Legacy<TensorType::Q5_0> {};
template <> struct MmaType<TensorType::Q8_0> : Legacy<TensorType::Q8_0> {};

// Q4_K / Q5_K: a step is a 64-element unit c of a 256-block: quant bytes [32c, 32c + 32), low
// nibbles group 2c, high nibbles group 2c + 1 (Q5_K: plus bits 2c, 2c + 1 of qh byte l).
template <TensorType T> struct KQuant45 {
  static constexpr int kGroups = 2;
  template <typename F>
  __device__ static void step(const uint8_t* w0, const uint8_t*, const uint8_t* w1, const uint8_t*, int64_t s, int tid,
                              F&& f) {
    constexpr bool five = T == TensorType::Q5_K;
    const uint8_t* b0 = w0 + (s / 4) * (five ? 176 : 144);
    const uint8_t* b1 = w1 + (s / 4) * (five ? 176 : 144);
    const int c = int(s % 4);
    const int4 head0 = *reinterpret_cast<const int4*>(b0), head1 = *reinterpret_cast<const int4*>(b1);
    const uint2 v0 = u64(b0 + (five ? 48 : 16) + 32 * c + 8 * tid), v1 = u64(b1 + (five ? 48 : 16) + 32 * c + 8 * tid);
    uint2 h0 = make_uint2(0, 0), h1 = make_uint2(0, 0);
    if constexpr (five) h0 = u64(b0 + 16 + 8 * tid), h1 = u64(b1 + 16 + 8 * tid);
    const float d0 = __half2float(__ushort_as_half(uint16_t(head0.x))), m0 = __half2float(__ushort_as_half(uint16_t(uint32_t(head0.x) >> 16)));
    const float d1 = __half2float(__ushort_as_half(uint16_t(head1.x))), m1 = __half2float(__ushort_as_half(uint16_t(uint32_t(head1.x) >> 16)));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      Group g;
      g.w0 = h ? make_uint2(hi4(v0.x), hi4(v0.y)) : make_uint2(lo4(v0.x), lo4(v0.y));
      g.w1 = h ? make_uint2(hi4(v1.x), hi4(v1.y)) : make_uint2(lo4(v1.x), lo4(v1.y));
      if constexpr (five) {
        const int sh = 2 * c + h;
        g.w0.x |= ((h0.x >> sh) & 0x01010101u) << 4, g.w0.y |= ((h0.y >> sh) & 0x01010101u) << 4;
        g.w1.x |= ((h1.x >> sh) & 0x01010101u) << 4, g.w1.y |= ((h1.y >> sh) & 0x01010101u) << 4;
      }
      float sc0, mn0, sc1, mn1;
      scale_min(2 * c + h, head0, sc0, mn0);
      scale_min(2 * c + h, head1, sc1, mn1);
      g.c0 = make_float2(d0 * sc0, -m0 * mn0), g.c1 = make_float2(d1 * sc1, -m1 * mn1);
      f(h, g);
    }
  }
};
template <> struct MmaType<TensorType::Q4_K> : KQuant45<TensorType::Q4_K> {};
template <> struct MmaType<TensorType::Q5_K> : KQuant45<TensorType::Q5_K> {};

// Q6_K: a step is a 32-element group gq of a 256-block (h = gq / 4, quarter k = gq % 4): element
// l of it is ql byte 64h + 32(k & 1) + l (low nibble for k < 2) with bits 2k, 2k + 1 of qh byte
// 32h + l; codes q - 32 (signed); 16-element halves with int8 scales. Packed: ql, qh per block
// first, then scales (16 B) and d per block.
template <> struct MmaType<TensorType::Q6_K> {
  static constexpr int kGroups = 1;
  template <typename F>
  __device__ static void step(const uint8_t* w0, const uint8_t* a0, const uint8_t* w1, const uint8_t* a1, int64_t s,
                              int tid, F&& f) {
    const int64_t blk = s / 8;
    const int gq = int(s % 8), h = gq / 4, k = gq % 4;
    const int ql_off = 64 * h + 32 * (k & 1) + 8 * tid, qh_off = 128 + 32 * h + 8 * tid;
    auto codes = [&](const uint8_t* qb) {
      const uint2 l = u64(qb + ql_off), hb = u64(qb + qh_off);
      const uint32_t x = (k < 2 ? lo4(l.x) : hi4(l.x)) | (((hb.x >> (2 * k)) & 0x03030303u) << 4);
      const uint32_t y = (k < 2 ? lo4(l.y) : hi4(l.y)) | (((hb.y >> (2 * k)) & 0x03030303u) << 4);
      return make_uint2(uint32_t(sub4(int(x), 0x20202020)), uint32_t(sub4(int(y), 0x20202020)));
    };
    Group g;
    g.w0 = codes(w0 + blk * 192), g.w1 = codes(w1 + blk * 192);
    g.half = tid / 2;  // elements 8 tid .. 8 tid + 7: half 0 for tid < 2
    const uint8_t *x0 = a0 + blk * 18, *x1 = a1 + blk * 18;
    const int si = 8 * h + 2 * k;
    const float d0 = half_at(x0 + 16), d1 = half_at(x1 + 16);
    g.c0 = make_float2(d0 * float(int8_t(x0[si])), 0.f), g.c0h = make_float2(d0 * float(int8_t(x0[si + 1])), 0.f);
    g.c1 = make_float2(d1 * float(int8_t(x1[si])), 0.f), g.c1h = make_float2(d1 * float(int8_t(x1[si + 1])), 0.f);
    f(0, g);
  }
};

// matmul_mma_tiled.cu, for matmul_mma_parts. Its scratch (after the f16 activations): tickets
// and slots of partial sums, a fixed size per device.
size_t tiled_scratch_bytes();
// Whether a launch takes the tiled kernel under the policy (kernels.h, MmaTiles).
bool tiled_pays(const MatmulPart* parts, int n, MatmulEpilogue e, int64_t K, MmaTiles policy);
// The activations as f16 fragments (XTiles::halves) for `tiles` seq tiles, and the tickets zeroed.
void pack_x_f16(const int8_t* q, const float2* ds, int64_t rows, int64_t K, int64_t tiles, uint4* halves,
                void* tiled_scratch, cudaStream_t s);
// One pass of at most 64 rows (nt seq tiles) on the tiled kernel; parts already offset to the pass.
void launch_tiled_pass(const MatmulPart* parts, int n, MatmulEpilogue e, int64_t rows, int64_t K, int64_t nt,
                       const XTiles& x, void* tiled_scratch, cudaStream_t s);

}  // namespace loom::backend::cuda::mma_detail
