// The tiled f16 tensor-core matmul for batches (MmaPath::tiled, the mma_tiles key).
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
// projections; MmaTiles::where_faster takes only those of long rows, tiled_pays), K is split
// over blocks as well: each block stores its sums in the scratch and the last block of a row
// tile to finish (a ticket) adds the slices in slice order. The same bits every run.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mma.cuh"
#include "backend/cuda/tiled_split.h"

namespace loom::backend::cuda {

using namespace mma_detail;

namespace {

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
  // Word j of lane l's piece (MMA j / 2's k slots 2 (l % 4) .. + 1 (j even) or 2 (l % 4) + 8 .. + 1
  // (j odd), seq row l / 4) at word 32 j + l of the group's 512 bytes: core matrix j (8 seq rows
  // of 16 bytes, k-contiguous) is bytes 128 j .. + 127, the layout both ldmatrix and wgmma read.
  uint32_t* o = reinterpret_cast<uint32_t*>(halves + (i - lane));
#pragma unroll
  for (int j = 0; j < 4; ++j) o[32 * j + lane] = h[j];
}

constexpr int kTiledWarps = 16;
constexpr int kTiledRows = 128;          // weight rows a block: 8 row tiles
constexpr int kStages = 3;
constexpr int kTileLd = kTiledRows + 4;  // floats a row of the epilogue's tile

template <int NT>
constexpr int tiled_act_bytes() {  // a stage's activations: f16 fragments [NT][8][32] uint4
  return NT * kChunkGroups * kWarpSize * 16;
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

// Four code bytes of v as f16, less bias, times a plus b: (byte 0, byte 1) into lo, (2, 3) into
// hi. A byte under 0x6400 is the half 1024 + byte (exact); less the bias (1024 + the codes'
// offset: exact for codes under 2048) and one rounding in the multiply-add. Signed codes (S)
// are offset by 128 first.
template <bool S>
__device__ __forceinline__ void codes_to_half2(uint32_t v, __half2 bias, __half2 a, __half2 b, uint32_t& lo,
                                               uint32_t& hi) {
  if constexpr (S) v ^= 0x80808080u;
  uint32_t l = __byte_perm(v, 0x64646464u, 0x4140), h = __byte_perm(v, 0x64646464u, 0x4342);
  const __half2 x = __hfma2(__hsub2(*reinterpret_cast<__half2*>(&l), bias), a, b);
  const __half2 y = __hfma2(__hsub2(*reinterpret_cast<__half2*>(&h), bias), a, b);
  lo = *reinterpret_cast<const uint32_t*>(&x);
  hi = *reinterpret_cast<const uint32_t*>(&y);
}

// On sm_90a the MMAs of 4 and 8 seq tiles are wgmmas (run 23: the 64-row gate/up launch 104.3 ->
// 89.3 us); those of 1 and 2 tiles (n8, n16) stay on mma.sync, which was faster there (56.1
// against 61.4 us at 8 rows).
template <int NT>
constexpr bool kWgmmaTiles = LOOM_WGMMA && NT >= 4;

// The MMAs of one group for the warp's two rows: the lane's 8 codes of each (w0, w1; .x the
// first four) become f16 fragments, the coefficients (a, b) per row, and meet the NT seq tiles'
// activations of the group (xg: the group's staged 512 bytes of tile 0, four core matrices, j =
// 2 h + k-half for MMA h; a tile is kChunkGroups * 512 bytes on). With wgmma (kWgmmaTiles) the
// warpgroup's four warps (64 rows) take each MMA as one wgmma reading the activations from shared
// memory; otherwise each warp loads the fragments (ldmatrix: lane l's row address is 16 l, the
// words 14e's LDS.128 read) for mma.sync.
template <bool S, int NT>
__device__ __forceinline__ void group_mmas(uint2 w0, uint2 w1, __half2 bias, __half2 a0, __half2 b0, __half2 a1,
                                           __half2 b1, const uint8_t* xg, int lane, float (&acc)[NT][4]) {
  uint32_t f[2][4];
  codes_to_half2<S>(w0.x, bias, a0, b0, f[0][0], f[0][2]);
  codes_to_half2<S>(w1.x, bias, a1, b1, f[0][1], f[0][3]);
  codes_to_half2<S>(w0.y, bias, a0, b0, f[1][0], f[1][2]);
  codes_to_half2<S>(w1.y, bias, a1, b1, f[1][1], f[1][3]);
  if constexpr (kWgmmaTiles<NT>) {
    const unsigned x = shared_address(xg);
    wgmma_fence();
    wgmma_f16<NT>(acc, f[0], wgmma_desc(x, 128, kChunkGroups * 512));
    wgmma_f16<NT>(acc, f[1], wgmma_desc(x + 256, 128, kChunkGroups * 512));
    wgmma_commit();
    // Done before the next group converts into the same registers (waiting one group later,
    // so that the conversion overlaps the MMAs, spilled 104-136 bytes: two groups' fragments live).
    wgmma_wait<0>(acc);
  } else {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      uint32_t b[4];
      ldmatrix_x4<false>(b, xg + t * kChunkGroups * 512 + 16 * lane);
      mma_f16(acc[t], f[0], b[0], b[1]);
      mma_f16(acc[t], f[1], b[2], b[3]);
    }
  }
}

// Q4_K / Q5_K: a chunk is one 256-block ([d, dmin][12 scale bytes][Q5_K: qh 32][qs 128]), step
// c (0..3) its groups 2c (low nibbles of qs bytes [32c, + 32)) and 2c + 1 (high nibbles). The
// groups' coefficients come from the packed scale bytes four groups at a time (byte j of sc, m:
// group j's 6-bit scale and min, groups 0-3 or, up, 4-7) as f16 pairs (1024 + sc, 1024 + m),
// exact, times (d, -dmin) in one rounding: the bits of MmaType's f32 products (exact: 11 x 6
// bits) rounded to f16, without its per-group unpacking and branches.
__device__ __forceinline__ void k4_scale_bytes(const int4& h, bool up, uint32_t& sc, uint32_t& m) {
  const uint32_t y = uint32_t(h.y), z = uint32_t(h.z), w = uint32_t(h.w);
  sc = up ? (w & 0x0F0F0F0Fu) | ((y >> 2) & 0x30303030u) : y & 0x3F3F3F3Fu;
  m = up ? ((w >> 4) & 0x0F0F0F0Fu) | ((z >> 2) & 0x30303030u) : z & 0x3F3F3F3Fu;
}
// Groups 2 odd and 2 odd + 1 of the four in sc, m: their (d sc, -dmin m) pairs.
__device__ __forceinline__ void k4_coefs(uint32_t sc, uint32_t m, __half2 dm, int odd, __half2& p0, __half2& p1) {
  const uint32_t u = __byte_perm(sc, m, odd ? 0x7362 : 0x5140);  // [sc, m, sc', m']
  uint32_t x = __byte_perm(u, 0x64646464u, 0x4140), y = __byte_perm(u, 0x64646464u, 0x4342);
  const __half2 k = __float2half2_rn(1024.f);
  p0 = __hmul2(__hsub2(*reinterpret_cast<__half2*>(&x), k), dm);
  p1 = __hmul2(__hsub2(*reinterpret_cast<__half2*>(&y), k), dm);
}

// A K-quant's chunk is always whole (K is a multiple of 256): the warp's half kw of it is steps
// 2 kw and 2 kw + 1.
template <TensorType T, int NT>
__device__ __forceinline__ void kquant45_dots(const uint8_t* w0, const uint8_t* w1, int kw, int lane, const uint8_t* xs,
                                              float (&acc)[NT][4]) {
  constexpr bool kFive = T == TensorType::Q5_K;
  const int tid = lane % 4;
  const int4 head0 = *reinterpret_cast<const int4*>(w0), head1 = *reinterpret_cast<const int4*>(w1);
  uint32_t dm0 = uint32_t(head0.x) ^ 0x80000000u, dm1 = uint32_t(head1.x) ^ 0x80000000u;  // (d, -dmin)
  const __half2 k = __float2half2_rn(1024.f);
  uint2 h0 = make_uint2(0, 0), h1 = make_uint2(0, 0);
  if constexpr (kFive) h0 = u64(w0 + 16 + 8 * tid), h1 = u64(w1 + 16 + 8 * tid);
  uint32_t sc0, m0, sc1, m1;  // the scale and min bytes of the half's groups 4 kw .. 4 kw + 3
  k4_scale_bytes(head0, kw, sc0, m0);
  k4_scale_bytes(head1, kw, sc1, m1);
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) {
    const int c = 2 * kw + odd;
    __half2 p0[2], p1[2];
    k4_coefs(sc0, m0, *reinterpret_cast<__half2*>(&dm0), odd, p0[0], p0[1]);
    k4_coefs(sc1, m1, *reinterpret_cast<__half2*>(&dm1), odd, p1[0], p1[1]);
    const uint2 v0 = u64(w0 + (kFive ? 48 : 16) + 32 * c + 8 * tid), v1 = u64(w1 + (kFive ? 48 : 16) + 32 * c + 8 * tid);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint2 g0 = h ? make_uint2(hi4(v0.x), hi4(v0.y)) : make_uint2(lo4(v0.x), lo4(v0.y));
      uint2 g1 = h ? make_uint2(hi4(v1.x), hi4(v1.y)) : make_uint2(lo4(v1.x), lo4(v1.y));
      if constexpr (kFive) {
        const int sh = 2 * c + h;
        g0.x |= ((h0.x >> sh) & 0x01010101u) << 4, g0.y |= ((h0.y >> sh) & 0x01010101u) << 4;
        g1.x |= ((h1.x >> sh) & 0x01010101u) << 4, g1.y |= ((h1.y >> sh) & 0x01010101u) << 4;
      }
      group_mmas<false, NT>(g0, g1, k, __low2half2(p0[h]), __high2half2(p0[h]), __low2half2(p1[h]),
                            __high2half2(p1[h]), xs + (2 * c + h) * 512, lane, acc);
    }
  }
}

