// The device half of matmul_q8.cu's integer-dot matmuls, shared with the persistent decode step
// (decode_persistent.cu): a launch's parts and epilogues, and matmul_warp, the work of one warp
// of a launch, which either kernel wraps in its grid.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/q8_stream.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

constexpr int kWarpsPerBlock = 4;  // a matmul_q8 block's (and a persistent step's) warps

constexpr int kMaxParts = 4;
// A launch's epilogue: store (each part's rows, plus a residual where set); rope_kv (one
// activation row: store, the parts' rows rotated and stored into the KV pool as
// MatmulPart::Out says); gated (gate and up rows of one type in one stream, y = act(gate) * up
// into part 0's output); gated_up (the up rows, part 0's output holding the gate's sums, which
// a store launch before it wrote: gate and up of different types).
enum class Epi { store, rope_kv, gated, gated_up };
constexpr bool stores(Epi e) { return e == Epi::store || e == Epi::rope_kv; }
// MatmulPart as the kernels take it: `out` in the padding after `type`, so that a part stays
// 64 bytes (select_part copies one by unrolled selects; a larger one costs the store kernels
// registers).
struct KPart {
  TensorType type;
  MatmulPart::Out out;
  const uint8_t* w;
  size_t row_bytes;
  int64_t N;
  float* y;
  int64_t ldy;
  const float* residual;
  int64_t ld_residual;
  KPart() = default;
  KPart(const MatmulPart& m)  // NOLINT: the host's parts convert
      : type(m.type), out(m.out), w(m.w), row_bytes(m.row_bytes), N(m.N), y(m.y), ldy(m.ldy), residual(m.residual),
        ld_residual(m.ld_residual) {}
};
static_assert(sizeof(KPart) == 64, "a kernel's part is 64 bytes");

struct RopeKvDev {  // RopeKvOut as the rope_kv epilogue reads it
  RopeAngles angles;
  int64_t head_dim = 0, n_rot = 0;
  KvView kv;
  StepTables st;
};
struct Parts {  // the launch's weights: warps [warp_end[i - 1], warp_end[i]) take part i's rows
  KPart p[kMaxParts];
  int64_t warp_end[kMaxParts];
  int64_t warps;  // warp_end[n - 1]
  int n;
  MatmulEpilogue act;  // the gated epilogues' activation (swiglu, geglu)
  GatedQ8 q8;          // gated epilogues: also the output's q8_1 form, when q8.codes is set
  RopeKvDev rope;      // rope_kv
};

// The q8_1 output's groups of 32 (GatedQ8): a warp that has stored outputs up to n of its range
// [n0, n1) calls this on every lane at the end of its part of a group (n the group's last output
// or n1 - 1); it publishes them (fence) and adds their count to the group's counter, and the
// warp that brings it to 32 gets true on every lane (after a fence: the group's outputs are
// readable from L2) and resets the counter for the next launch.
__device__ __forceinline__ bool completes_q8_group(int64_t n, int64_t n0, int64_t n1, int* counters, int lane) {
  if (n % kQ8Block != kQ8Block - 1 && n != n1 - 1) return false;
  const int64_t group = n / kQ8Block;
  int done = 0;
  if (lane == 0) {
    const int64_t from = n0 > group * kQ8Block ? n0 : group * kQ8Block;
    const int mine = int(n - from + 1);
    __threadfence();
    done = atomicAdd(counters + group, mine) == kQ8Block - mine;
  }
  if (!shfl(done, 0)) return false;
  __threadfence();
  if (lane == 0) counters[group] = 0;
  return true;
}

// Part i of the launch: of a kernel's parameters (kParam) by unrolled selects (a run-time index
// into the parameter array would copy it to local memory); of Parts in global memory (a
// persistent step's phase) by the index (selects would load every part: 64 registers).
template <bool kParam>
__device__ __forceinline__ KPart select_part(const Parts& P, int i) {
  if constexpr (!kParam) {
    return P.p[i];
  } else {
    KPart part = P.p[0];
#pragma unroll
    for (int k = 1; k < kMaxParts; ++k)
      if (i == k) part = P.p[k];
    return part;
  }
}

