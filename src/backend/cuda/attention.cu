// Attention over the paged f16 KV cache. kv_store writes a step's keys and values at their
// positions; attention gives each (row, query head) one block of kWarps warps: warp w walks
// positions lo + w, lo + w + kWarps, ... with an online softmax (running max and sum), each
// lane holding head_dim / 32 query and value_dim / 32 accumulator elements, and the warps'
// partial results are merged at the end. Exact softmax semantics, fp32 arithmetic throughout.
// Split (flash-decoding) for steps of few rows: one block per (row, head, chunk of kSplit
// positions), each writing its (max, sum, unnormalised output) to scratch, and a combine
// kernel merging the chunks — a decode row over 4,096 positions otherwise runs its 4,096 serial
// steps on 4 warps of 32 blocks while the other multiprocessors idle.
#include <cuda_fp16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxSplitRows = 8;

__device__ __forceinline__ int64_t kv_row(const StepTables& st, int32_t seq, int32_t p, int32_t bs) {
  return int64_t(st.tables[int64_t(seq) * st.max_blocks + p / bs]) * bs + p % bs;
}

__global__ void kv_store_kernel(KvView kv, StepTables st, const float* __restrict__ k, const float* __restrict__ v,
                                int64_t rows) {
  const int64_t width = kv.k_width + kv.v_width;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t r = i / width, c = i % width;
  const int64_t row = kv_row(st, st.seq_of_row[r], st.pos_of_row[r], kv.block_size);
  if (c < kv.k_width) kv.k[row * kv.k_width + c] = __float2half_rn(k[r * kv.k_width + c]);
  else kv.v[row * kv.v_width + (c - kv.k_width)] = __float2half_rn(v[r * kv.v_width + (c - kv.k_width)]);
}

constexpr int kSplit = 64;  // positions per block of the split kernel

// Split == false: one block per (row, head) over all its positions, writing the output.
// Split == true: block (row, head, chunk blockIdx.y) over positions [kSplit * chunk, + kSplit),
// writing {max, sum, out[VD] unnormalised} to part at ((row * n_head + head) * chunks + chunk).
template <int HD, int VD, bool Split>
__global__ void __launch_bounds__(kWarps * kWarpSize)
    attention_kernel(AttentionShape a, KvView kv, StepTables st, const float* __restrict__ q, float* __restrict__ out) {
  constexpr int QL = HD / kWarpSize, VL = VD / kWarpSize;
  const int64_t r = blockIdx.x / a.n_head;
  const int h = blockIdx.x % a.n_head, g = h / (a.n_head / a.n_kv);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int32_t seq = st.seq_of_row[r];
  int32_t p = st.pos_of_row[r];
  int32_t lo = a.window > 0 ? max(0, p - a.window + 1) : 0;
  if constexpr (Split) {
    lo = max(lo, int32_t(blockIdx.y) * kSplit);
    p = min(p, int32_t(blockIdx.y + 1) * kSplit - 1);
  }

  float qv[QL];
  const float* qr = q + r * int64_t(a.n_head) * HD + int64_t(h) * HD;
#pragma unroll
  for (int i = 0; i < QL; ++i) qv[i] = qr[lane + i * kWarpSize];
  float m = -INFINITY, l = 0.f, acc[VL];
#pragma unroll
  for (int i = 0; i < VL; ++i) acc[i] = 0.f;

  for (int32_t j = lo + warp; j <= p; j += kWarps) {
    const int64_t row = kv_row(st, seq, j, kv.block_size);
    const __half* kr = kv.k + row * kv.k_width + int64_t(g) * HD;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < QL; ++i) s += qv[i] * __half2float(kr[lane + i * kWarpSize]);
    s = warp_sum(s);
    if (a.softcap > 0) s = tanhf(s / a.softcap) * a.softcap;
    s *= a.scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), w = expf(s - m_new);
    l = l * corr + w;
    const __half* vr = kv.v + row * kv.v_width + int64_t(g) * VD;
#pragma unroll
    for (int i = 0; i < VL; ++i) acc[i] = acc[i] * corr + w * __half2float(vr[lane + i * kWarpSize]);
    m = m_new;
  }

  __shared__ float sm[kWarps], sl[kWarps], sacc[kWarps][VD];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < VL; ++i) sacc[warp][lane + i * kWarpSize] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float mt = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, sm[w]);
  float lt = 0.f, o[VL];
#pragma unroll
  for (int i = 0; i < VL; ++i) o[i] = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float c = sm[w] == -INFINITY ? 0.f : expf(sm[w] - mt);  // a warp that saw no position
    lt += sl[w] * c;
