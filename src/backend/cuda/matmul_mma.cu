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
// port without it keeps the warp-per-row kernel. With MmaPath::tiled, the launches it pays on
// run the tiled f16 kernel instead (matmul_mma_tiled.cu); the shared pieces: matmul_mma.cuh.
#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mma.cuh"

namespace loom::backend::cuda {

using namespace mma_detail;

namespace {

constexpr int kWarps = 4;      // warps a block, but for the split-K blocks of store launches when
constexpr int kSplitWarps = 8;  // MmaPath::split_warps asks for 8

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

// The scratch: the re-laid activations (int8 codes and scales, or for the tiled kernel f16
// fragments), then the tiled kernel's own (mma_detail::tiled_scratch_bytes).
namespace {
size_t act_scratch_bytes(int64_t rows, int64_t K, bool tiled) {
  const size_t per = tiled ? kWarpSize * sizeof(uint4) : kWarpSize * sizeof(int2) + 4 * sizeof(float4);
  return (size_t(packed_tiles(rows) * (K / 32)) * per + 255) / 256 * 256;
}
}  // namespace

size_t mma_scratch_bytes(int64_t rows, int64_t K, bool tiled) {
  return act_scratch_bytes(rows, K, tiled) + (tiled ? tiled_scratch_bytes() : 0);
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
  const bool want_tiles = mma.tiled != MmaTiles::off;
  if (mma.bytes < mma_scratch_bytes(rows, K, want_tiles))
    cuda_invalid("matmul_mma: the scratch is smaller than the activations");
  const int64_t tiles = (rows + kSeqTile - 1) / kSeqTile, padded = packed_tiles(rows), G = K / 32;
  int2* codes = static_cast<int2*>(mma.scratch);
  float4* scales = reinterpret_cast<float4*>(codes + padded * G * kWarpSize);
  uint4* halves = static_cast<uint4*>(mma.scratch);
  void* tiled_scratch = static_cast<uint8_t*>(mma.scratch) + act_scratch_bytes(rows, K, want_tiles);
  const bool tiled = tiled_pays(parts, n_parts, e, K, mma.tiled);  // else the int8 kernel
  if (tiled) {
    pack_x_f16(q, ds, rows, K, padded, halves, tiled_scratch, s);
  } else {
    const int64_t threads = padded * G * kWarpSize;
    launch(pack_x_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), s, q, ds, rows, K, padded, codes, scales);
  }
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
      launch_tiled_pass(Pr.p, n_parts, e, Pr.rows, K, nt, x, tiled_scratch, s);
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