// Q6_K: a chunk is one 256-block (ql 128, qh 64; then its 16 int8 scales and d, from a), step gq
// (0..7) one group: element l of it is ql byte 64h + 32(k & 1) + l (low nibble for k < 2) with
// bits 2k, 2k + 1 of qh byte 32h + l (h = gq / 4, k = gq % 4). The lane's 8 elements lie in the
// group's half tid / 2, whose scale alone it takes; codes 0..63 less the bias 1056 are q - 32,
// exact. d sc as one f16 product (exact: 11 x 8 bits), the bits of MmaType's f32 product rounded.
// The warp's half kw of the (whole) chunk is h = kw, k = 0..3.
template <int NT>
__device__ __forceinline__ void q6k_dots(const uint8_t* w0, const uint8_t* a0, const uint8_t* w1, const uint8_t* a1,
                                         int kw, int lane, const uint8_t* xs, float (&acc)[NT][4]) {
  const int tid = lane % 4;
  const __half d0 = *reinterpret_cast<const __half*>(a0 + 16), d1 = *reinterpret_cast<const __half*>(a1 + 16);
  const __half2 bias = __float2half2_rn(1056.f), zero = __float2half2_rn(0.f);
  const int h = kw;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int ql_off = 64 * h + 32 * (k & 1) + 8 * tid, qh_off = 128 + 32 * h + 8 * tid;
    auto codes = [&](const uint8_t* qb) {
      const uint2 l = u64(qb + ql_off), hb = u64(qb + qh_off);
      return make_uint2((k < 2 ? lo4(l.x) : hi4(l.x)) | (((hb.x >> (2 * k)) & 0x03030303u) << 4),
                        (k < 2 ? lo4(l.y) : hi4(l.y)) | (((hb.y >> (2 * k)) & 0x03030303u) << 4));
    };
    const int si = 8 * h + 2 * k + tid / 2;
    const __half2 c0 = __half2half2(__hmul(d0, __short2half_rn(int8_t(a0[si])))),
                  c1 = __half2half2(__hmul(d1, __short2half_rn(int8_t(a1[si]))));
    group_mmas<false, NT>(codes(w0), codes(w1), bias, c0, zero, c1, zero, xs + (4 * h + k) * 512, lane, acc);
  }
}

