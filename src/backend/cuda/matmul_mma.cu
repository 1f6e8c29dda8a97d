// Batched integer-dot matmuls on tensor cores (int8 MMA), for decode steps of several sequences.
// The warp-per-row kernel (matmul_q8.cu) keeps every activation row's partial sum in registers
// and re-reads the weights every 8 rows; at 8 rows its gated launch holds 188 registers, runs at
// 12% occupancy and reaches ~20% of the copy rate (ncu, run E). Here a warp takes a tile of 16
// weight rows and up to 64 activation rows and, per 32-element group, multiplies the tile's
// codes with the activations' q8_1 codes in one mma.m16n8k32 per 8 activation rows (Q6_K: two,
// one per 16-element scale, below). The exact int32 group sums are scaled in f32 as the
// warp-per-row kernel scales them: acc += a(row) * d(x) * sum + b(row) * d(x) * sum(x codes), where
// a and b are the weight group's scale and offset (Q4_K: d * sc and -dmin * m; Q4_0: d and -8 d).
//
// The activations are first re-laid (pack_x_kernel) so that each lane's B fragment of a group is
// one 8-byte load and its two rows' scales one 16-byte load. A block is either 4 warps on 4 row
// tiles over the whole K (64 rows: the warps read the same activations, shared through L1), or
// one row tile whose K is split over the block's warps (small batches and narrow weights: more
// warps, more loads in flight; 4 warps, or 8 for store launches when asked), the partial sums
// added in a fixed order (same bits every run).
//
// The MMA is inline PTX (sm_80+); matmul_q8_parts uses this path only on such devices, and a
// port without it keeps the warp-per-row kernel.
#include <cuda_pipeline.h>

#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

using gguf::TensorType;

constexpr int kWarps = 4;      // warps a block, but for the split-K blocks of store launches when
constexpr int kSplitWarps = 8;  // MmaPath::split_warps asks for 8
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
// For the tiled f16 kernel (MmaPath::tiled) the activations are instead d * code rounded to f16,
// in the same order: halves[(t, g, lane)] holds the 8 elements of row 8t + l/4 at group offset
// 8(l%4).
struct XTiles {
  const int2* __restrict__ codes;
  const float4* __restrict__ scales;
  int64_t groups;  // K / 32
  const uint4* __restrict__ halves = nullptr;
};

__global__ void pack_x_kernel(const int8_t* __restrict__ q, const float2* __restrict__ ds, int64_t rows, int64_t K,
                              int64_t tiles, int2* __restrict__ codes, float4* __restrict__ scales, int* tickets,
                              int n_tickets) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t G = K / 32;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // (t, g, lane)
  if (i < n_tickets) tickets[i] = 0;  // the tiled kernel's, zero before its first launch
  if (i >= tiles * G * kWarpSize) return;
  const int lane = int(i % kWarpSize);
  const int64_t tg = i / kWarpSize, t = tg / G, g = tg % G;
  const int64_t r = t * kSeqTile + lane / 4;
  codes[i] = r < rows ? *reinterpret_cast<const int2*>(q + r * K + g * 32 + 8 * (lane % 4)) : make_int2(0, 0);
  if (lane < 4) {
    const int64_t r0 = t * kSeqTile + 2 * lane, r1 = r0 + 1;
    const float2 a = r0 < rows ? ds[r0 * G + g] : make_float2(0.f, 0.f);
    const float2 b = r1 < rows ? ds[r1 * G + g] : make_float2(0.f, 0.f);
    scales[tg * 4 + lane] = make_float4(a.x, a.y, b.x, b.y);
  }
}

__global__ void pack_x_f16_kernel(const int8_t* __restrict__ q, const float2* __restrict__ ds, int64_t rows,
                                  int64_t K, int64_t tiles, uint4* __restrict__ halves, int* tickets, int n_tickets) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t G = K / 32;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // (t, g, lane)
  if (i < n_tickets) tickets[i] = 0;
  if (i >= tiles * G * kWarpSize) return;
  const int lane = int(i % kWarpSize);
  const int64_t tg = i / kWarpSize, t = tg / G, g = tg % G;
  const int64_t r = t * kSeqTile + lane / 4;
  uint32_t h[4] = {0, 0, 0, 0};
  if (r < rows) {
    const float d = ds[r * G + g].x;
    const int2 c = *reinterpret_cast<const int2*>(q + r * K + g * 32 + 8 * (lane % 4));
    const int8_t* b = reinterpret_cast<const int8_t*>(&c);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __half2 v = __floats2half2_rn(d * float(b[2 * j]), d * float(b[2 * j + 1]));
      h[j] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  halves[i] = make_uint4(h[0], h[1], h[2], h[3]);
}

