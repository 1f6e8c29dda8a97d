// Integer-dot matrix-vector products for decode and small batches (as llama.cpp's mmvq): the
// activations are quantized once per step to q8_1 (32 int8 codes, a float scale d and the
// float sum d * sum(codes) per 32 elements), and each weight "unit" (a 16- or 32-byte run of
// quants with its scales) is dotted with them by 4-way int8 dot products, so a weight byte
// costs ~1 integer instruction per activation row instead of a dequantize-and-FMA per element.
// A warp takes an even, contiguous range of a weight's rows (by default the launch has as many
// warps as the device holds at once, so no launch has a partial last wave), and streams it:
// lane l takes units l, l + 32, ... of each row, every quant read is a 16-byte load from the
// packed layout (packed_layout.h), and the loads run a few units ahead of the dot products
// across row boundaries (stream_rows). A row's partial sums meet in a warp reduction; rows >
// kMaxRows run in passes that re-read the weights (batches of at least an MmaPath's min_rows go
// to the tensor-core kernel instead, matmul_mma.cu). One call may cover several weights that
// read the same activations (q, k and v; gate and up) and end in an epilogue: a residual added
// to the result, or the gate's activation times up. Kernels are instantiated per weight type
// (each type's registers set its own occupancy): weights of one type share a launch, and a
// call with several types launches once per type, back to back.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxRows = 8;

struct XRows {  // the q8_1 activations: row r codes at q + r * K, scales at ds + r * K / 32
  const int8_t* __restrict__ q;
  const float2* __restrict__ ds;
  int64_t K;
  __device__ int4 codes16(int r, int64_t e) const { return *reinterpret_cast<const int4*>(q + r * K + e); }
  __device__ float2 scale(int r, int64_t e) const { return ds[r * (K / 32) + e / 32]; }
};

__device__ __forceinline__ int lo4(int v) { return v & 0x0F0F0F0F; }
__device__ __forceinline__ int hi4(int v) { return (v >> 4) & 0x0F0F0F0F; }
__device__ __forceinline__ float half_u16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t u16_aligned(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ int4 load16(const uint8_t* p) { return *reinterpret_cast<const int4*>(p); }
__device__ __forceinline__ int dot16(const int (&w)[4], int4 x, int acc = 0) {
  return dot4(w[3], x.w, dot4(w[2], x.z, dot4(w[1], x.y, dot4(w[0], x.x, acc))));
}

template <TensorType T> struct Unit;

// Each unit type has Raw, the bytes of one unit a lane loads (its quants and their scales), load
// (the loads alone, issued steps before their use) and dot (the arithmetic on loaded bytes).

// Q4_0 / Q4_1: one unit per block; quant byte j holds element j (low nibble) and j + 16 (high).
template <TensorType T> struct Legacy4 {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q; uint16_t d, m; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    constexpr PackedLayout L = packed_layout(T);
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * L.aux_bytes();
    return {load16(row + size_t(u) * 16), u16_aligned(aux), T == TensorType::Q4_1 ? u16_aligned(aux + 2) : uint16_t(0)};
  }
  template <int R>
  __device__ static void dot(const Raw& w, int u, const XRows& x, float (&acc)[R]) {
    const int qa[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) lo[i] = lo4(qa[i]), hi[i] = hi4(qa[i]);
    const float d = half_u16(w.d);
    const float m = T == TensorType::Q4_1 ? half_u16(w.m) : 0.f;
    const int64_t e = int64_t(u) * 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s = dot16(hi, x.codes16(r, e + 16), dot16(lo, x.codes16(r, e)));
      const float2 xs = x.scale(r, e);
      acc[r] += T == TensorType::Q4_0 ? d * (xs.x * float(s) - 8.f * xs.y) : d * xs.x * float(s) + m * xs.y;
    }
  }
};
template <> struct Unit<TensorType::Q4_0> : Legacy4<TensorType::Q4_0> {};
template <> struct Unit<TensorType::Q4_1> : Legacy4<TensorType::Q4_1> {};