// The warp's half kw of staged chunk c for its two rows (w0, w1: their staged bytes). The lane's 8
// elements of a group are the MMA's k slots 2 tid, 2 tid + 1, 2 tid + 8, 2 tid + 9 of two k16
// steps (elements 8 tid .. + 3, then 8 tid + 4 .. + 7), the same permutation for weights and
// activations; C fragment order as group_mma's. A K-quant's chunk is one whole block (K is a
// multiple of 256); a legacy type's last chunk may hold fewer than kChunkGroups groups, of which
// the first half (rounded up) is kw = 0's.
template <TensorType T, int NT>
__device__ __forceinline__ void chunk_dots_f16(const uint8_t* w0, const uint8_t* w1, const RowLayout& L, int c, int G,
                                               int kw, int lane, const uint8_t* xs, float (&acc)[NT][4]) {
  constexpr PackedLayout K = packed_layout(T);
  if constexpr (T == TensorType::Q4_K || T == TensorType::Q5_K) {
    kquant45_dots<T, NT>(w0, w1, kw, lane, xs, acc);
  } else if constexpr (T == TensorType::Q6_K) {
    const int skew = (L.aux + c * K.aux_bytes()) & 15;  // the block's other bytes in its 16-aligned window
    q6k_dots<NT>(w0, w0 + K.quant_bytes + skew, w1, w1 + K.quant_bytes + skew, kw, lane, xs, acc);
  } else {
    constexpr bool kSigned = T == TensorType::Q8_0;
    const __half2 bias = __float2half2_rn(kSigned ? 1152.f : 1024.f);
    const ChunkSpan sp = chunk_span(L, c);
    const uint8_t *a0 = w0 + sp.nq + sp.skew, *a1 = w1 + sp.nq + sp.skew;
    const int steps = min(G - c * kChunkGroups, kChunkGroups), half = (steps + 1) / 2;
    const int s0 = kw ? half : 0, s1 = kw ? steps : half;
    for (int s = s0; s < s1; ++s)
      MmaType<T>::step(w0, a0, w1, a1, s, lane % 4, [&](int, const Group& g) {
        group_mmas<kSigned, NT>(g.w0, g.w1, bias, __float2half2_rn(g.c0.x), __float2half2_rn(g.c0.y),
                                __float2half2_rn(g.c1.x), __float2half2_rn(g.c1.y), xs + s * 512, lane, acc);
      });
  }
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
  // A whole chunk's pieces (whole_chunk_source) as straight-line copies, the thread's spiece + 4 m
  // (at most kPieceSlots: kMaxStride / 64, rounded up), where a loop with a per-piece select
  // diverged across the row's four threads; a last, part-filled chunk by chunk_span.
  constexpr int kPieceSlots = (kMaxStride / 16 + 3) / 4;
  const int full_nq = SL.bpc * SL.qb;
  const unsigned sbase = shared_address(smem), swdst = sbase + kAct + srow * P.stride;
  auto stage_weights = [&](int c, int slot) {
    const unsigned dst = swdst + slot * stage_bytes;
    if (whole_chunk(SL, c)) {
      const WholeChunk h = whole_chunk_source(SL, c);
#pragma unroll
      for (int m = 0; m < kPieceSlots; ++m) {
        const int o = 16 * (spiece + 4 * m);
        if (o < h.bytes) cp_async16(dst + o, sw + (o + (o < full_nq ? h.qo : h.ao)));
      }
      return;
    }
    const ChunkSpan s = chunk_span(SL, c);
    for (int i = spiece; 16 * i < s.nq + s.nwin; i += 4)
      cp_async16(dst + 16 * i, sw + (16 * i < s.nq ? s.qoff + 16 * i : s.alo + 16 * i - s.nq));
  };
  // A full chunk's activations are NT x 256 pieces, piece p = thread + kThreads m (seq tile
  // p / 256, piece p % 256 of it) at 16 p in the stage: straight-line copies from addresses
  // fixed once, where a loop over tiles and pieces spent most of the chunk loop's instructions.
  constexpr int kActPieces = NT * kChunkGroups * kWarpSize, kActPer = (kActPieces + kThreads - 1) / kThreads;
  const uint4* act_src = x.halves + int64_t(threadIdx.x / (kChunkGroups * kWarpSize)) * G * kWarpSize +
                         threadIdx.x % (kChunkGroups * kWarpSize);
  const int64_t act_step = int64_t(kThreads / (kChunkGroups * kWarpSize)) * G * kWarpSize;  // m to m + 1
  auto stage_acts = [&](int c, int slot) {
    const int g0 = c * kChunkGroups, pieces = min(G - g0, kChunkGroups) * kWarpSize;
    const unsigned dst = sbase + slot * stage_bytes;
    if (pieces == kChunkGroups * kWarpSize) {
#pragma unroll
      for (int m = 0; m < kActPer; ++m)
        if (kActPieces % kThreads == 0 || int(threadIdx.x) + m * kThreads < kActPieces)
          cp_async16(dst + 16 * (threadIdx.x + m * kThreads), act_src + g0 * kWarpSize + m * act_step);
      return;
    }
#pragma unroll
    for (int t = 0; t < NT; ++t)  // a last, part-filled chunk
      for (int j = threadIdx.x; j < pieces; j += kThreads)
        cp_async16(dst + t * kChunkGroups * 512 + 16 * j, x.halves + (int64_t(t) * G + g0) * kWarpSize + j);
  };

  // The first stages' weights before the previous kernel ends (weights only), then their activations.
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < nc) stage_weights(c0 + i, i);
    cp_async_commit();
  }
  allow_next_kernel();
  wait_previous_kernel();
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < nc) stage_acts(c0 + i, i);
    cp_async_commit();
  }

  const int mw = warp % 8, kw = warp / 8;  // row tile; which half of a chunk's steps
  const MatmulPart wp = pick(P, Glu ? mw / 4 : pi);
  const RowLayout WL = row_layout(wp.type, P.K);
  const int wrow = mw * kTile + lane / 4;  // the lane's first staged row; the second is 8 on
  float acc[NT][4];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
  // The weight type as a dense index (the enum's values are sparse: a switch on them took two
  // indirect branches a chunk), and the ring's slots as counters (i % kStages took a multiply).
  constexpr TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0,
                                   TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
  int kind = 0;