// The rope_kv epilogue's angles: a warp's first kRopeTiles tiles (launch_typed gives a rope_kv
// launch enough warps), their (cos, sin), worked out before the stream (the accurate cosf /
// sinf would otherwise sit in the loop and push its registers into spills); and the KV row of
// the step's one position.
constexpr int kRopeTiles = 64;
struct RopeWarp {
  float2 cs[kRopeTiles];
  int64_t kv_row;
};

// A block's RopeWarps, one a warp: one array for every type's kernel (a persistent step holds
// them all).
__device__ __forceinline__ RopeWarp* rope_warp_slots() {
  __shared__ RopeWarp slots[kWarpsPerBlock];
  return slots;
}

// Before the wait: the step's tables are written before its first kernel starts,
// by a copy, not by a kernel of the step.
__device__ __forceinline__ void rope_warp_prepare(const RopeKvDev& rk, const KPart& part, int64_t n0, int64_t tiles,
                                                  RopeWarp& w, int lane) {
  using Out = MatmulPart::Out;
  const int32_t pos = rk.st.pos_of_row[0];
  if (part.out == Out::rope_q || part.out == Out::rope_k)
    for (int64_t t = lane; t < tiles; t += kWarpSize) {
      const int64_t i = ((n0 + 2 * t) % rk.head_dim) / 2;
      float c = 1.f, s = 0.f;
      if (i < rk.n_rot / 2) rk.angles.cos_sin(pos, i, c, s);  // pairs past n_rot pass through
      w.cs[t] = make_float2(c, s);
    }
  if (lane == 0) w.kv_row = kv_row(rk.st, rk.st.seq_of_row[0], pos, rk.kv.block_size);
  __syncwarp();
}

// The rope_kv epilogue of a store tile, the warp's tile t: rows n and n + 1 of a part (n even;
// `pair`: n + 1 is a row) with sums a and b, as MatmulPart::Out says; the same values as a
// store, then rope_kv_store (a query or key pair (2i, 2i + 1) of a head is a tile).
__device__ __forceinline__ void rope_kv_out(const RopeKvDev& rk, const KPart& part, const RopeWarp& w, int t,
                                            int64_t n, float a, float b, bool pair) {
  using Out = MatmulPart::Out;
  if (part.out == Out::y) {
    part.y[n] = part.residual ? a + part.residual[n] : a;
    if (pair) part.y[n + 1] = part.residual ? b + part.residual[n + 1] : b;
    return;
  }
  if (part.out != Out::kv_v) {  // rope_q, rope_k: n + 1 is a row (head_dim is even and divides N)
    const float2 cs = w.cs[t];
    rotate_pair(a, b, cs.x, cs.y, a, b);
    if (part.out == Out::rope_q) {
      part.y[n] = a, part.y[n + 1] = b;
      return;
    }
  }
  __half* o = part.out == Out::rope_k ? rk.kv.k + w.kv_row * rk.kv.k_width : rk.kv.v + w.kv_row * rk.kv.v_width;
  o[n] = __float2half_rn(a);
  if (pair) o[n + 1] = __float2half_rn(b);
}