// Q5_0: as Q4_0 plus a fifth bit per element from the block's 32-bit qh (aux: d, qh).
template <> struct Unit<TensorType::Q5_0> {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q; uint16_t d, h0, h1; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * 6;
    return {load16(row + size_t(u) * 16), u16_aligned(aux), u16_aligned(aux + 2), u16_aligned(aux + 4)};
  }
  template <int R>
  __device__ static void dot(const Raw& w, int u, const XRows& x, float (&acc)[R]) {
    const int qa[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    const float d = half_u16(w.d);
    const uint32_t qh = uint32_t(w.h0) | (uint32_t(w.h1) << 16);
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t bl = qh >> (4 * i), bh = qh >> (4 * i + 16);  // bits of elements 4i.., 16+4i..
      const int spread_l = int(((bl & 1) << 4) | ((bl & 2) << 11) | ((bl & 4) << 18) | ((bl & 8) << 25));
      const int spread_h = int(((bh & 1) << 4) | ((bh & 2) << 11) | ((bh & 4) << 18) | ((bh & 8) << 25));
      lo[i] = lo4(qa[i]) | spread_l;
      hi[i] = hi4(qa[i]) | spread_h;
    }
    const int64_t e = int64_t(u) * 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s = dot16(hi, x.codes16(r, e + 16), dot16(lo, x.codes16(r, e)));
      const float2 xs = x.scale(r, e);
      acc[r] += d * (xs.x * float(s) - 16.f * xs.y);
    }
  }
};

// Q8_0: one unit per block, 32 signed codes.
template <> struct Unit<TensorType::Q8_0> {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q0, q1; uint16_t d; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    return {load16(row + size_t(u) * 32), load16(row + size_t(u) * 32 + 16), u16_aligned(row + size_t(nb) * 32 + size_t(u) * 2)};
  }
  template <int R>
  __device__ static void dot(const Raw& w, int u, const XRows& x, float (&acc)[R]) {
    const int a[4] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w}, b[4] = {w.q1.x, w.q1.y, w.q1.z, w.q1.w};
    const float d = half_u16(w.d);
    const int64_t e = int64_t(u) * 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s = dot16(b, x.codes16(r, e + 16), dot16(a, x.codes16(r, e)));
      acc[r] += d * x.scale(r, e).x * float(s);
    }
  }
};

// Q4_K / Q5_K: four units per 256-block; unit c holds quant bytes [32c, 32c + 32), whose low
// nibbles are group 2c and high nibbles group 2c + 1 (Q5_K: plus bits 2c, 2c + 1 of qh).
template <TensorType T> struct KQuant45 {
  static constexpr bool kFive = T == TensorType::Q5_K;
  static constexpr int kPerBlock = 4;
  struct Raw { int4 head, q0, q1, h0, h1; };  // head: d, dmin, 12 bytes of 6-bit scales and mins; h: Q5_K's qh
  __device__ static Raw load(const uint8_t* row, int, int u) {
    const uint8_t* b = row + size_t(u / 4) * (kFive ? 176 : 144);
    const uint8_t* qs = b + (kFive ? 48 : 16) + 32 * (u % 4);
    Raw w;
    w.head = load16(b);
    w.q0 = load16(qs), w.q1 = load16(qs + 16);
    if constexpr (kFive) w.h0 = load16(b + 16), w.h1 = load16(b + 32);
    return w;
  }
  template <int R>
  __device__ static void dot(const Raw& w, int u, const XRows& x, float (&acc)[R]) {
    const int c = u % 4;
    const int qa[8] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w, w.q1.x, w.q1.y, w.q1.z, w.q1.w};
    int lo[2][4], hi[2][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) lo[i / 4][i % 4] = lo4(qa[i]), hi[i / 4][i % 4] = hi4(qa[i]);
    if constexpr (kFive) {
      const int ha[8] = {w.h0.x, w.h0.y, w.h0.z, w.h0.w, w.h1.x, w.h1.y, w.h1.z, w.h1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        lo[i / 4][i % 4] |= ((ha[i] >> (2 * c)) & 0x01010101) << 4;
        hi[i / 4][i % 4] |= ((ha[i] >> (2 * c + 1)) & 0x01010101) << 4;
      }
    }
    float sc0, m0, sc1, m1;
    scale_min(2 * c, w.head, sc0, m0);
    scale_min(2 * c + 1, w.head, sc1, m1);
    const float d = half_u16(uint16_t(w.head.x)), dmin = half_u16(uint16_t(uint32_t(w.head.x) >> 16));
    const int64_t e = int64_t(u / 4) * 256 + 64 * c;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int s0 = dot16(lo[1], x.codes16(r, e + 16), dot16(lo[0], x.codes16(r, e)));
      const int s1 = dot16(hi[1], x.codes16(r, e + 48), dot16(hi[0], x.codes16(r, e + 32)));
      const float2 x0 = x.scale(r, e), x1 = x.scale(r, e + 32);
      acc[r] += d * (sc0 * x0.x * float(s0) + sc1 * x1.x * float(s1)) - dmin * (m0 * x0.y + m1 * x1.y);
    }
  }
};
template <> struct Unit<TensorType::Q4_K> : KQuant45<TensorType::Q4_K> {};
template <> struct Unit<TensorType::Q5_K> : KQuant45<TensorType::Q5_K> {};

