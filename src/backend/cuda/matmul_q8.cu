// Integer-dot matrix-vector products for decode and small batches (as llama.cpp's mmvq): the
// activations are quantized once per step to q8_1 (32 int8 codes, a float scale d and the
// float sum d * sum(codes) per 32 elements), and each weight "unit" (a 16- or 32-byte run of
// quants with its scales) is dotted with them by 4-way int8 dot products, so a weight byte
// costs ~1 integer instruction per activation row instead of a dequantize-and-FMA per element.
// One warp per weight row; lane l takes units l, l + 32, ...; every quant read is a 16-byte
// load from the packed layout (packed_layout.h). The warp's partial sums meet in a warp
// reduction; rows > kMaxRows run in passes that re-read the weights (batches of at least an
// MmaPath's min_rows go to the tensor-core kernel instead, matmul_mma.cu). One launch may cover
// several weights that read the same activations (q, k and v; gate and up), of any types, and
// end in an epilogue: a residual added to the result, or the gate's activation times up.
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

// Q4_0 / Q4_1: one unit per block; quant byte j holds element j (low nibble) and j + 16 (high).
template <TensorType T> struct Legacy4 {
  static constexpr int kPerBlock = 1;
  template <int R>
  __device__ static void dot(const uint8_t* row, int nb, int u, const XRows& x, float (&acc)[R]) {
    constexpr PackedLayout L = packed_layout(T);
    const int4 q = load16(row + size_t(u) * 16);
    const int qa[4] = {q.x, q.y, q.z, q.w};
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) lo[i] = lo4(qa[i]), hi[i] = hi4(qa[i]);
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * L.aux_bytes();
    const float d = half_u16(u16_aligned(aux));
    const float m = T == TensorType::Q4_1 ? half_u16(u16_aligned(aux + 2)) : 0.f;
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
  template <int R>
  __device__ static void dot(const uint8_t* row, int nb, int u, const XRows& x, float (&acc)[R]) {
    const int4 q = load16(row + size_t(u) * 16);
    const int qa[4] = {q.x, q.y, q.z, q.w};
    const uint8_t* aux = row + size_t(nb) * 16 + size_t(u) * 6;
    const float d = half_u16(u16_aligned(aux));
    const uint32_t qh = uint32_t(u16_aligned(aux + 2)) | (uint32_t(u16_aligned(aux + 4)) << 16);
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
  template <int R>
  __device__ static void dot(const uint8_t* row, int nb, int u, const XRows& x, float (&acc)[R]) {
    const int4 q0 = load16(row + size_t(u) * 32), q1 = load16(row + size_t(u) * 32 + 16);
    const int a[4] = {q0.x, q0.y, q0.z, q0.w}, b[4] = {q1.x, q1.y, q1.z, q1.w};
    const float d = half_u16(u16_aligned(row + size_t(nb) * 32 + size_t(u) * 2));
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
  static constexpr int kPerBlock = 4;
  template <int R>
  __device__ static void dot(const uint8_t* row, int, int u, const XRows& x, float (&acc)[R]) {
    constexpr bool five = T == TensorType::Q5_K;
    const uint8_t* b = row + size_t(u / 4) * (five ? 176 : 144);
    const int c = u % 4;
    const int4 head = load16(b);  // d, dmin, 12 bytes of 6-bit scales and mins
    const uint8_t* qs = b + (five ? 48 : 16) + 32 * c;
    const int4 q0 = load16(qs), q1 = load16(qs + 16);
    const int qa[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int lo[2][4], hi[2][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) lo[i / 4][i % 4] = lo4(qa[i]), hi[i / 4][i % 4] = hi4(qa[i]);
    if constexpr (five) {
      const int4 h0 = load16(b + 16), h1 = load16(b + 32);
      const int ha[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        lo[i / 4][i % 4] |= ((ha[i] >> (2 * c)) & 0x01010101) << 4;
        hi[i / 4][i % 4] |= ((ha[i] >> (2 * c + 1)) & 0x01010101) << 4;
      }
    }
    float sc0, m0, sc1, m1;
    scale_min(2 * c, head, sc0, m0);
    scale_min(2 * c + 1, head, sc1, m1);
    const float d = half_u16(uint16_t(head.x)), dmin = half_u16(uint16_t(uint32_t(head.x) >> 16));
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
  template <int R>
  __device__ static void dot(const uint8_t* row, int nb, int u, const XRows& x, float (&acc)[R]) {
    const int blk = u / 4, h = (u % 4) / 2, l0 = 16 * (u % 2);
    const uint8_t* qb = row + size_t(blk) * 192;
    const int4 a4 = load16(qb + 64 * h + l0), b4 = load16(qb + 64 * h + 32 + l0), h4 = load16(qb + 128 + 32 * h + l0);
    const int A[4] = {a4.x, a4.y, a4.z, a4.w}, B[4] = {b4.x, b4.y, b4.z, b4.w}, H[4] = {h4.x, h4.y, h4.z, h4.w};
    int v[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[0][i] = sub4(lo4(A[i]) | ((H[i] & 0x03030303) << 4), 0x20202020);
      v[1][i] = sub4(lo4(B[i]) | (((H[i] >> 2) & 0x03030303) << 4), 0x20202020);
      v[2][i] = sub4(hi4(A[i]) | (((H[i] >> 4) & 0x03030303) << 4), 0x20202020);
      v[3][i] = sub4(hi4(B[i]) | (((H[i] >> 6) & 0x03030303) << 4), 0x20202020);
    }
    const uint8_t* aux = row + size_t(nb) * 192 + size_t(blk) * 18;
    const int8_t* sc = reinterpret_cast<const int8_t*>(aux) + 8 * h + l0 / 16;
    const float d = half_u16(u16_aligned(aux + 16));
    const int64_t e = int64_t(blk) * 256 + 128 * h + l0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float t = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) t += float(sc[2 * k]) * x.scale(r, e + 32 * k).x * float(dot16(v[k], x.codes16(r, e + 32 * k)));
      acc[r] += d * t;
    }
  }
};

// The dot products of one weight row with R activation rows, by units of its type.
template <TensorType T, int R>
__device__ __forceinline__ void row_dot(const uint8_t* row, int64_t K, int lane, const XRows& x, float (&acc)[R]) {
  const int nb = int(K / packed_layout(T).elems);
  const int units = nb * Unit<T>::kPerBlock;
#pragma unroll 2
  for (int u = lane; u < units; u += kWarpSize) Unit<T>::template dot<R>(row, nb, u, x, acc);
}

template <int R>
__device__ __forceinline__ void row_dot(TensorType t, const uint8_t* row, int64_t K, int lane, const XRows& x,
                                        float (&acc)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  switch (t) {  // uniform across the warp: one row, one type
    case TensorType::Q4_0: row_dot<TensorType::Q4_0, R>(row, K, lane, x, acc); break;
    case TensorType::Q4_1: row_dot<TensorType::Q4_1, R>(row, K, lane, x, acc); break;
    case TensorType::Q5_0: row_dot<TensorType::Q5_0, R>(row, K, lane, x, acc); break;
    case TensorType::Q8_0: row_dot<TensorType::Q8_0, R>(row, K, lane, x, acc); break;
    case TensorType::Q4_K: row_dot<TensorType::Q4_K, R>(row, K, lane, x, acc); break;
    case TensorType::Q5_K: row_dot<TensorType::Q5_K, R>(row, K, lane, x, acc); break;
    case TensorType::Q6_K: row_dot<TensorType::Q6_K, R>(row, K, lane, x, acc); break;
    default: break;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
}

// The gate and up rows of a gated launch together when they share a type (as Q4_K_M files
// store them): one loop whose iterations issue both rows' loads before either's dot products,
// so each lane has twice the independent loads in flight; each row's sums are taken in the
// same order as row_dot's, so the results are the same bits.
template <TensorType T, int R>
__device__ __forceinline__ void row_dot_pair(const uint8_t* row0, const uint8_t* row1, int64_t K, int lane,
                                             const XRows& x, float (&acc0)[R], float (&acc1)[R]) {
  const int nb = int(K / packed_layout(T).elems);
  const int units = nb * Unit<T>::kPerBlock;
#pragma unroll 2
  for (int u = lane; u < units; u += kWarpSize) {
    Unit<T>::template dot<R>(row0, nb, u, x, acc0);
    Unit<T>::template dot<R>(row1, nb, u, x, acc1);
  }
}

template <int R>
__device__ __forceinline__ void row_dot_pair(TensorType t0, const uint8_t* row0, TensorType t1, const uint8_t* row1,
                                             int64_t K, int lane, const XRows& x, float (&acc0)[R], float (&acc1)[R]) {
  if (t0 != t1) {
    row_dot<R>(t0, row0, K, lane, x, acc0);
    row_dot<R>(t1, row1, K, lane, x, acc1);
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = 0.f;
  switch (t0) {
    case TensorType::Q4_0: row_dot_pair<TensorType::Q4_0, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q4_1: row_dot_pair<TensorType::Q4_1, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q5_0: row_dot_pair<TensorType::Q5_0, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q8_0: row_dot_pair<TensorType::Q8_0, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q4_K: row_dot_pair<TensorType::Q4_K, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q5_K: row_dot_pair<TensorType::Q5_K, R>(row0, row1, K, lane, x, acc0, acc1); break;
    case TensorType::Q6_K: row_dot_pair<TensorType::Q6_K, R>(row0, row1, K, lane, x, acc0, acc1); break;
    default: break;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc0[r] = warp_sum(acc0[r]), acc1[r] = warp_sum(acc1[r]);
}

constexpr int kMaxParts = 4;
struct Parts {  // the launch's weights: warp g < end[0] takes row g of part 0, then part 1, ...
  MatmulPart p[kMaxParts];
  int64_t end[kMaxParts];
  int64_t total;  // warps that have a row: end[n - 1]
  int n;
  MatmulEpilogue epilogue;
  GatedQ8 q8;     // gated epilogues: also the output's q8_1 form, when q8.codes is set
};

// One warp per output row of one part (store), or per row of the gate and up parts together
// (swiglu, geglu: y = act(gate) * up into part 0's output). The weight rows are pulled into L2
// before waiting for the previous kernel (launch.cuh), the activations read after.
// Gated launches are their own instantiation (Glu): their paired loop needs more registers, which
// would otherwise lower the occupancy of every store launch.
template <int R, bool Glu>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize) matmul_q8_kernel(Parts P, XRows x) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t g = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  // The part and its first warp, by unrolled selects (a run-time index into the parameter
  // array would copy it to local memory).
  MatmulPart part = P.p[0];
  int64_t first = 0;
#pragma unroll
  for (int i = 1; i < kMaxParts; ++i)
    if (i < P.n && g >= P.end[i - 1]) part = P.p[i], first = P.end[i - 1];
  constexpr bool glu = Glu;
  const bool live = g < P.total;
  const int64_t n = g - first;
  const uint8_t* row = part.w + size_t(n) * part.row_bytes;
  if (live) {
    prefetch_l2(row, part.row_bytes, lane);
    if (glu) prefetch_l2(P.p[1].w + size_t(n) * P.p[1].row_bytes, P.p[1].row_bytes, lane);
  }
  allow_next_kernel();
  wait_previous_kernel();
  if (!live) return;
  float acc[R];
  if constexpr (glu) {
    float up[R];
    row_dot_pair<R>(part.type, row, P.p[1].type, P.p[1].w + size_t(n) * P.p[1].row_bytes, x.K, lane, x, acc, up);
#pragma unroll
    for (int r = 0; r < R; ++r)
      acc[r] = (P.epilogue == MatmulEpilogue::swiglu ? silu(acc[r]) : gelu_tanh(acc[r])) * up[r];
  } else {
    row_dot<R>(part.type, row, x.K, lane, x, acc);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float res = part.residual ? part.residual[r * part.ld_residual + n] : 0.f;
      part.y[r * part.ldy + n] = part.residual ? acc[r] + res : acc[r];
    }
  }
  if (!glu || !P.q8.codes) return;
  // The warp that completes a group of 32 outputs quantizes it (so the down projection needs
  // no quantize kernel): each warp publishes its outputs (fence) and counts itself in; the
  // 32nd reads the group back from L2 and resets the counter for the next launch.
  int done = 0;
  if (lane == 0) {
    __threadfence();
    done = atomicAdd(P.q8.counters + n / 32, 1) == kWarpSize - 1;
  }
  if (!shfl(done, 0)) return;
  __threadfence();
  const int64_t e = n / 32 * 32 + lane, N = P.total;
#pragma unroll
  for (int r = 0; r < R; ++r)
    quantize_q8_1_block(__ldcg(part.y + r * part.ldy + e), P.q8.codes + r * N + e, P.q8.ds + r * (N / 32) + n / 32, lane);
  if (lane == 0) P.q8.counters[n / 32] = 0;
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

template <int R>
void launch_rows(const Parts& P, const XRows& x, cudaStream_t s) {
  const dim3 grid(unsigned((P.total + kWarpsPerBlock - 1) / kWarpsPerBlock));
  if (P.epilogue == MatmulEpilogue::store)
    launch(matmul_q8_kernel<R, false>, grid, dim3(kWarpsPerBlock * kWarpSize), s, P, x);
  else
    launch(matmul_q8_kernel<R, true>, grid, dim3(kWarpsPerBlock * kWarpSize), s, P, x);
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
                     const float2* ds, int64_t rows, cudaStream_t s, const GatedQ8& q8, const MmaPath& mma) {
  if (n_parts < 1 || n_parts > kMaxParts) cuda_invalid("matmul_q8_parts: 1 to 4 weights per launch");
  if (e != MatmulEpilogue::store && (n_parts != 2 || parts[0].N != parts[1].N || parts[0].residual))
    cuda_invalid("matmul_q8_parts: a gated epilogue takes two weights (gate, up) of equal rows and no residual");
  Parts P{};
  P.n = n_parts;
  P.epilogue = e;
  P.q8 = q8;
  int64_t end = 0;
  for (int i = 0; i < n_parts; ++i) {
    const MatmulPart& m = parts[i];
    if (!has_q8_kernel(m.type, K)) cuda_invalid("matmul_q8: no integer-dot kernel for this weight type and K");
    if (m.row_bytes % 16 != 0) cuda_invalid("matmul_q8: packed rows must be 16-byte multiples");
    P.p[i] = m;
    end += e == MatmulEpilogue::store || i == 0 ? m.N : 0;
    P.end[i] = end;
  }
  P.total = end;
  if (q8.codes && (e == MatmulEpilogue::store || end % 32 || !q8.ds || !q8.counters))
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
      case 1: launch_rows<1>(Pr, x, s); break;
      case 2: launch_rows<2>(Pr, x, s); break;
      case 3: launch_rows<3>(Pr, x, s); break;
      case 4: launch_rows<4>(Pr, x, s); break;
      case 5: launch_rows<5>(Pr, x, s); break;
      case 6: launch_rows<6>(Pr, x, s); break;
      case 7: launch_rows<7>(Pr, x, s); break;
      default: launch_rows<8>(Pr, x, s); break;
    }
  }
}

void matmul_q8(TensorType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K, const int8_t* q, const float2* ds,
               int64_t rows, float* y, int64_t ldy, cudaStream_t s) {
  const MatmulPart part{t, w, row_bytes, N, y, ldy};
  matmul_q8_parts(&part, 1, MatmulEpilogue::store, K, q, ds, rows, s);
}

}  // namespace loom::backend::cuda