#pragma unroll
  for (int k = 1; k < 7; ++k)
    if (wp.type == kTypes[k]) kind = k;
  const int wrow_off = kAct + wrow * P.stride;
  for (int i = 0, slot = 0, ahead = kStages - 1; i < nc; ++i) {
    cp_async_wait<kStages - 2>();
    if constexpr (kWgmmaTiles<NT>) fence_proxy_async();  // the copies visible to the wgmmas
    __syncthreads();  // chunk i is in; every warp is done with chunk i - 1's slot (ahead's)
    if (i + kStages - 1 < nc) {
      stage_weights(c0 + i + kStages - 1, ahead);
      stage_acts(c0 + i + kStages - 1, ahead);
    }
    cp_async_commit();
    const uint8_t* st = smem + slot * stage_bytes;
    slot = slot == kStages - 1 ? 0 : slot + 1;
    ahead = ahead == kStages - 1 ? 0 : ahead + 1;
    const uint8_t* xs = st;
    const uint8_t* w0 = st + wrow_off;
    const uint8_t* w1 = w0 + 8 * P.stride;
    const int c = c0 + i;
    switch (kind) {  // uniform across the warp
      case 0: chunk_dots_f16<TensorType::Q4_0, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      case 1: chunk_dots_f16<TensorType::Q4_1, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      case 2: chunk_dots_f16<TensorType::Q5_0, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      case 3: chunk_dots_f16<TensorType::Q8_0, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      case 4: chunk_dots_f16<TensorType::Q4_K, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      case 5: chunk_dots_f16<TensorType::Q5_K, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
      default: chunk_dots_f16<TensorType::Q6_K, NT>(w0, w1, WL, c, G, kw, lane, xs, acc); break;
    }
  }
  cp_async_wait<0>();
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
  // Blocks an SM, per staged row stride (a few values), asked once: this runs on every launch.
  static int per_sm[kMaxStride / 32 + 1] = {};
  int& blocks = per_sm[P.stride / 32];
  if (!blocks) {
    LOOM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kTiledWarps * kWarpSize, smem));
    blocks = std::max(blocks, 1);
  }
  const int64_t chunks = (P.K / 32 + kChunkGroups - 1) / kChunkGroups;
  int64_t slices = tiled_slices(end, chunks, int64_t(device_sms()) * blocks, partial_slots() / end);
  P.chunks_per_slice = int((chunks + slices - 1) / slices);
  slices = (chunks + P.chunks_per_slice - 1) / P.chunks_per_slice;
  P.partials = partials;
  P.counters = counters;
  launch_smem(kernel, dim3(unsigned(end), unsigned(slices)), dim3(kTiledWarps * kWarpSize), smem, s, P, x);
}