// Warp g of a launch (or of a persistent step's phase) takes an even, contiguous range of one
// part's rows (store), or of the gate and up rows together, and streams them (stream_tiles). The
// first rows of the range are pulled into L2 and the first steps' loads issued before wait() (a
// kernel's: wait_previous_kernel, launch.cuh; a persistent step's: its grid barrier), which
// every warp calls once; the activations are read after. kParam: P is a kernel's parameter (else
// in global memory).
template <TensorType T, int R, Epi E, bool kParam = true, class Wait>
__device__ __forceinline__ void matmul_warp(const Parts& P, const XRows& x, int64_t g, int lane, Wait wait) {
  // The part, its first warp and its warps, by unrolled selects (a run-time index into the
  // parameter array would copy it to local memory).
  int pi = 0;
  int64_t first = 0, end = P.warp_end[0];
  if constexpr (stores(E)) {
#pragma unroll
    for (int i = 1; i < kMaxParts; ++i)
      if (i < P.n && g >= P.warp_end[i - 1]) pi = i, first = P.warp_end[i - 1], end = P.warp_end[i];
  }
  const KPart part = select_part<kParam>(P, pi);
  if (g >= P.warps) {
    wait();
    return;
  }
  // The warp's tiles (kTile): one activation row, pairs of rows of its part (store: an odd
  // part's last pair is one row, read twice) or the gate and up row of an output (gated);
  // several activation rows, one row a tile (gated: gate row n, up row n, gate row n + 1, ...).
  constexpr int TR = kTile<R>;
  constexpr int64_t per = stores(E) ? TR : 1;
  const int64_t j = g - first, warps = end - first, all = (part.N + per - 1) / per;
  const int64_t t0 = j * all / warps, t1 = (j + 1) * all / warps;
  const int64_t n0 = t0 * per, n1 = t1 * per < part.N ? t1 * per : part.N, count = n1 - n0;
  const KPart& up = P.p[1];
  // ~8 KiB of the range into L2 (per weight read).
  const int64_t ahead = count < 4 ? count : 4;
  const size_t pull = ahead * part.row_bytes < 8192 ? ahead * part.row_bytes : 8192;
  if (E != Epi::gated_up) prefetch_l2(part.w + size_t(n0) * part.row_bytes, pull, lane);
  if (!stores(E)) prefetch_l2(up.w + size_t(n0) * up.row_bytes, pull, lane);
  if constexpr (stores(E)) {
    static_assert(E == Epi::store || R == 1, "rope_kv takes one activation row");
    RopeWarp* rw = nullptr;
    if constexpr (E == Epi::rope_kv) {
      rw = rope_warp_slots() + threadIdx.x / kWarpSize;
      rope_warp_prepare(P.rope, part, n0, t1 - t0, *rw, lane);
    }
    stream_tiles<T, R, TR>(
        int(t1 - t0), x.K, x, lane,
        [&](int i, int p) {
          const int64_t n = n0 + TR * i + p;
          return part.w + size_t(n < n1 ? n : n1 - 1) * part.row_bytes;
        },
        [&](int i, const float (&acc)[R][TR]) {
          if (lane != 0) return;
          const KPart part = select_part<kParam>(P, pi);  // again, rather than held in registers
          if constexpr (E == Epi::rope_kv) {
            const int64_t n = n0 + TR * i;
            rope_kv_out(P.rope, part, *rw, i, n, acc[0][0], acc[0][1], n + 1 < n1);
          } else {
#pragma unroll
            for (int p = 0; p < TR; ++p) {
              const int64_t n = n0 + TR * i + p;
              if (n >= n1) break;
#pragma unroll
              for (int r = 0; r < R; ++r) {
                const float res = part.residual ? part.residual[r * part.ld_residual + n] : 0.f;
                part.y[r * part.ldy + n] = part.residual ? acc[r][p] + res : acc[r][p];
              }
            }
          }
        },
        wait);
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
    if (!P.q8.codes || !completes_q8_group(n, n0, n1, P.q8.counters, lane)) return;
    const int64_t group = n / kQ8Block, e = group * kQ8Block + lane, N = part.N;
#pragma unroll
    for (int r = 0; r < R; ++r)
      quantize_q8_1_block(__ldcg(part.y + r * part.ldy + e), P.q8.codes + r * N + e, P.q8.ds + r * (N / kQ8Block) + group,
                          lane);
  };
  if constexpr (E == Epi::gated && TR == 2) {  // tiles of gate row n and up row n
    stream_tiles<T, R, 2>(
        int(count), x.K, x, lane,
        [&](int i, int p) { return p ? up.w + size_t(n0 + i) * up.row_bytes : part.w + size_t(n0 + i) * part.row_bytes; },
        [&](int i, const float (&acc)[R][2]) {
          float gate[R], upv[R];
#pragma unroll
          for (int r = 0; r < R; ++r) gate[r] = acc[r][0], upv[r] = acc[r][1];
          out(n0 + i, gate, upv);
        },
        wait);
  } else if constexpr (E == Epi::gated) {  // tiles of one row: gate row n, up row n, gate row n + 1, ...
    float gate[R];
    stream_tiles<T, R, 1>(
        int(2 * count), x.K, x, lane,
        [&](int i, int) {
          const KPart& p = i % 2 ? up : part;
          return p.w + size_t(n0 + i / 2) * p.row_bytes;
        },
        [&](int i, const float (&acc)[R][1]) {
          float upv[R];
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (i % 2 == 0) gate[r] = acc[r][0];
            upv[r] = acc[r][0];
          }
          if (i % 2) out(n0 + i / 2, gate, upv);
        },
        wait);
  } else {  // the up rows; the gate's sums are in the output
    stream_tiles<T, R, 1>(
        int(count), x.K, x, lane, [&](int i, int) { return up.w + size_t(n0 + i) * up.row_bytes; },
        [&](int i, const float (&acc)[R][1]) {
          float gate[R] = {}, upv[R];
#pragma unroll
          for (int r = 0; r < R; ++r) upv[r] = acc[r][0];
          if (lane == 0)
#pragma unroll
            for (int r = 0; r < R; ++r) gate[r] = part.y[r * part.ldy + n0 + i];
          out(n0 + i, gate, upv);
        },
        wait);
  }
}