__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void mma_k32(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

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

// One group of a seq tile: the MMA of the warp's two rows' codes with the tile's activation codes
// b (this lane's fragment) and its scales xs ({d, d * sum} of the lane's two activation rows),
// added into acc in C fragment order: (r0, 2 tid), (r0, 2 tid + 1), (r1, 2 tid), (r1, 2 tid + 1).
template <TensorType T>
__device__ __forceinline__ void group_mma(const Group& g, int2 b, float4 xs, float (&acc)[4]) {
  int c[4] = {0, 0, 0, 0};
  if constexpr (T == TensorType::Q6_K) {
    int ch[4] = {0, 0, 0, 0};
    const bool first = g.half == 0;
    mma_k32(c, first ? g.w0.x : 0u, first ? g.w1.x : 0u, first ? g.w0.y : 0u, first ? g.w1.y : 0u, b.x, b.y);
    mma_k32(ch, first ? 0u : g.w0.x, first ? 0u : g.w1.x, first ? 0u : g.w0.y, first ? 0u : g.w1.y, b.x, b.y);
    acc[0] += xs.x * (g.c0.x * float(c[0]) + g.c0h.x * float(ch[0]));
    acc[1] += xs.z * (g.c0.x * float(c[1]) + g.c0h.x * float(ch[1]));
    acc[2] += xs.x * (g.c1.x * float(c[2]) + g.c1h.x * float(ch[2]));
    acc[3] += xs.z * (g.c1.x * float(c[3]) + g.c1h.x * float(ch[3]));
  } else {
    mma_k32(c, g.w0.x, g.w1.x, g.w0.y, g.w1.y, b.x, b.y);
    acc[0] += g.c0.x * xs.x * float(c[0]) + g.c0.y * xs.y;
    acc[1] += g.c0.x * xs.z * float(c[1]) + g.c0.y * xs.w;
    acc[2] += g.c1.x * xs.x * float(c[2]) + g.c1.y * xs.y;
    acc[3] += g.c1.x * xs.z * float(c[3]) + g.c1.y * xs.w;
  }
}

// acc[t][i]: C fragment order: (r0, 2 tid), (r0, 2 tid + 1), (r1, 2 tid), (r1, 2 tid + 1) of seq
// tile t.
template <TensorType T, int NT, int KW>
__device__ __forceinline__ void tile_dots(const uint8_t* w0, const uint8_t* w1, int64_t K, int kw, int lane,
                                          const XTiles& x, float (&acc)[NT][4]) {
  constexpr PackedLayout L = packed_layout(T);
  const int64_t nb = K / L.elems;
  constexpr int kG = MmaType<T>::kGroups;
  const int64_t steps = K / (32 * kG);
  const int tid = lane % 4;
  const uint8_t *aux0 = w0 + nb * L.quant_bytes, *aux1 = w1 + nb * L.quant_bytes;
  // Loads of several steps in flight for small batches; from 4 seq tiles the MMAs hide the
  // loads, and unrolled steps would spill.
#pragma unroll(NT <= 2 ? 2 : 1)
  for (int64_t s = kw; s < steps; s += KW) {
    MmaType<T>::step(w0, aux0, w1, aux1, s, tid, [&](int j, const Group& g) {
      const int64_t grp = s * kG + j;
#pragma unroll
      for (int t = 0; t < NT; ++t)
        group_mma<T>(g, x.codes[(t * x.groups + grp) * kWarpSize + lane], x.scales[(t * x.groups + grp) * 4 + tid],
                     acc[t]);
    });
  }
}

template <int NT, int KW>
__device__ __forceinline__ void tile_dots(TensorType t, const uint8_t* w0, const uint8_t* w1, int64_t K, int kw,
                                          int lane, const XTiles& x, float (&acc)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  switch (t) {  // uniform across the block: one tile, one part
    case TensorType::Q4_0: tile_dots<TensorType::Q4_0, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q4_1: tile_dots<TensorType::Q4_1, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q5_0: tile_dots<TensorType::Q5_0, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q8_0: tile_dots<TensorType::Q8_0, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q4_K: tile_dots<TensorType::Q4_K, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q5_K: tile_dots<TensorType::Q5_K, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    case TensorType::Q6_K: tile_dots<TensorType::Q6_K, NT, KW>(w0, w1, K, kw, lane, x, acc); break;
    default: break;
  }
}

struct MmaParts {  // block b < tile_end[0] takes a tile of part 0, then part 1, ...
  MatmulPart p[kMaxParts];
  int64_t tile_end[kMaxParts];
  int n;
  MatmulEpilogue epilogue;
  int64_t rows, K;  // activation rows of this pass (<= 8 NT)
};

// Block: MW row tiles x KW slices of K (W = MW * KW warps). Gated launches take the gate's and
// the up's tiles of the same rows. Blocks of 8 warps ask for two blocks an SM (at most 128
// registers a thread; ptxas spills 8 bytes at 8 seq tiles).
template <int NT, int MW, int W, bool Glu>
__global__ void __launch_bounds__(W * kWarpSize, W == kSplitWarps ? 2 : 0) matmul_mma_kernel(MmaParts P, XTiles x) {
  constexpr int KW = W / MW;
  constexpr int kSets = Glu ? 2 : 1;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int mw = warp % MW, kw = warp / MW;
  MatmulPart part = P.p[0];
  int64_t first = 0;
#pragma unroll
  for (int i = 1; i < kMaxParts; ++i)
    if (i < P.n && int64_t(blockIdx.x) >= P.tile_end[i - 1]) part = P.p[i], first = P.tile_end[i - 1];
  const int64_t n0 = (int64_t(blockIdx.x) - first) * (MW * kTile) + mw * kTile;
  const int gid = lane / 4, tid = lane % 4;
  // Rows past N read row N - 1 (a valid address) and are not stored.
  const int64_t r0 = n0 + gid, r1 = n0 + gid + 8;
  const int64_t q0 = r0 < part.N ? r0 : part.N - 1, q1 = r1 < part.N ? r1 : part.N - 1;
  if (kw == 0 && n0 < part.N) {
    for (int i = 0; i < kTile && n0 + i < part.N; ++i) {
      prefetch_l2(part.w + size_t(n0 + i) * part.row_bytes, part.row_bytes, lane);
      if (Glu) prefetch_l2(P.p[1].w + size_t(n0 + i) * P.p[1].row_bytes, P.p[1].row_bytes, lane);
    }
  }
  allow_next_kernel();
  wait_previous_kernel();
  float acc[kSets][NT][4];
  if (n0 < part.N) {
    tile_dots<NT, KW>(part.type, part.w + size_t(q0) * part.row_bytes, part.w + size_t(q1) * part.row_bytes, P.K, kw,
                      lane, x, acc[0]);
    if constexpr (Glu)
      tile_dots<NT, KW>(P.p[1].type, P.p[1].w + size_t(q0) * P.p[1].row_bytes, P.p[1].w + size_t(q1) * P.p[1].row_bytes,
                        P.K, kw, lane, x, acc[kSets - 1]);
  }
  if constexpr (KW > 1) {
    // Slices 1.. hand their sums to slice 0 through shared memory, added in slice order.
    __shared__ float part_sums[KW - 1][MW][kSets * NT * 4][kWarpSize];
    if (kw > 0 && n0 < part.N)
#pragma unroll
      for (int s = 0; s < kSets; ++s)
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) part_sums[kw - 1][mw][(s * NT + t) * 4 + i][lane] = acc[s][t][i];
    __syncthreads();
    if (kw > 0) return;
    if (n0 < part.N)
      for (int k = 0; k < KW - 1; ++k)
#pragma unroll
        for (int s = 0; s < kSets; ++s)
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[s][t][i] += part_sums[k][mw][(s * NT + t) * 4 + i][lane];
  }
  if (n0 >= part.N) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t n = i < 2 ? r0 : r1, r = int64_t(t) * kSeqTile + 2 * tid + (i & 1);
      if (n >= part.N || r >= P.rows) continue;
      float v = acc[0][t][i];
      if constexpr (Glu) v = (P.epilogue == MatmulEpilogue::swiglu ? silu(v) : gelu_tanh(v)) * acc[kSets - 1][t][i];
      if (part.residual) v += part.residual[r * part.ld_residual + n];
      part.y[r * part.ldy + n] = v;
    }
}

