// The integer-dot inner loop of matmul_q8.cu: weight units and the streaming loop that dots them.
// A weight "unit" is a 16- or 32-byte run of one row's quants with their scales, per type
// (Unit<T>: its loads, its activations' loads, its int8 dot products); stream_tiles runs a
// warp over tiles of rows, each lane taking every 32nd unit of a row, with its loads issued a
// few steps ahead of the dot products. Included by matmul_q8.cu alone, whose kernels wrap this
// loop in their grids and epilogues.
#pragma once
#include <cuda_fp16.h>
#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

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

// Each unit type has Raw, the weight bytes of one unit a lane loads (its quants and their
// scales), Act, the activations those bytes meet (the same for every weight row: a lane takes
// the same units of each row), and load / load_x / dot: the loads alone, issued steps before
// their use, and the arithmetic on loaded registers (a unit's contribution to one row's sum).

// Q4_0 / Q4_1: one unit per block; quant byte j holds element j (low nibble) and j + 16 (high).
template <TensorType T> struct Legacy4 {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q; uint16_t d, m; };
  struct Act { int4 lo, hi; float2 s; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    constexpr PackedLayout L = packed_layout(T);
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * L.aux_bytes();
    return {load16(row + size_t(u) * 16), u16_aligned(aux), T == TensorType::Q4_1 ? u16_aligned(aux + 2) : uint16_t(0)};
  }
  __device__ static Act load_x(const XRows& x, int r, int u) {
    const int64_t e = int64_t(u) * 32;
    return {x.codes16(r, e), x.codes16(r, e + 16), x.scale(r, e)};
  }
  __device__ static float dot(const Raw& w, const Act& a, int) {
    const int qa[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) lo[i] = lo4(qa[i]), hi[i] = hi4(qa[i]);
    const float d = half_u16(w.d);
    const int s = dot16(hi, a.hi, dot16(lo, a.lo));
    if constexpr (T == TensorType::Q4_0) return d * (a.s.x * float(s) - 8.f * a.s.y);
    return d * a.s.x * float(s) + half_u16(w.m) * a.s.y;
  }
};
template <> struct Unit<TensorType::Q4_0> : Legacy4<TensorType::Q4_0> {};
template <> struct Unit<TensorType::Q4_1> : Legacy4<TensorType::Q4_1> {};

// Q5_0: as Q4_0 plus a fifth bit per element from the block's 32-bit qh (aux: d, qh).
template <> struct Unit<TensorType::Q5_0> {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q; uint16_t d, h0, h1; };
  using Act = Legacy4<TensorType::Q4_0>::Act;
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * 6;
    return {load16(row + size_t(u) * 16), u16_aligned(aux), u16_aligned(aux + 2), u16_aligned(aux + 4)};
  }
  __device__ static Act load_x(const XRows& x, int r, int u) { return Legacy4<TensorType::Q4_0>::load_x(x, r, u); }
  __device__ static float dot(const Raw& w, const Act& a, int) {
    const int qa[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
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
    const int s = dot16(hi, a.hi, dot16(lo, a.lo));
    return half_u16(w.d) * (a.s.x * float(s) - 16.f * a.s.y);
  }
};

// Q8_0: one unit per block, 32 signed codes.
template <> struct Unit<TensorType::Q8_0> {
  static constexpr int kPerBlock = 1;
  struct Raw { int4 q0, q1; uint16_t d; };
  using Act = Legacy4<TensorType::Q4_0>::Act;
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    return {load16(row + size_t(u) * 32), load16(row + size_t(u) * 32 + 16), u16_aligned(row + size_t(nb) * 32 + size_t(u) * 2)};
  }
  __device__ static Act load_x(const XRows& x, int r, int u) { return Legacy4<TensorType::Q4_0>::load_x(x, r, u); }
  __device__ static float dot(const Raw& w, const Act& a, int) {
    const int q0[4] = {w.q0.x, w.q0.y, w.q0.z, w.q0.w}, q1[4] = {w.q1.x, w.q1.y, w.q1.z, w.q1.w};
    const int s = dot16(q1, a.hi, dot16(q0, a.lo));
    return half_u16(w.d) * a.s.x * float(s);
  }
};

