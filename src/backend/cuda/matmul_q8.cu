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

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_q8.cuh"
#include "backend/cuda/packed_layout.h"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kMaxRows = 8;
constexpr int kMinBlocks = 4;  // blocks an SM a decode kernel (one activation row) keeps registers for: <= 128 a thread

// One launch of matmul_warp (matmul_q8.cuh) over its grid. One instantiation per weight type, so
// that each type's registers set its own occupancy.
template <TensorType T, int R, Epi E>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize, R == 1 ? kMinBlocks : 3) matmul_q8_kernel(Parts P, XRows x) {
  allow_next_kernel();
  matmul_warp<T, R, E>(P, x, int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize, threadIdx.x % kWarpSize,
                       [] { wait_previous_kernel(); });
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
    int blocks = 0;
    LOOM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, matmul_q8_kernel<T, R, E>,
                                                                  kWarpsPerBlock * kWarpSize, 0));
    return int64_t(blocks > 0 ? blocks : 1) * device_sms() * kWarpsPerBlock;
  }();
  return warps;
}

// Launches parts of type T with epilogue E on `share` of the warps (max_warps, or 0: the
// resident warps).
template <TensorType T, int R, Epi E>
void launch_typed(Parts P, const XRows& x, int64_t max_warps, double share, cudaStream_t s) {
  assign_warps<R, E>(P, double(max_warps > 0 ? max_warps : resident_warps<T, R, E>()) * share);
  launch(matmul_q8_kernel<T, R, E>, dim3(unsigned((P.warps + kWarpsPerBlock - 1) / kWarpsPerBlock)),
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
  for_each_type(P, [&](const Parts& same, double share) {
    if constexpr (R == 1) {
      if (P.rope.head_dim > 0) return launch_of_type<1, Epi::rope_kv>(same, x, max_warps, share, s);
    }
    launch_of_type<R, Epi::store>(same, x, max_warps, share, s);
  });
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

Parts make_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, int64_t rows, const GatedQ8& q8,
                 const RopeKvOut* rope, int64_t* out_rows) {
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
  if (rope) {
    const RopeSpec& r = rope->rope;
    P.rope = {{powf(r.base, -2.0f / float(r.n_rot)), r.freq_scale, r.ff}, r.head_dim, r.n_rot, rope->kv, rope->st};
  }
  *out_rows = end;
  return P;
}

void matmul_q8_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, const int8_t* q,
                     const float2* ds, int64_t rows, cudaStream_t s, const GatedQ8& q8, const MmaPath& mma,
                     int64_t max_warps, const RopeKvOut* rope) {
  int64_t end = 0;  // output rows
  const Parts P = make_parts(parts, n_parts, e, K, rows, q8, rope, &end);
  if (end <= 0) return;
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