size_t ticket_bytes() { return (size_t(partial_slots()) * sizeof(int) + 255) / 256 * 256; }

}  // namespace

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
namespace mma_detail {

size_t tiled_scratch_bytes() {
  return ticket_bytes() + size_t(partial_slots()) * kMaxSeqTiles * kSeqTile * kTiledRows * sizeof(float);
}

// Whether a launch takes the tiled kernel: where it is the faster (tiled_faster, with the
// measurements) and its stages fit the device's shared memory (sm_80 holds 163 KiB, short of the
// 204 KiB of Q6_K or Q8_0 rows at 64 rows; Hopper 227).
bool tiled_pays(const MatmulPart* parts, int n, MatmulEpilogue e, int64_t K, MmaTiles policy) {
  int stride = 0;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    stride = std::max(stride, staged_stride(parts[i].type));
    if (e == MatmulEpilogue::store) blocks += (parts[i].N + kTiledRows - 1) / kTiledRows;
  }
  if (e != MatmulEpilogue::store) blocks = (parts[0].N + kTiledRows / 2 - 1) / (kTiledRows / 2);
  const bool faster = policy == MmaTiles::always || tiled_faster(blocks, K, device_sms());
  return policy != MmaTiles::off && faster &&
         kStages * (tiled_act_bytes<kMaxSeqTiles>() + kTiledRows * stride) <= shared_optin();
}