template <int NT, int MW, int W>
void launch_tiles(MmaParts P, const XTiles& x, cudaStream_t s) {
  // Tiles per part at this block shape.
  int64_t end = 0;
  for (int i = 0; i < P.n; ++i) {
    if (P.epilogue == MatmulEpilogue::store || i == 0) end += (P.p[i].N + MW * kTile - 1) / (MW * kTile);
    P.tile_end[i] = end;
  }
  const dim3 grid{unsigned(end)}, block{unsigned(W * kWarpSize)};
  if constexpr (W == kSplitWarps) launch(matmul_mma_kernel<NT, MW, W, false>, grid, block, s, P, x);
  else if (P.epilogue == MatmulEpilogue::store) launch(matmul_mma_kernel<NT, MW, W, false>, grid, block, s, P, x);
  else launch(matmul_mma_kernel<NT, MW, W, true>, grid, block, s, P, x);
}

template <int NT>
void launch_shape(const MmaParts& P, const XTiles& x, int split_warps, cudaStream_t s) {
  // Four row tiles a block share the activations through L1, but leave few blocks for narrow
  // weights: below ~2 blocks per SM of the H100/H200 (132), or for one seq tile (the weights,
  // not the activations, are then what the loads wait on), K is split instead.
  int64_t wide_blocks = 0;
  for (int i = 0; i < P.n; ++i)
    if (P.epilogue == MatmulEpilogue::store || i == 0) wide_blocks += (P.p[i].N + 4 * kTile - 1) / (4 * kTile);
  // Split K of store launches may go over 8 warps (schedule key mma_wide_split): the 4096-row
  // projections of an 8B step at 64 rows gave 256 blocks of 4 warps, 7.75 warps an SM (ncu,
  // run H: 11% occupancy, latency-bound). Gated launches keep 4 (their slices' sums would need
  // 56 KB of shared memory at 8 tiles).
  if (NT >= 4 && wide_blocks >= 264) launch_tiles<NT, 4, kWarps>(P, x, s);
  else if (P.epilogue == MatmulEpilogue::store && split_warps == kSplitWarps) launch_tiles<NT, 1, kSplitWarps>(P, x, s);
  else launch_tiles<NT, 1, kWarps>(P, x, s);
}