// A launch's parts as the kernels take them (warps not yet assigned), after the checks every
// launch makes (cuda_invalid on a violation); *out_rows: the output rows (gated: the gate's).
Parts make_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, int64_t rows, const GatedQ8& q8,
                 const RopeKvOut* rope, int64_t* out_rows);

inline double part_bytes(const KPart& m) { return double(m.N) * double(m.row_bytes); }

// A store launch's parts split by weight type (each type's kernel has its own registers): f(same,
// share) for each type in order of first appearance, `same` its parts, `share` their part of the
// launch's bytes.
template <class F>
void for_each_type(const Parts& P, F f) {
  double total = 0;
  for (int i = 0; i < P.n; ++i) total += part_bytes(P.p[i]);
  bool done[kMaxParts] = {};
  for (int i = 0; i < P.n; ++i) {
    if (done[i]) continue;
    Parts same = P;
    same.n = 0;
    double bytes = 0;
    for (int k = i; k < P.n; ++k)
      if (!done[k] && P.p[k].type == P.p[i].type) same.p[same.n++] = P.p[k], bytes += part_bytes(P.p[k]), done[k] = true;
    f(same, bytes / total);
  }
}

// Spreads `budget` warps over the parts in proportion to their bytes, at least one and at most
// one a tile each (store: a pair of rows; gated: a gate row; rope_kv: enough for RopeWarp's
// angles), into P.warp_end and P.warps.
template <int R, Epi E>
void assign_warps(Parts& P, double budget) {
  const int parts = stores(E) ? P.n : 1;
  double bytes = 0;
  for (int i = 0; i < parts; ++i) bytes += part_bytes(P.p[i]);
  int64_t end = 0;
  for (int i = 0; i < parts; ++i) {
    const int64_t tiles = stores(E) ? (P.p[i].N + kTile<R> - 1) / kTile<R> : P.p[i].N;  // as matmul_warp's
    const int64_t least = E == Epi::rope_kv ? (tiles + kRopeTiles - 1) / kRopeTiles : 1;
    end += std::clamp(int64_t(std::llround(budget * part_bytes(P.p[i]) / bytes)), least, tiles);
    P.warp_end[i] = end;
  }
  for (int i = parts; i < kMaxParts; ++i) P.warp_end[i] = end;
  P.warps = end;
}

}  // namespace loom::backend::cuda
