// Integer-dot matrix-vector products for decode and small batches (as llama.cpp's mmvq): the
// activations are quantized once per step to q8_1 (32 int8 codes, a float scale d and the float sum
// d * sum(codes) per 32 elements), and each weight "unit" (a 16- or 32-byte run of quants with its
// scales) is dotted with them by 4-way int8 dot products, so a weight byte costs ~1 integer
// instruction per activation row instead of a dequantize-and-FMA per element. A warp takes an even,
// contiguous range of a weight's rows (by default the launch has as many warps as the device holds
// at once, so no launch has a partial last wave), and streams it: lane l takes units l, l + 32, ...
// of each row, every quant read is a 16-byte load from the packed layout (packed_layout.h), two
// rows at a time (gate and up, or a pair of rows) share each step's activation loads, and the loads
// run a few steps ahead of the dot products across row boundaries (stream_tiles, q8_stream.cuh). A
// row's partial sums meet in a warp reduction; rows > kMaxRows run in passes that re-read the
// weights (batches of at least an MmaPath's min_rows go to the tensor-core kernel instead,
// matmul_mma.cu). One call may cover several weights that read the same activations (q, k and v;
// gate and up) and end in an epilogue: a residual added to the result, or the gate's activation
// times up. Kernels are instantiated per weight type (each type's registers set its own occupancy):
// weights of one type share a launch, and a call with several types launches once per type, back to
// back.
#include <algorithm>
#include <cmath>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/q8_stream.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxRows = 8;
constexpr int kMinBlocks = 4;  // blocks an SM a decode kernel (one activation row) keeps registers for: <= 128 a thread

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

// Part i of the launch, by unrolled selects (a run-time index into the parameter array would
// copy it to local memory).
__device__ __forceinline__ KPart select_part(const Parts& P, int i) {
  KPart part = P.p[0];
#pragma unroll
  for (int k = 1; k < kMaxParts; ++k)
    if (i == k) part = P.p[k];
  return part;
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

// Before wait_previous_kernel: the step's tables are written before its first kernel starts,
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

// Each warp takes an even, contiguous range of one part's rows (store), or of the gate and up
// rows together, and streams them (stream_tiles). The first rows of the range are pulled into
// L2 and the first steps' loads issued before waiting for the previous kernel (launch.cuh), the
// activations read after. One instantiation per weight type, so that each type's registers set
// its own occupancy.
template <TensorType T, int R, Epi E>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize, R == 1 ? kMinBlocks : 3) matmul_q8_kernel(Parts P, XRows x) {
  allow_next_kernel();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t g = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  // The part, its first warp and its warps, by unrolled selects (a run-time index into the
  // parameter array would copy it to local memory).
  int pi = 0;
  int64_t first = 0, end = P.warp_end[0];
  if constexpr (stores(E)) {
#pragma unroll
    for (int i = 1; i < kMaxParts; ++i)
      if (i < P.n && g >= P.warp_end[i - 1]) pi = i, first = P.warp_end[i - 1], end = P.warp_end[i];
  }
  const KPart part = select_part(P, pi);
  if (g >= P.warps) {
    wait_previous_kernel();
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
      __shared__ RopeWarp rope_warps[kWarpsPerBlock];
      rw = &rope_warps[threadIdx.x / kWarpSize];
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
          const KPart part = select_part(P, pi);  // again, rather than held in registers
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
        });
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
        });
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

double part_bytes(const KPart& m) { return double(m.N) * double(m.row_bytes); }

// Launches parts of type T with epilogue E on `share` of the warps (max_warps, or 0: the
// resident warps), spread over the parts in proportion to their bytes, at least one and at most
// one a tile each (store: a pair of rows; gated: a gate row).
template <TensorType T, int R, Epi E>
void launch_typed(Parts P, const XRows& x, int64_t max_warps, double share, cudaStream_t s) {
  const double budget = double(max_warps > 0 ? max_warps : resident_warps<T, R, E>()) * share;
  const int parts = stores(E) ? P.n : 1;
  double bytes = 0;
  for (int i = 0; i < parts; ++i) bytes += part_bytes(P.p[i]);
  int64_t end = 0;
  for (int i = 0; i < parts; ++i) {
    const int64_t tiles = stores(E) ? (P.p[i].N + kTile<R> - 1) / kTile<R> : P.p[i].N;  // as the kernel's
    const int64_t least = E == Epi::rope_kv ? (tiles + kRopeTiles - 1) / kRopeTiles : 1;  // RopeWarp's angles
    end += std::clamp(int64_t(std::llround(budget * part_bytes(P.p[i]) / bytes)), least, tiles);
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
    if constexpr (R == 1) {
      if (P.rope.head_dim > 0) {
        launch_of_type<1, Epi::rope_kv>(same, x, max_warps, bytes / total, s);
        continue;
      }
    }
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
                     int64_t max_warps, const RopeKvOut* rope) {
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
  if (rope) {
    const RopeSpec& r = rope->rope;
    if (e != MatmulEpilogue::store || rows != 1)
      cuda_invalid("matmul_q8_parts: rope and KV outputs are a store launch's, at one activation row");
    if (r.neox || r.head_dim <= 0 || r.head_dim % 2 || r.n_rot <= 0 || r.n_rot % 2 || r.n_rot > r.head_dim)
      cuda_invalid("matmul_q8_parts: rope in the epilogue rotates pairs (2i, 2i + 1) (not neox), head_dim and n_rot "
                   "even, n_rot <= head_dim");
  }
  for (int i = 0; i < n_parts; ++i) {
    using Out = MatmulPart::Out;
    const MatmulPart& m = parts[i];
    if (m.out == Out::y) continue;
    if (!rope) cuda_invalid("matmul_q8_parts: a part's rope or KV output needs the rope and the KV pool");
    if (m.residual) cuda_invalid("matmul_q8_parts: a rope or KV output takes no residual");
    if (m.out != Out::kv_v && m.N % rope->rope.head_dim) cuda_invalid("matmul_q8_parts: rotated rows are whole heads");
    if ((m.out == Out::rope_k && m.N != rope->kv.k_width) || (m.out == Out::kv_v && m.N != rope->kv.v_width))
      cuda_invalid("matmul_q8_parts: key and value rows are the KV pool's widths");
  }
  if (end <= 0) return;
  if (rope) {
    const RopeSpec& r = rope->rope;
    P.rope = {{powf(r.base, -2.0f / float(r.n_rot)), r.freq_scale, r.ff}, r.head_dim, r.n_rot, rope->kv, rope->st};
  }
  bool tensor_cores = !rope && mma.min_rows > 0 && rows >= mma.min_rows && mma_device();  // rope: one row
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