// ---- The tiled f16 kernel (MmaPath::tiled): shared-memory stages, K split over blocks ----
//
// matmul_mma_kernel spends ~30 instructions on each int8 MMA: the int32 sums of every 32-element
// group are scaled and added in f32 one by one (4 sums a lane an MMA), which kept its 64-row
// launches at 10-13% of the copy rate (kernel bench, run 17). Here the weights become f16 in
// registers (a code times its group's scale plus its offset, rounded once) and meet the
// activations, d * code rounded to f16, on f16 tensor cores that sum in f32 themselves: ~7
// instructions an MMA, each group's conversion shared by the 8 seq tiles.
//
// A block of 16 warps takes 128 weight rows (a gated launch: 64 gate rows and the 64 up rows of
// the same outputs) and walks K in chunks of 256 elements: each chunk's activations (all the
// pass's rows) and the 128 rows' weight bytes are copied into shared memory by cp.async,
// kStages - 1 chunks ahead of the one being multiplied. Warp w takes row tile w % 8 and half
// of each chunk's steps (w / 8); the two halves' sums are added at the end, the first's plus the
// second's. Where the row tiles alone leave SMs idle (narrow weights: the o and down
// projections, which MmaTiles::where_faster leaves on the int8 kernel, tiled_pays), K is split
// over blocks as well: each block stores its sums in the scratch and the last block of a row
// tile to finish (a ticket) adds the slices in slice order. The same bits every run.
constexpr int kTiledWarps = 16;
constexpr int kTiledRows = 128;          // weight rows a block: 8 row tiles
constexpr int kChunkGroups = 8;          // 32-element groups a stage
constexpr int kStages = 3;
constexpr int kTileLd = kTiledRows + 4;  // floats a row of the epilogue's tile
constexpr int kMaxStride = 288;          // the widest staged row chunk (Q6_K, Q8_0), below

template <int NT>
constexpr int tiled_act_bytes() {  // a stage's activations: f16 fragments [NT][8][32] uint4
  return NT * kChunkGroups * kWarpSize * 16;
}

// A row's staged bytes in the packed layout, per weight type: a chunk is bpc blocks; the quant
// bytes of chunk c are [c bpc qb, + bpc qb) (fewer in a last, part-filled chunk), the other
// bytes of the repacked types start at aux + c bpc ab and are copied as the 16-byte-aligned
// window around them (Q6_K's 18-byte runs are not 16-aligned; a row is padded to 16 bytes, so
// the window stays inside it). 32-bit offsets: a row is far below 2 GiB.
struct RowLayout {
  int bpc, qb, ab, nb, aux;  // blocks a chunk, quant and other bytes a block, blocks a row, aux start
  bool repacked;
};
struct ChunkSpan {
  int qoff, nq, alo, nwin, skew;
};
__host__ __device__ inline RowLayout row_layout(TensorType t, int64_t K) {
  const PackedLayout L = packed_layout(t);
  const int nb = int(K / L.elems);
  return {kChunkGroups * 32 / L.elems, L.quant_bytes, L.aux_bytes(), nb, nb * L.quant_bytes, L.repacked};
}
__device__ __forceinline__ ChunkSpan chunk_span(const RowLayout& L, int c) {
  const int b0 = c * L.bpc, n = min(L.bpc, L.nb - b0);
  ChunkSpan s{b0 * L.qb, n * L.qb, 0, 0, 0};
  if (L.repacked) {
    const int a0 = L.aux + b0 * L.ab;
    s.alo = a0 & ~15;
    s.nwin = ((a0 + n * L.ab + 15) & ~15) - s.alo;
    s.skew = a0 - s.alo;
  }
  return s;
}

// Bytes a staged row takes in shared memory: the widest chunk of the type, padded so that the
// 8-byte loads of a warp's quarter (four rows, lanes 8 bytes apart) fall on distinct banks (a
// stride of 32 or 96 bytes past a multiple of 128).
int staged_stride(TensorType t) {
  const PackedLayout L = packed_layout(t);
  const int per = kChunkGroups * 32 / L.elems, a = per * L.aux_bytes();
  const int aux = L.repacked ? (a % 16 ? (a + 30) / 16 * 16 : a) : 0;
  int s = (per * L.quant_bytes + aux + 31) / 32 * 32;
  while (s % 128 != 32 && s % 128 != 96) s += 32;
  return s;
}

struct TiledParts {
  MatmulPart p[kMaxParts];
  int64_t tile_end[kMaxParts];  // blocks (x) through part i; gated: part 0's only
  int n;
  MatmulEpilogue epilogue;
  int64_t rows, K;
  int stride;            // staged_stride, the widest of the launch's parts
  int chunks_per_slice;  // K slices: gridDim.y
  float* partials;       // slices > 1: [slice][block x][64][kTiledRows]
  int* counters;         // slices > 1: a ticket per block x, zero between launches
};

// P.p[i] without a runtime index into the parameters (which would copy them to local memory).
__device__ __forceinline__ MatmulPart pick(const TiledParts& P, int i) {
  MatmulPart m = P.p[0];
#pragma unroll
  for (int k = 1; k < kMaxParts; ++k)
    if (k == i) m = P.p[k];
  return m;
}