// Q6_K: four units per 256-block: unit w is half h = w / 2, positions l in [l0, l0 + 16) with
// l0 = 16 (w % 2): elements 128h + l + {0, 32, 64, 96}, four groups of 16 with int8 scales.
// Packed: ql (128 B) and qh (64 B) per block first, then scales (16 B) and d (2 B).
template <> struct Unit<TensorType::Q6_K> {
  static constexpr int kPerBlock = 4;
  struct Raw { int4 a, b, h; int8_t sc[4]; uint16_t d; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    const int blk = u / 4, h = (u % 4) / 2, l0 = 16 * (u % 2);
    const uint8_t* qb = row + size_t(blk) * 192;
    const uint8_t* aux = row + size_t(nb) * 192 + size_t(blk) * 18;
    const int8_t* sc = reinterpret_cast<const int8_t*>(aux) + 8 * h + l0 / 16;
    Raw w;
    w.a = load16(qb + 64 * h + l0), w.b = load16(qb + 64 * h + 32 + l0), w.h = load16(qb + 128 + 32 * h + l0);
#pragma unroll
    for (int k = 0; k < 4; ++k) w.sc[k] = sc[2 * k];
    w.d = u16_aligned(aux + 16);
    return w;
  }
  template <int R>
  __device__ static void dot(const Raw& w, int u, const XRows& x, float (&acc)[R]) {
    const int h = (u % 4) / 2, l0 = 16 * (u % 2);
    const int A[4] = {w.a.x, w.a.y, w.a.z, w.a.w}, B[4] = {w.b.x, w.b.y, w.b.z, w.b.w}, H[4] = {w.h.x, w.h.y, w.h.z, w.h.w};
    int v[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[0][i] = sub4(lo4(A[i]) | ((H[i] & 0x03030303) << 4), 0x20202020);
      v[1][i] = sub4(lo4(B[i]) | (((H[i] >> 2) & 0x03030303) << 4), 0x20202020);
      v[2][i] = sub4(hi4(A[i]) | (((H[i] >> 4) & 0x03030303) << 4), 0x20202020);
      v[3][i] = sub4(hi4(B[i]) | (((H[i] >> 6) & 0x03030303) << 4), 0x20202020);
    }
    const float d = half_u16(w.d);
    const int64_t e = int64_t(u / 4) * 256 + 128 * h + l0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float t = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) t += float(w.sc[k]) * x.scale(r, e + 32 * k).x * float(dot16(v[k], x.codes16(r, e + 32 * k)));
      acc[r] += d * t;
    }
  }
};

// Units in flight per lane (the streaming loop's depth): 100-160 bytes of loads a lane, at
// which every type's store and gated kernels keep to 128 registers (16 warps an SM) at R = 1.
template <TensorType T>
constexpr int kDepth = T == TensorType::Q4_0 || T == TensorType::Q4_1         ? 8
                       : T == TensorType::Q5_0 || T == TensorType::Q8_0       ? 4
                       : T == TensorType::Q5_K || T == TensorType::Q6_K       ? 2
                                                                              : 3;  // Q4_K