// Q4_K / Q5_K: four units per 256-block; unit c holds quant bytes [32c, 32c + 32), whose low
// nibbles are group 2c and high nibbles group 2c + 1 (Q5_K: plus bits 2c, 2c + 1 of qh).
template <TensorType T> struct KQuant45 {
  static constexpr bool kFive = T == TensorType::Q5_K;
  static constexpr int kPerBlock = 4;
  struct Raw { int4 head, q0, q1, h0, h1; };  // head: d, dmin, 12 bytes of 6-bit scales and mins; h: Q5_K's qh
  struct Act { int4 c0, c1, c2, c3; float2 x0, x1; };  // groups 2c (c0, c1) and 2c + 1 (c2, c3)
  __device__ static Raw load(const uint8_t* row, int, int u) {
    const uint8_t* b = row + (unsigned(u) / 4) * (kFive ? 176u : 144u);
    const uint8_t* qs = b + (kFive ? 48 : 16) + 32 * (unsigned(u) % 4);
    Raw w;
    w.head = load16(b);
    w.q0 = load16(qs), w.q1 = load16(qs + 16);
    if constexpr (kFive) w.h0 = load16(b + 16), w.h1 = load16(b + 32);
    return w;
  }
  __device__ static Act load_x(const XRows& x, int r, int u) {
    const int64_t e = int64_t(unsigned(u)) * 64;  // (u / 4) * 256 + 64 * (u % 4)
    return {x.codes16(r, e), x.codes16(r, e + 16), x.codes16(r, e + 32), x.codes16(r, e + 48), x.scale(r, e),
            x.scale(r, e + 32)};
  }
  __device__ static float dot(const Raw& w, const Act& a, int u) {
    const unsigned c = unsigned(u) % 4;  // the unit's place in its block (a lane's is the same at every step)
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
    // The 6-bit scales and mins of groups 2c and 2c + 1 (ggml's get_scale_min_k4), both at once
    // and without branches (c differs between the lanes of a warp): bytes b and b + 1 of the
    // packed words, c < 2 their low six bits, c >= 2 four bits of head.w and two of head.y/z.
    const bool high = c >= 2;
    const int b = 16 * (c & 1), bh = b + (high ? 2 : 0);
    const uint32_t low_mask = high ? 0x3030u : 0x3F3Fu, w_mask = high ? 0x0F0Fu : 0u;
    const uint32_t sc = ((uint32_t(w.head.y) >> bh) & low_mask) | ((uint32_t(w.head.w) >> b) & w_mask);
    const uint32_t mn = ((uint32_t(w.head.z) >> bh) & low_mask) | ((uint32_t(w.head.w) >> (b + 4)) & w_mask);
    const float sc0 = float(sc & 0xFF), sc1 = float((sc >> 8) & 0xFF), m0 = float(mn & 0xFF), m1 = float((mn >> 8) & 0xFF);
    const float d = half_u16(uint16_t(w.head.x)), dmin = half_u16(uint16_t(uint32_t(w.head.x) >> 16));
    const int s0 = dot16(lo[1], a.c1, dot16(lo[0], a.c0));
    const int s1 = dot16(hi[1], a.c3, dot16(hi[0], a.c2));
    return d * (sc0 * a.x0.x * float(s0) + sc1 * a.x1.x * float(s1)) - dmin * (m0 * a.x0.y + m1 * a.x1.y);
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
  struct Act { int4 c[4]; float s[4]; };
  __device__ static Raw load(const uint8_t* row, int nb, int u) {
    const unsigned blk = unsigned(u) / 4, h = (unsigned(u) % 4) / 2, l0 = 16 * (unsigned(u) % 2);
    const uint8_t* qb = row + blk * 192u;
    const uint8_t* aux = row + size_t(nb) * 192 + blk * 18u;
    const int8_t* sc = reinterpret_cast<const int8_t*>(aux) + 8 * h + l0 / 16;
    Raw w;
    w.a = load16(qb + 64 * h + l0), w.b = load16(qb + 64 * h + 32 + l0), w.h = load16(qb + 128 + 32 * h + l0);
#pragma unroll
    for (int k = 0; k < 4; ++k) w.sc[k] = sc[2 * k];
    w.d = u16_aligned(aux + 16);
    return w;
  }
  __device__ static Act load_x(const XRows& x, int r, int u) {
    const int64_t e = int64_t(unsigned(u) / 4 * 256 + 128 * ((unsigned(u) % 4) / 2) + 16 * (unsigned(u) % 2));
    Act a;
#pragma unroll
    for (int k = 0; k < 4; ++k) a.c[k] = x.codes16(r, e + 32 * k), a.s[k] = x.scale(r, e + 32 * k).x;
    return a;
  }
  __device__ static float dot(const Raw& w, const Act& a, int) {
    const int A[4] = {w.a.x, w.a.y, w.a.z, w.a.w}, B[4] = {w.b.x, w.b.y, w.b.z, w.b.w}, H[4] = {w.h.x, w.h.y, w.h.z, w.h.w};
    int v[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[0][i] = sub4(lo4(A[i]) | ((H[i] & 0x03030303) << 4), 0x20202020);
      v[1][i] = sub4(lo4(B[i]) | (((H[i] >> 2) & 0x03030303) << 4), 0x20202020);
      v[2][i] = sub4(hi4(A[i]) | (((H[i] >> 4) & 0x03030303) << 4), 0x20202020);
      v[3][i] = sub4(hi4(B[i]) | (((H[i] >> 6) & 0x03030303) << 4), 0x20202020);
    }
    float t = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) t += float(w.sc[k]) * a.s[k] * float(dot16(v[k], a.c[k]));
    return half_u16(w.d) * t;
  }
};