// Four code bytes of v (signed when S) as f16, times a plus b: (byte 0, byte 1) into lo, (2, 3)
// into hi. A byte under 0x6400 is the half 1024 + byte (exact; signed bytes are offset by 128
// first), less 1024 (or 1152) exactly, then one rounding in the multiply-add.
template <bool S>
__device__ __forceinline__ void codes_to_half2(uint32_t v, __half2 a, __half2 b, uint32_t& lo, uint32_t& hi) {
  if constexpr (S) v ^= 0x80808080u;
  const __half2 bias = __float2half2_rn(S ? 1152.f : 1024.f);
  uint32_t l = __byte_perm(v, 0x64646464u, 0x4140), h = __byte_perm(v, 0x64646464u, 0x4342);
  const __half2 x = __hfma2(__hsub2(*reinterpret_cast<__half2*>(&l), bias), a, b);
  const __half2 y = __hfma2(__hsub2(*reinterpret_cast<__half2*>(&h), bias), a, b);
  lo = *reinterpret_cast<const uint32_t*>(&x);
  hi = *reinterpret_cast<const uint32_t*>(&y);
}

// Steps [s0, s1) of a staged chunk for the warp's two rows (w0, w1: their staged bytes). The
// lane's 8 elements of a group are the MMA's k slots 2 tid, 2 tid + 1, 2 tid + 8, 2 tid + 9 of
// two k16 steps (elements 8 tid .. + 3, then 8 tid + 4 .. + 7), the same permutation for
// weights and activations; C fragment order as group_mma's.
template <TensorType T, int NT>
__device__ __forceinline__ void chunk_dots_f16(const uint8_t* w0, const uint8_t* w1, const ChunkSpan& sp, int s0,
                                               int s1, int lane, const uint4* xh, float (&acc)[NT][4]) {
  constexpr int kG = MmaType<T>::kGroups;
  constexpr bool kSigned = T == TensorType::Q6_K || T == TensorType::Q8_0;
  const int tid = lane % 4;
  const uint8_t *a0 = w0 + sp.nq + sp.skew, *a1 = w1 + sp.nq + sp.skew;
  for (int s = s0; s < s1; ++s)
    MmaType<T>::step(w0, a0, w1, a1, s, tid, [&](int j, const Group& g) {
      const int grp = s * kG + j;
      float2 r0 = g.c0, r1 = g.c1;
      if constexpr (T == TensorType::Q6_K)
        if (g.half != 0) r0 = g.c0h, r1 = g.c1h;
      const __half2 sa0 = __float2half2_rn(r0.x), sb0 = __float2half2_rn(r0.y);
      const __half2 sa1 = __float2half2_rn(r1.x), sb1 = __float2half2_rn(r1.y);
      uint32_t f[8];
      codes_to_half2<kSigned>(g.w0.x, sa0, sb0, f[0], f[2]);
      codes_to_half2<kSigned>(g.w1.x, sa1, sb1, f[1], f[3]);
      codes_to_half2<kSigned>(g.w0.y, sa0, sb0, f[4], f[6]);
      codes_to_half2<kSigned>(g.w1.y, sa1, sb1, f[5], f[7]);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const uint4 b = xh[(t * kChunkGroups + grp) * kWarpSize + lane];
        mma_f16(acc[t], f[0], f[1], f[2], f[3], b.x, b.y);
        mma_f16(acc[t], f[4], f[5], f[6], f[7], b.z, b.w);
      }
    });
}

template <int NT, bool Glu>
__global__ void __launch_bounds__(kTiledWarps * kWarpSize, 1) matmul_mma_tiled_kernel(TiledParts P, XTiles x) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kAct = tiled_act_bytes<NT>(), kHalf = kTiledRows / 2, kThreads = kTiledWarps * kWarpSize;
  const int stage_bytes = kAct + kTiledRows * P.stride;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  int pi = 0;