#pragma unroll
    for (int i = 0; i < VL; ++i) o[i] += sacc[w][lane + i * kWarpSize] * c;
  }
  if constexpr (Split) {
    float* part = out + (int64_t(blockIdx.x) * gridDim.y + blockIdx.y) * (VD + 2);
    if (lane == 0) part[0] = mt, part[1] = lt;  // a chunk with no position: max -inf, sum 0
#pragma unroll
    for (int i = 0; i < VL; ++i) part[2 + lane + i * kWarpSize] = o[i];
  } else {
    float* orow = out + r * int64_t(a.n_head) * VD + int64_t(h) * VD;
#pragma unroll
    for (int i = 0; i < VL; ++i) orow[lane + i * kWarpSize] = o[i] / lt;
  }
}

// One block of VD threads per (row, head): the chunks' partial results merged by their maxima.
template <int VD>
__global__ void attention_combine_kernel(const float* __restrict__ part, int chunks, float* __restrict__ out) {
  const float* pr = part + int64_t(blockIdx.x) * chunks * (VD + 2);
  float mt = -INFINITY;
  for (int c = 0; c < chunks; ++c) mt = fmaxf(mt, pr[c * (VD + 2)]);
  float lt = 0.f, o = 0.f;
  for (int c = 0; c < chunks; ++c) {
    const float m = pr[c * (VD + 2)];
    if (m == -INFINITY) continue;
    const float w = expf(m - mt);
    lt += pr[c * (VD + 2) + 1] * w;
    o += pr[c * (VD + 2) + 2 + threadIdx.x] * w;
  }
  out[int64_t(blockIdx.x) * VD + threadIdx.x] = o / lt;
}

template <int HD, int VD>
void launch_attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                      int64_t rows, int chunks, float* scratch, cudaStream_t s) {
  if (chunks <= 1) {
    attention_kernel<HD, VD, false><<<unsigned(rows * a.n_head), kWarps * kWarpSize, 0, s>>>(a, kv, st, q, out);
    LOOM_CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(unsigned(rows * a.n_head), unsigned(chunks));
  attention_kernel<HD, VD, true><<<grid, kWarps * kWarpSize, 0, s>>>(a, kv, st, q, scratch);
  LOOM_CUDA_CHECK_LAUNCH();
  attention_combine_kernel<VD><<<unsigned(rows * a.n_head), VD, 0, s>>>(scratch, chunks, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

// Chunks of the split kernel for a step (1: no split): split while the rows' blocks alone
// would leave most multiprocessors idle and the positions span more than one chunk.
int split_chunks(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows) {
  const int64_t bound = int64_t(st.max_blocks) * kv.block_size;  // > every position of the step
  if (rows > kMaxSplitRows || bound <= kSplit || rows * a.n_head >= 512) return 1;
  return int((bound + kSplit - 1) / kSplit);
}

}  // namespace

void kv_store(const KvView& kv, const StepTables& st, const float* k, const float* v, int64_t rows, cudaStream_t s) {
  const int64_t n = rows * (kv.k_width + kv.v_width);
  if (n <= 0) return;
  kv_store_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(kv, st, k, v, rows);
  LOOM_CUDA_CHECK_LAUNCH();
}

size_t attention_scratch_floats(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows) {
  const int chunks = split_chunks(a, kv, st, rows);
  return chunks <= 1 ? 0 : size_t(rows * a.n_head) * size_t(chunks) * size_t(a.value_dim + 2);
}

void attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
               int64_t rows, cudaStream_t s, float* scratch, size_t scratch_floats) {
  if (a.n_kv <= 0 || a.n_head % a.n_kv) cuda_invalid("attention: n_head must be a multiple of n_kv_head");
  if (rows <= 0) return;
  const int hd = a.head_dim, vd = a.value_dim;
  if (hd != vd) cuda_invalid("attention: head_dim != value_dim has no kernel");
  const size_t need = attention_scratch_floats(a, kv, st, rows);
  const int chunks = scratch && need > 0 && need <= scratch_floats ? split_chunks(a, kv, st, rows) : 1;
  switch (hd) {
    case 64: launch_attention<64, 64>(a, kv, st, q, out, rows, chunks, scratch, s); break;
    case 128: launch_attention<128, 128>(a, kv, st, q, out, rows, chunks, scratch, s); break;
    case 256: launch_attention<256, 256>(a, kv, st, q, out, rows, chunks, scratch, s); break;
    default: cuda_invalid("attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace loom::backend::cuda