// The dot products of `count` weight rows of type T (row i at row_at(i)) with the R activation
// rows, as one stream of steps: a step is one unit a lane (units lane, lane + 32, ... of a row,
// so a row of `units` units is ceil(units / 32) steps, the last one ragged), and the loads of a
// step are issued kDepth steps before its dot products, across row boundaries, so each lane
// keeps kDepth units of loads in flight for the whole range. The loads of the first kDepth steps
// are issued before wait_previous_kernel (weights only: nothing a previous kernel writes). At
// the end of row i every lane holds the row's warp-summed dots and calls finish(i, acc). Each
// lane adds its units in ascending order, so a row's sums do not depend on the range it is in.
template <TensorType T, int R, class RowAt, class Finish>
__device__ __forceinline__ void stream_rows(int64_t count, int64_t K, const XRows& x, int lane, RowAt row_at,
                                            Finish finish) {
  using W = Unit<T>;
  constexpr int D = kDepth<T>;
  const int nb = int(K / packed_layout(T).elems);
  const int units = nb * W::kPerBlock;
  const int steps = (units + kWarpSize - 1) / kWarpSize;
  const int64_t total = count * steps;
  typename W::Raw buf[D] = {};
  int64_t load_row = 0;
  int load_step = 0;
  auto load_next = [&](typename W::Raw& b) {
    const int u = load_step * kWarpSize + lane;
    if (u < units) b = W::load(row_at(load_row), nb, u);
    if (++load_step == steps) load_step = 0, ++load_row;
  };
#pragma unroll
  for (int d = 0; d < D; ++d)
    if (d < total) load_next(buf[d]);
  wait_previous_kernel();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  int64_t row = 0;
  int step = 0;
  for (int64_t t = 0; t < total; t += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (t + d >= total) break;  // uniform
      const typename W::Raw cur = buf[d];
      if (t + d + D < total) load_next(buf[d]);
      const int u = step * kWarpSize + lane;
      if (u < units) W::template dot<R>(cur, u, x, acc);
      if (++step == steps) {
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
        finish(row, acc);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.f;
        step = 0, ++row;
      }
    }
  }
}

constexpr int kMaxParts = 4;
// A launch's epilogue: store (each part's rows, plus a residual where set); gated (gate and up
// rows of one type in one stream, y = act(gate) * up into part 0's output); gated_up (the up
// rows, part 0's output holding the gate's sums, which a store launch before it wrote: gate and
// up of different types).
enum class Epi { store, gated, gated_up };
struct Parts {  // the launch's weights: warps [warp_end[i - 1], warp_end[i]) take part i's rows
  MatmulPart p[kMaxParts];
  int64_t warp_end[kMaxParts];
  int64_t warps;  // warp_end[n - 1]
  int n;
  MatmulEpilogue act;  // the gated epilogues' activation (swiglu, geglu)
  GatedQ8 q8;          // gated epilogues: also the output's q8_1 form, when q8.codes is set
};