#pragma unroll
  for (int i = 1; i < kMaxParts; ++i)
    if (!Glu && i < P.n && int64_t(blockIdx.x) >= P.tile_end[i - 1]) pi = i;
  const int64_t n0 = (int64_t(blockIdx.x) - (pi ? P.tile_end[pi - 1] : 0)) * (Glu ? kHalf : kTiledRows);
  const int64_t N = P.p[pi].N;
  const int G = int(P.K / 32), chunks = (G + kChunkGroups - 1) / kChunkGroups;
  const int c0 = int(blockIdx.y) * P.chunks_per_slice, nc = min(chunks - c0, P.chunks_per_slice);

  // Staging: four threads a row (consecutive 16-byte pieces); rows past N stage row N - 1 (a
  // valid address) and are never stored. Activations: a group's fragments are 32 pieces.
  const int srow = threadIdx.x / 4, spiece = threadIdx.x % 4;
  const MatmulPart sp = pick(P, Glu ? srow / kHalf : pi);
  const RowLayout SL = row_layout(sp.type, P.K);
  const int64_t sn = n0 + (Glu ? srow % kHalf : srow);
  const uint8_t* sw = sp.w + size_t(sn < N ? sn : N - 1) * sp.row_bytes;
  auto stage_weights = [&](int c, int slot) {
    const ChunkSpan s = chunk_span(SL, c);
    uint8_t* dst = smem + slot * stage_bytes + kAct + srow * P.stride;
    for (int i = spiece; 16 * i < s.nq + s.nwin; i += 4)
      __pipeline_memcpy_async(dst + 16 * i, sw + (16 * i < s.nq ? s.qoff + 16 * i : s.alo + 16 * i - s.nq), 16);
  };
  auto stage_acts = [&](int c, int slot) {
    const int g0 = c * kChunkGroups, pieces = min(G - g0, kChunkGroups) * kWarpSize;
    uint8_t* dst = smem + slot * stage_bytes;
#pragma unroll
    for (int t = 0; t < NT; ++t)
      for (int j = threadIdx.x; j < pieces; j += kThreads)
        __pipeline_memcpy_async(dst + t * kChunkGroups * 512 + 16 * j,
                                x.halves + (int64_t(t) * G + g0) * kWarpSize + j, 16);
  };

  // The first stages' weights before the previous kernel ends (weights only), then their activations.
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < nc) stage_weights(c0 + i, i);
    __pipeline_commit();
  }
  allow_next_kernel();
  wait_previous_kernel();
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < nc) stage_acts(c0 + i, i);
    __pipeline_commit();
  }

  const int mw = warp % 8, kw = warp / 8;  // row tile; which half of a chunk's steps
  const MatmulPart wp = pick(P, Glu ? mw / 4 : pi);
  const RowLayout WL = row_layout(wp.type, P.K);
  const int steps_per_group = wp.type == TensorType::Q4_K || wp.type == TensorType::Q5_K ? 2 : 1;
  const int wrow = mw * kTile + lane / 4;  // the lane's first staged row; the second is 8 on
  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  for (int i = 0; i < nc; ++i) {
    __pipeline_wait_prior(kStages - 2);
    __syncthreads();  // chunk i is in; every warp is done with chunk i - 1's slot
    if (i + kStages - 1 < nc) {
      stage_weights(c0 + i + kStages - 1, (i + kStages - 1) % kStages);
      stage_acts(c0 + i + kStages - 1, (i + kStages - 1) % kStages);
    }
    __pipeline_commit();
    const uint8_t* st = smem + (i % kStages) * stage_bytes;
    const uint4* xh = reinterpret_cast<const uint4*>(st);
    const uint8_t* w0 = st + kAct + wrow * P.stride;
    const uint8_t* w1 = w0 + 8 * P.stride;
    const ChunkSpan s = chunk_span(WL, c0 + i);
    const int steps = min(G - (c0 + i) * kChunkGroups, kChunkGroups) / steps_per_group, half = (steps + 1) / 2;
    const int s0 = kw ? half : 0, s1 = kw ? steps : half;
    switch (wp.type) {  // uniform across the warp
      case TensorType::Q4_0: chunk_dots_f16<TensorType::Q4_0, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q4_1: chunk_dots_f16<TensorType::Q4_1, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q5_0: chunk_dots_f16<TensorType::Q5_0, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q8_0: chunk_dots_f16<TensorType::Q8_0, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q4_K: chunk_dots_f16<TensorType::Q4_K, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q5_K: chunk_dots_f16<TensorType::Q5_K, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      case TensorType::Q6_K: chunk_dots_f16<TensorType::Q6_K, NT>(w0, w1, s, s0, s1, lane, xh, acc); break;
      default: break;
    }
  }
  __pipeline_wait_prior(0);
  __syncthreads();

  // The block's sums as a [rows][128] tile in shared memory (over the stages): the second half's
  // warps write theirs, the first half's add their own in front.
  constexpr int R = NT * kSeqTile;
  float* tile = reinterpret_cast<float*>(smem);
  const int gid = lane / 4, tid = lane % 4;
  auto at = [&](int t, int i) -> float& {
    return tile[(t * kSeqTile + 2 * tid + (i & 1)) * kTileLd + mw * kTile + gid + 8 * (i >> 1)];
  };
  if (kw == 1)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) at(t, i) = acc[t][i];
  __syncthreads();
  if (kw == 0)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) at(t, i) = acc[t][i] + at(t, i);
  __syncthreads();
  if (gridDim.y > 1) {
    constexpr int kSlot = kMaxSeqTiles * kSeqTile * kTiledRows;
    float* mine = P.partials + (size_t(blockIdx.y) * gridDim.x + blockIdx.x) * kSlot;
    for (int i = threadIdx.x; i < R * kTiledRows; i += kThreads)
      mine[i] = tile[(i / kTiledRows) * kTileLd + i % kTiledRows];
    __threadfence();
    __syncthreads();
    __shared__ int last;
    if (threadIdx.x == 0) last = atomicAdd(&P.counters[blockIdx.x], 1) == int(gridDim.y) - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < R * kTiledRows; i += kThreads) {
      float v = __ldcg(P.partials + size_t(blockIdx.x) * kSlot + i);
      for (unsigned k = 1; k < gridDim.y; ++k)
        v += __ldcg(P.partials + (size_t(k) * gridDim.x + blockIdx.x) * kSlot + i);
      tile[(i / kTiledRows) * kTileLd + i % kTiledRows] = v;
    }
    if (threadIdx.x == 0) P.counters[blockIdx.x] = 0;
    __syncthreads();
  }
  const MatmulPart op = pick(P, pi);
  constexpr int kCols = Glu ? kHalf : kTiledRows;
  for (int i = threadIdx.x; i < R * kCols; i += kThreads) {
    const int r = i / kCols, c = i % kCols;
    const int64_t n = n0 + c;
    if (r >= P.rows || n >= N) continue;
    float v = tile[r * kTileLd + c];
    if constexpr (Glu)
      v = (P.epilogue == MatmulEpilogue::swiglu ? silu(v) : gelu_tanh(v)) * tile[r * kTileLd + kHalf + c];
    if (op.residual) v += op.residual[r * op.ld_residual + n];
    op.y[r * op.ldy + n] = v;
  }
}