// Weight rows a step of one activation row dots (they share the step's activation loads); with
// several activation rows one: those rows' activations and sums take the registers.
template <int R>
constexpr int kTile = R == 1 ? 2 : 1;

// Slots of each lane's ring of loads (the streaming loop's depth): a step's loads are issued
// kDepth - 1 steps before its dot products. A slot holds one unit of each row of a tile.
template <TensorType T>
constexpr int kDepth = T == TensorType::Q4_0 || T == TensorType::Q4_1 ? 4
                       : T == TensorType::Q5_K || T == TensorType::Q6_K ? 2
                                                                         : 3;  // Q5_0, Q8_0, Q4_K

// The dot products of `tiles` tiles of P weight rows of type T (row p of tile i at
// row_at(i, p)) with the R activation rows, as one stream of steps. A step is one unit a lane of
// every row of a tile: lane l takes units l, l + 32, ... of each row, so a row of `units` units
// is ceil(units / 32) steps (a ragged last step's spare lanes reread the last unit and add
// nothing), and the rows of a tile share the step's activations. The loads of a step are issued
// kDepth - 1 steps before its dot products, across tile boundaries, each into the slot the step
// before it has finished with; the first steps' loads are issued before wait() (weights only:
// nothing the work before writes; a kernel's wait is wait_previous_kernel, a persistent step's
// phase its grid barrier), which every warp calls once. At the end of tile i every lane holds
// its rows' warp-summed dots and calls finish(i, acc). Each lane adds its units in ascending
// order, so a row's sums depend neither on the range nor on the tile it is in.
template <TensorType T, int R, int P, class RowAt, class Finish, class Wait>
__device__ __forceinline__ void stream_tiles(int tiles, int64_t K, const XRows& x, int lane, RowAt row_at,
                                             Finish finish, Wait wait) {
  using W = Unit<T>;
  constexpr int D = R == 1 ? kDepth<T> : 2;  // several activation rows: their loads take the registers
  static_assert(D >= 2, "a step refills the slot of the step before it");
  const int nb = int(K / packed_layout(T).elems);
  const int units = nb * W::kPerBlock;
  const int steps = (units + kWarpSize - 1) / kWarpSize;
  const int total = tiles * steps;
  typename W::Raw buf[D][P];
  const uint8_t* rows[P];
#pragma unroll
  for (int p = 0; p < P; ++p) rows[p] = row_at(0, p);
  int load_tile = 0, load_step = 0;
  auto load_next = [&](typename W::Raw(&b)[P]) {
    const int u = min(load_step * kWarpSize + lane, units - 1);
#pragma unroll
    for (int p = 0; p < P; ++p) b[p] = W::load(rows[p], nb, u);
    if (++load_step == steps) {
      load_step = 0;
      if (++load_tile < tiles)
#pragma unroll
        for (int p = 0; p < P; ++p) rows[p] = row_at(load_tile, p);
    }
  };
#pragma unroll
  for (int d = 0; d < D - 1; ++d)
    if (d < total) load_next(buf[d]);
  wait();
  float acc[R][P];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int p = 0; p < P; ++p) acc[r][p] = 0.f;
  int tile = 0, step = 0;
  for (int t = 0; t < total; t += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (t + d >= total) break;  // uniform
      if (t + d + D - 1 < total) load_next(buf[(d + D - 1) % D]);
      const int u = step * kWarpSize + lane, uc = min(u, units - 1);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const typename W::Act a = W::load_x(x, r, uc);
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const float v = W::dot(buf[d][p], a, uc);
          if (u < units) acc[r][p] += v;
        }
      }
      if (++step == steps) {  // uniform
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int p = 0; p < P; ++p) acc[r][p] = warp_sum(acc[r][p]);
        finish(tile, acc);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int p = 0; p < P; ++p) acc[r][p] = 0.f;
        step = 0, ++tile;
      }
    }
  }
}

}  // namespace loom::backend::cuda