// Each warp takes an even, contiguous range of one part's rows (store), or of the gate and up
// rows together, and streams them (stream_rows). The first rows of the range are pulled into
// L2 and the first steps' loads issued before waiting for the previous kernel (launch.cuh), the
// activations read after. One instantiation per weight type, so that each type's registers set
// its own occupancy.
template <TensorType T, int R, Epi E>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize) matmul_q8_kernel(Parts P, XRows x) {
  allow_next_kernel();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t g = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  // The part, its first warp and its warps, by unrolled selects (a run-time index into the
  // parameter array would copy it to local memory).
  MatmulPart part = P.p[0];
  int64_t first = 0, end = P.warp_end[0];
  if constexpr (E == Epi::store) {
#pragma unroll
    for (int i = 1; i < kMaxParts; ++i)
      if (i < P.n && g >= P.warp_end[i - 1]) part = P.p[i], first = P.warp_end[i - 1], end = P.warp_end[i];
  }
  if (g >= P.warps) {
    wait_previous_kernel();
    return;
  }
  const int64_t j = g - first, warps = end - first;
  const int64_t n0 = j * part.N / warps, n1 = (j + 1) * part.N / warps, count = n1 - n0;
  const MatmulPart& up = P.p[1];
  // ~8 KiB of the range into L2 (per weight read).
  const int64_t ahead = count < 4 ? count : 4;
  const size_t pull = ahead * part.row_bytes < 8192 ? ahead * part.row_bytes : 8192;
  if (E != Epi::gated_up) prefetch_l2(part.w + size_t(n0) * part.row_bytes, pull, lane);
  if (E != Epi::store) prefetch_l2(up.w + size_t(n0) * up.row_bytes, pull, lane);
  if constexpr (E == Epi::store) {
    stream_rows<T, R>(
        count, x.K, x, lane, [&](int64_t i) { return part.w + size_t(n0 + i) * part.row_bytes; },
        [&](int64_t i, const float (&acc)[R]) {
          if (lane != 0) return;
          const int64_t n = n0 + i;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const float res = part.residual ? part.residual[r * part.ld_residual + n] : 0.f;
            part.y[r * part.ldy + n] = part.residual ? acc[r] + res : acc[r];
          }
        });
    return;
  }
  // Output row n from its gate and up sums (every lane calls this; lane 0 stores). With a q8_1
  // output, the warp that completes a group of 32 outputs quantizes it (so the down projection
  // needs no quantize kernel): at the end of its part of a group, a warp publishes its outputs
  // (fence) and adds their count; the one that brings it to 32 reads the group back from L2
  // and resets the counter for the next launch.
  auto out = [&](int64_t n, const float (&gate)[R], const float (&upv)[R]) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
        part.y[r * part.ldy + n] = (P.act == MatmulEpilogue::swiglu ? silu(gate[r]) : gelu_tanh(gate[r])) * upv[r];
    }
    if (!P.q8.codes || (n % kQ8Block != kQ8Block - 1 && n != n1 - 1)) return;
    const int64_t group = n / kQ8Block;
    int done = 0;
    if (lane == 0) {
      const int64_t from = n0 > group * kQ8Block ? n0 : group * kQ8Block;
      const int mine = int(n - from + 1);
      __threadfence();
      done = atomicAdd(P.q8.counters + group, mine) == kQ8Block - mine;
    }
    if (!shfl(done, 0)) return;
    __threadfence();
    const int64_t e = group * kQ8Block + lane, N = part.N;
#pragma unroll
    for (int r = 0; r < R; ++r)
      quantize_q8_1_block(__ldcg(part.y + r * part.ldy + e), P.q8.codes + r * N + e, P.q8.ds + r * (N / kQ8Block) + group,
                          lane);
    if (lane == 0) P.q8.counters[group] = 0;
  };
  if constexpr (E == Epi::gated) {  // one stream: gate row n0, up row n0, gate row n0 + 1, ...
    float gate[R];
    stream_rows<T, R>(
        2 * count, x.K, x, lane,
        [&](int64_t i) {
          const MatmulPart& p = i % 2 ? up : part;
          return p.w + size_t(n0 + i / 2) * p.row_bytes;
        },
        [&](int64_t i, const float (&acc)[R]) {
          if (i % 2) return out(n0 + i / 2, gate, acc);
#pragma unroll
          for (int r = 0; r < R; ++r) gate[r] = acc[r];
        });
  } else {  // the up rows; the gate's sums are in the output
    stream_rows<T, R>(
        count, x.K, x, lane, [&](int64_t i) { return up.w + size_t(n0 + i) * up.row_bytes; },
        [&](int64_t i, const float (&acc)[R]) {
          float gate[R] = {};
          if (lane == 0)
#pragma unroll
            for (int r = 0; r < R; ++r) gate[r] = part.y[r * part.ldy + n0 + i];
          out(n0 + i, gate, acc);
        });
  }
}

// One warp per 32 elements (q8_1.cuh).
__global__ void quantize_q8_1_kernel(const float* __restrict__ x, int64_t ldx, int64_t rows, int64_t K,
                                     int8_t* __restrict__ q, float2* __restrict__ ds) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t per_row = K / 32;
  if (blk >= rows * per_row) return;
  const int64_t r = blk / per_row, e = (blk % per_row) * 32 + lane;
  quantize_q8_1_block(x[r * ldx + e], q + r * K + e, ds + blk, lane);
}

// The warps of an instantiation the device holds at once: its occupancy times the SMs.
template <TensorType T, int R, Epi E>
int64_t resident_warps() {
  static const int64_t warps = [] {
    int dev = 0, sms = 0, blocks = 0;
    LOOM_CUDA_CHECK(cudaGetDevice(&dev));
    LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    LOOM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, matmul_q8_kernel<T, R, E>,
                                                                  kWarpsPerBlock * kWarpSize, 0));
    return int64_t(blocks > 0 ? blocks : 1) * sms * kWarpsPerBlock;
  }();
  return warps;
}