int device_sms() {
  static const int sms = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 1;
    return std::max(n, 1);
  }();
  return sms;
}
// Slices x row tiles of a split launch are at most this many slots of partial sums (a split is
// asked for only below one block an SM per resident block, so 2 per SM bounds it).
int64_t partial_slots() { return 2 * int64_t(device_sms()); }

int shared_optin() {
  static const int bytes = [] {
    int device = 0, b = 0;
    LOOM_CUDA_CHECK(cudaGetDevice(&device));
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return b;
  }();
  return bytes;
}

// Whether a launch takes the tiled kernel. Measured (run 17, H100, kernel bench, µs against the
// int8 kernel): it wins at more than 32 rows where its row tiles fill half the SMs or more (64
// rows: gate/up 14336 x 4096 122 against 202, the 8B output head 508 against 768); on narrow
// weights, which it splits over K (4096 x 4096 at 64 rows 34 against 28), and at 8-32 rows it is
// no faster. And its stages must fit the device's shared memory (sm_80 holds 163 KiB, short of
// the 204 KiB of Q6_K or Q8_0 rows at 64 rows; Hopper 227).
bool tiled_pays(const MatmulPart* parts, int n, MatmulEpilogue e, int64_t rows, MmaTiles policy) {
  int stride = 0;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    stride = std::max(stride, staged_stride(parts[i].type));
    if (e == MatmulEpilogue::store) blocks += (parts[i].N + kTiledRows - 1) / kTiledRows;
  }
  if (e != MatmulEpilogue::store) blocks = (parts[0].N + kTiledRows / 2 - 1) / (kTiledRows / 2);
  const bool faster = policy == MmaTiles::always || (rows > 4 * kSeqTile && 2 * blocks >= device_sms());
  return policy != MmaTiles::off && faster &&
         kStages * (tiled_act_bytes<kMaxSeqTiles>() + kTiledRows * stride) <= shared_optin();
}

template <int NT, bool Glu>
void launch_tiled(TiledParts P, const XTiles& x, float* partials, int* counters, cudaStream_t s) {
  auto kernel = matmul_mma_tiled_kernel<NT, Glu>;
  static const int optin = [&] {
    const int most = std::min(shared_optin(), kStages * (tiled_act_bytes<NT>() + kTiledRows * kMaxStride));
    LOOM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
    return most;
  }();
  constexpr int kBlockRows = Glu ? kTiledRows / 2 : kTiledRows;  // outputs a block
  int64_t end = 0;
  P.stride = 0;
  for (int i = 0; i < P.n; ++i) {
    if (!Glu || i == 0) end += (P.p[i].N + kBlockRows - 1) / kBlockRows;
    P.tile_end[i] = end;
    P.stride = std::max(P.stride, staged_stride(P.p[i].type));
  }
  const size_t smem = size_t(kStages) * (tiled_act_bytes<NT>() + kTiledRows * P.stride);
  if (smem > size_t(optin)) cuda_invalid("matmul_mma: the tiled kernel's stages do not fit the device's shared memory");
  int per_sm = 1;
  LOOM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTiledWarps * kWarpSize, smem));
  const int64_t target = int64_t(device_sms()) * std::max(per_sm, 1);
  const int64_t chunks = (P.K / 32 + kChunkGroups - 1) / kChunkGroups;
  int64_t slices = 1;
  if (end < target) slices = std::min({chunks, (target + end - 1) / end, partial_slots() / end});
  slices = std::max<int64_t>(slices, 1);
  P.chunks_per_slice = int((chunks + slices - 1) / slices);
  slices = (chunks + P.chunks_per_slice - 1) / P.chunks_per_slice;
  P.partials = partials;
  P.counters = counters;
  launch_smem(kernel, dim3(unsigned(end), unsigned(slices)), dim3(kTiledWarps * kWarpSize), smem, s, P, x);
}

