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
struct XTiles {
  const int2* __restrict__ codes;
  const float4* __restrict__ scales;
  int64_t groups;  // K / 32
};

__global__ void pack_x_kernel(const int8_t* __restrict__ q, const float2* __restrict__ ds, int64_t rows, int64_t K,
                              int64_t tiles, int2* __restrict__ codes, float4* __restrict__ scales) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t G = K / 32;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // (t, g, lane)
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

// Per type: groups per step (a step's loads serve them all) and the step itself.
template <TensorType T> struct MmaType;

template <TensorType T> struct Legacy {  // Q4_0, Q4_1, Q5_0, Q8_0: one 32-element block per group
  static constexpr int kGroups = 1;
  template <typename F>
  __device__ static void step(const uint8_t* w0, const uint8_t* w1, int64_t nb, int64_t s, int tid, F&& f) {
    constexpr PackedLayout L = packed_layout(T);
    Group g;
    const uint8_t* x0 = w0 + nb * L.quant_bytes + s * L.aux_bytes();
    const uint8_t* x1 = w1 + nb * L.quant_bytes + s * L.aux_bytes();
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
  __device__ static void step(const uint8_t* w0, const uint8_t* w1, int64_t, int64_t s, int tid, F&& f) {
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
  __device__ static void step(const uint8_t* w0, const uint8_t* w1, int64_t nb, int64_t s, int tid, F&& f) {
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
    const uint8_t *x0 = w0 + nb * 192 + blk * 18, *x1 = w1 + nb * 192 + blk * 18;
    const int si = 8 * h + 2 * k;
    const float d0 = half_at(x0 + 16), d1 = half_at(x1 + 16);
    g.c0 = make_float2(d0 * float(int8_t(x0[si])), 0.f), g.c0h = make_float2(d0 * float(int8_t(x0[si + 1])), 0.f);
    g.c1 = make_float2(d1 * float(int8_t(x1[si])), 0.f), g.c1h = make_float2(d1 * float(int8_t(x1[si + 1])), 0.f);
    f(0, g);
  }
};

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
  // Loads of several steps in flight for small batches; from 4 seq tiles the MMAs hide the
  // loads, and unrolled steps would spill.
#pragma unroll(NT <= 2 ? 2 : 1)
  for (int64_t s = kw; s < steps; s += KW) {
    MmaType<T>::step(w0, w1, nb, s, tid, [&](int j, const Group& g) {
      const int64_t grp = s * kG + j;
      const float2 c0 = g.c0, c1 = g.c1, c0h = g.c0h, c1h = g.c1h;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int2 b = x.codes[(t * x.groups + grp) * kWarpSize + lane];
        const float4 xs = x.scales[(t * x.groups + grp) * 4 + tid];
        int c[4] = {0, 0, 0, 0};
        if constexpr (T == TensorType::Q6_K) {
          int ch[4] = {0, 0, 0, 0};
          const bool first = g.half == 0;
          mma_k32(c, first ? g.w0.x : 0u, first ? g.w1.x : 0u, first ? g.w0.y : 0u, first ? g.w1.y : 0u, b.x, b.y);
          mma_k32(ch, first ? 0u : g.w0.x, first ? 0u : g.w1.x, first ? 0u : g.w0.y, first ? 0u : g.w1.y, b.x, b.y);
          acc[t][0] += xs.x * (c0.x * float(c[0]) + c0h.x * float(ch[0]));
          acc[t][1] += xs.z * (c0.x * float(c[1]) + c0h.x * float(ch[1]));
          acc[t][2] += xs.x * (c1.x * float(c[2]) + c1h.x * float(ch[2]));
          acc[t][3] += xs.z * (c1.x * float(c[3]) + c1h.x * float(ch[3]));
        } else {
          mma_k32(c, g.w0.x, g.w1.x, g.w0.y, g.w1.y, b.x, b.y);
          acc[t][0] += c0.x * xs.x * float(c[0]) + c0.y * xs.y;
          acc[t][1] += c0.x * xs.z * float(c[1]) + c0.y * xs.w;
          acc[t][2] += c1.x * xs.x * float(c[2]) + c1.y * xs.y;
          acc[t][3] += c1.x * xs.z * float(c[3]) + c1.y * xs.w;
        }
      }
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

size_t mma_scratch_bytes(int64_t rows, int64_t K) {
  return size_t(packed_tiles(rows) * (K / 32)) * (kWarpSize * sizeof(int2) + 4 * sizeof(float4));
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
  const int64_t threads = padded * G * kWarpSize;
  launch(pack_x_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), s, q, ds, rows, K, padded, codes, scales);
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
    const XTiles x{codes + t0 * G * kWarpSize, scales + t0 * G * 4, G};
    switch (nt) {
      case 1: launch_shape<1>(Pr, x, mma.split_warps, s); break;
      case 2: launch_shape<2>(Pr, x, mma.split_warps, s); break;
      case 3: case 4: launch_shape<4>(Pr, x, mma.split_warps, s); break;
      default: launch_shape<8>(Pr, x, mma.split_warps, s); break;
    }
  }
}

}  // namespace loom::backend::cuda