double part_bytes(const MatmulPart& m) { return double(m.N) * double(m.row_bytes); }

// Launches parts of type T with epilogue E on `share` of the warps (max_warps, or 0: the
// resident warps), spread over the parts in proportion to their bytes, at least one and at most
// one a row each (gated: the gate's rows).
template <TensorType T, int R, Epi E>
void launch_typed(Parts P, const XRows& x, int64_t max_warps, double share, cudaStream_t s) {
  const double budget = double(max_warps > 0 ? max_warps : resident_warps<T, R, E>()) * share;
  const int parts = E == Epi::store ? P.n : 1;
  double bytes = 0;
  for (int i = 0; i < parts; ++i) bytes += part_bytes(P.p[i]);
  int64_t end = 0;
  for (int i = 0; i < parts; ++i) {
    end += std::clamp(int64_t(std::llround(budget * part_bytes(P.p[i]) / bytes)), int64_t(1), P.p[i].N);
    P.warp_end[i] = end;
  }
  for (int i = parts; i < kMaxParts; ++i) P.warp_end[i] = end;
  P.warps = end;
  launch(matmul_q8_kernel<T, R, E>, dim3(unsigned((end + kWarpsPerBlock - 1) / kWarpsPerBlock)),
         dim3(kWarpsPerBlock * kWarpSize), s, P, x);
}

template <int R, Epi E>
void launch_of_type(const Parts& P, const XRows& x, int64_t max_warps, double share, cudaStream_t s) {
  switch (E == Epi::gated_up ? P.p[1].type : P.p[0].type) {
    case TensorType::Q4_0: return launch_typed<TensorType::Q4_0, R, E>(P, x, max_warps, share, s);
    case TensorType::Q4_1: return launch_typed<TensorType::Q4_1, R, E>(P, x, max_warps, share, s);
    case TensorType::Q5_0: return launch_typed<TensorType::Q5_0, R, E>(P, x, max_warps, share, s);
    case TensorType::Q8_0: return launch_typed<TensorType::Q8_0, R, E>(P, x, max_warps, share, s);
    case TensorType::Q4_K: return launch_typed<TensorType::Q4_K, R, E>(P, x, max_warps, share, s);
    case TensorType::Q5_K: return launch_typed<TensorType::Q5_K, R, E>(P, x, max_warps, share, s);
    case TensorType::Q6_K: return launch_typed<TensorType::Q6_K, R, E>(P, x, max_warps, share, s);
    default: cuda_invalid("matmul_q8: no integer-dot kernel for this weight type");
  }
}

// One pass of at most kMaxRows activation rows: a launch per weight type among the parts, each
// on its share of the warps by bytes (launched back to back, the later ones start on the SMs
// the earlier leave free); gate and up of different types: the gate's sums stored first.
template <int R>
void launch_rows(const Parts& P, const XRows& x, int64_t max_warps, cudaStream_t s) {
  double total = 0;
  for (int i = 0; i < P.n; ++i) total += part_bytes(P.p[i]);
  if (P.act != MatmulEpilogue::store) {
    if (P.p[0].type == P.p[1].type) return launch_of_type<R, Epi::gated>(P, x, max_warps, 1.0, s);
    Parts gate = P;
    gate.n = 1;
    gate.q8 = {};
    launch_of_type<R, Epi::store>(gate, x, max_warps, part_bytes(P.p[0]) / total, s);
    return launch_of_type<R, Epi::gated_up>(P, x, max_warps, part_bytes(P.p[1]) / total, s);
  }
  bool done[kMaxParts] = {};
  for (int i = 0; i < P.n; ++i) {
    if (done[i]) continue;
    Parts same = P;
    same.n = 0;
    double bytes = 0;
    for (int k = i; k < P.n; ++k)
      if (!done[k] && P.p[k].type == P.p[i].type) same.p[same.n++] = P.p[k], bytes += part_bytes(P.p[k]), done[k] = true;
    launch_of_type<R, Epi::store>(same, x, max_warps, bytes / total, s);
  }
}

}  // namespace

bool has_q8_kernel(TensorType t, int64_t K) {
  const PackedLayout l = packed_layout(t);
  return l.elems > 0 && K % l.elems == 0 && K % 32 == 0;
}