// Seq tiles packed for `rows`: passes of 8 tiles, the last one's rounded up to the 1, 2, 4 or 8
// tiles its kernel reads (the padding rows are zero and never stored).
int64_t packed_tiles(int64_t rows) {
  const int64_t tiles = (rows + kSeqTile - 1) / kSeqTile, rem = tiles % kMaxSeqTiles;
  return tiles - rem + (rem == 0 ? 0 : rem <= 2 ? rem : rem <= 4 ? 4 : 8);
}

}  // namespace

bool has_mma_kernel(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q8_0:
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: return true;
    default: return false;
  }
}

// The scratch: the re-laid activations (int8 codes and scales, or f16 fragments: the larger),
// then the tiled kernel's tickets and its slots of partial sums (a fixed size per device:
// partial_slots()).
namespace {
size_t act_scratch_bytes(int64_t rows, int64_t K) {
  return (size_t(packed_tiles(rows) * (K / 32)) * kWarpSize * sizeof(uint4) + 255) / 256 * 256;
}
size_t ticket_bytes() { return (size_t(partial_slots()) * sizeof(int) + 255) / 256 * 256; }
}  // namespace

size_t mma_scratch_bytes(int64_t rows, int64_t K) {
  return act_scratch_bytes(rows, K) + ticket_bytes() +
         size_t(partial_slots()) * kMaxSeqTiles * kSeqTile * kTiledRows * sizeof(float);
}

bool mma_device() {
  static const int major = [] {
    int device = 0, m = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
      return 0;
    return m;
  }();
  return major >= 8;
}

void matmul_mma_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, const int8_t* q,
                      const float2* ds, int64_t rows, cudaStream_t s, const MmaPath& mma) {
  if (K % 32) cuda_invalid("matmul_mma: K must be a multiple of 32");
  if (mma.split_warps != kWarps && mma.split_warps != kSplitWarps) cuda_invalid("matmul_mma: split_warps must be 4 or 8");
  if (mma.bytes < mma_scratch_bytes(rows, K)) cuda_invalid("matmul_mma: the scratch is smaller than the activations");
  const int64_t tiles = (rows + kSeqTile - 1) / kSeqTile, padded = packed_tiles(rows), G = K / 32;
  int2* codes = static_cast<int2*>(mma.scratch);
  float4* scales = reinterpret_cast<float4*>(codes + padded * G * kWarpSize);
  uint4* halves = static_cast<uint4*>(mma.scratch);
  int* tickets = reinterpret_cast<int*>(static_cast<uint8_t*>(mma.scratch) + act_scratch_bytes(rows, K));
  float* partials = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(tickets) + ticket_bytes());
  const int64_t threads = padded * G * kWarpSize;
  const bool tiled = tiled_pays(parts, n_parts, e, rows, mma.tiled);  // else the int8 kernel
  const int n_tickets = tiled ? int(partial_slots()) : 0;
  if (tiled)
    launch(pack_x_f16_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), s, q, ds, rows, K, padded, halves,
           tickets, n_tickets);
  else
    launch(pack_x_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), s, q, ds, rows, K, padded, codes, scales,
           tickets, n_tickets);
  MmaParts P{};
  P.n = n_parts;
  P.epilogue = e;
  P.K = K;
  for (int i = 0; i < n_parts; ++i) P.p[i] = parts[i];
  for (int64_t t0 = 0; t0 < tiles; t0 += kMaxSeqTiles) {  // passes of at most 64 rows
    const int64_t nt = std::min<int64_t>(kMaxSeqTiles, tiles - t0);
    MmaParts Pr = P;
    Pr.rows = std::min<int64_t>(rows - t0 * kSeqTile, nt * kSeqTile);
    for (int i = 0; i < n_parts; ++i) {
      Pr.p[i].y += t0 * kSeqTile * Pr.p[i].ldy;
      if (Pr.p[i].residual) Pr.p[i].residual += t0 * kSeqTile * Pr.p[i].ld_residual;
    }
    const XTiles x{codes + t0 * G * kWarpSize, scales + t0 * G * 4, G, halves + t0 * G * kWarpSize};
    if (tiled) {
      TiledParts T{};
      std::copy(Pr.p, Pr.p + kMaxParts, T.p);
      T.n = n_parts, T.epilogue = e, T.rows = Pr.rows, T.K = K;
      const bool glu = e != MatmulEpilogue::store;
      auto go = [&](auto nt_c) {
        constexpr int NT = decltype(nt_c)::value;
        glu ? launch_tiled<NT, true>(T, x, partials, tickets, s) : launch_tiled<NT, false>(T, x, partials, tickets, s);
      };
      if (nt == 1) go(std::integral_constant<int, 1>{});
      else if (nt == 2) go(std::integral_constant<int, 2>{});
      else if (nt <= 4) go(std::integral_constant<int, 4>{});
      else go(std::integral_constant<int, 8>{});
      continue;
    }
    switch (nt) {
      case 1: launch_shape<1>(Pr, x, mma.split_warps, s); break;
      case 2: launch_shape<2>(Pr, x, mma.split_warps, s); break;
      case 3: case 4: launch_shape<4>(Pr, x, mma.split_warps, s); break;
      default: launch_shape<8>(Pr, x, mma.split_warps, s); break;
    }
  }
}

}  // namespace loom::backend::cuda