void pack_x_f16(const int8_t* q, const float2* ds, int64_t rows, int64_t K, int64_t tiles, uint4* halves,
                void* tiled_scratch, cudaStream_t s) {
  const int64_t threads = tiles * (K / 32) * kWarpSize;
  launch(pack_x_f16_kernel, dim3(unsigned((threads + 255) / 256)), dim3(256), s, q, ds, rows, K, tiles, halves,
         static_cast<int*>(tiled_scratch), int(partial_slots()));
}

void launch_tiled_pass(const MatmulPart* parts, int n, MatmulEpilogue e, int64_t rows, int64_t K, int64_t nt,
                       const XTiles& x, void* tiled_scratch, cudaStream_t s) {
  TiledParts T{};
  std::copy(parts, parts + n, T.p);
  T.n = n, T.epilogue = e, T.rows = rows, T.K = K;
  int* tickets = static_cast<int*>(tiled_scratch);
  float* partials = reinterpret_cast<float*>(static_cast<uint8_t*>(tiled_scratch) + ticket_bytes());
  const bool glu = e != MatmulEpilogue::store;
  auto go = [&](auto nt_c) {
    constexpr int NT = decltype(nt_c)::value;
    glu ? launch_tiled<NT, true>(T, x, partials, tickets, s) : launch_tiled<NT, false>(T, x, partials, tickets, s);
  };
  if (nt == 1) go(std::integral_constant<int, 1>{});
  else if (nt == 2) go(std::integral_constant<int, 2>{});
  else if (nt <= 4) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
}

}  // namespace mma_detail

}  // namespace loom::backend::cuda