void quantize_q8_1(const float* x, int64_t ldx, int64_t rows, int64_t K, int8_t* q, float2* ds, cudaStream_t s) {
  if (K % 32 != 0) cuda_invalid("quantize_q8_1: K must be a multiple of 32");
  const int64_t warps = rows * (K / 32);
  if (warps <= 0) return;
  constexpr int kThreads = 256;
  launch(quantize_q8_1_kernel, dim3(unsigned((warps * kWarpSize + kThreads - 1) / kThreads)), dim3(kThreads), s, x, ldx,
         rows, K, q, ds);
}

void matmul_q8_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, const int8_t* q,
                     const float2* ds, int64_t rows, cudaStream_t s, const GatedQ8& q8, const MmaPath& mma,
                     int64_t max_warps) {
  if (n_parts < 1 || n_parts > kMaxParts) cuda_invalid("matmul_q8_parts: 1 to 4 weights per launch");
  if (e != MatmulEpilogue::store && (n_parts != 2 || parts[0].N != parts[1].N || parts[0].residual))
    cuda_invalid("matmul_q8_parts: a gated epilogue takes two weights (gate, up) of equal rows and no residual");
  Parts P{};
  P.n = n_parts;
  P.act = e;
  P.q8 = q8;
  int64_t end = 0;  // output rows
  for (int i = 0; i < n_parts; ++i) {
    const MatmulPart& m = parts[i];
    if (!has_q8_kernel(m.type, K)) cuda_invalid("matmul_q8: no integer-dot kernel for this weight type and K");
    if (m.row_bytes % 16 != 0) cuda_invalid("matmul_q8: packed rows must be 16-byte multiples");
    P.p[i] = m;
    end += e == MatmulEpilogue::store || i == 0 ? m.N : 0;
  }
  if (q8.codes && (e == MatmulEpilogue::store || end % kQ8Block || !q8.ds || !q8.counters))
    cuda_invalid("matmul_q8_parts: a q8_1 output needs a gated epilogue, rows a multiple of 32 and counters");
  if (end <= 0) return;
  bool tensor_cores = mma.min_rows > 0 && rows >= mma.min_rows && mma_device();
  for (int i = 0; i < n_parts; ++i) tensor_cores = tensor_cores && has_mma_kernel(parts[i].type);
  if (tensor_cores) {  // the gated output's q8_1 form, if wanted, by the quantize kernel after it
    matmul_mma_parts(parts, n_parts, e, K, q, ds, rows, s, mma);
    if (q8.codes) quantize_q8_1(parts[0].y, parts[0].ldy, rows, end, q8.codes, q8.ds, s);
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const XRows x{q + r0 * K, ds + r0 * (K / 32), K};
    Parts Pr = P;
    for (int i = 0; i < n_parts; ++i) {
      Pr.p[i].y += r0 * Pr.p[i].ldy;
      if (Pr.p[i].residual) Pr.p[i].residual += r0 * Pr.p[i].ld_residual;
    }
    if (q8.codes) Pr.q8.codes += r0 * end, Pr.q8.ds += r0 * (end / 32);
    switch (rows - r0 < kMaxRows ? rows - r0 : kMaxRows) {
      case 1: launch_rows<1>(Pr, x, max_warps, s); break;
      case 2: launch_rows<2>(Pr, x, max_warps, s); break;
      case 3: launch_rows<3>(Pr, x, max_warps, s); break;
      case 4: launch_rows<4>(Pr, x, max_warps, s); break;
      case 5: launch_rows<5>(Pr, x, max_warps, s); break;
      case 6: launch_rows<6>(Pr, x, max_warps, s); break;
      case 7: launch_rows<7>(Pr, x, max_warps, s); break;
      default: launch_rows<8>(Pr, x, max_warps, s); break;
    }
  }
}

void matmul_q8(TensorType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K, const int8_t* q, const float2* ds,
               int64_t rows, float* y, int64_t ldy, cudaStream_t s, int64_t max_warps) {
  const MatmulPart part{t, w, row_bytes, N, y, ldy};
  matmul_q8_parts(&part, 1, MatmulEpilogue::store, K, q, ds, rows, s, {}, {}, max_warps);
}

}  // namespace loom::backend::cuda
