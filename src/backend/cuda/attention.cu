// Attention over the paged f16 KV cache. kv_store writes a step's keys and values at their
// positions; attention gives each (row, query head) one block of kWarps warps: warp w walks
// positions lo + w, lo + w + kWarps, ... with an online softmax (running max and sum), each
// lane holding head_dim / 32 query and value_dim / 32 accumulator elements, and the warps'
// partial results are merged at the end. Exact softmax semantics, fp32 arithmetic throughout.
// Split (flash-decoding) for steps of few rows: one block per (row, head, chunk of kSplit
// positions), each writing its (max, sum, unnormalised output) to scratch, and a combine
// kernel merging the chunks — a decode row over 4,096 positions otherwise runs its 4,096 serial
// steps on 4 warps of 32 blocks while the other multiprocessors idle. Each warp loads the keys
// and values of several positions before using them (kBatch), so their loads overlap.
#include <cuda_fp16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxSplitRows = 8;

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
    attention_kernel(AttentionShape a, KvView kv, StepTables st, const float* __restrict__ q, float* __restrict__ out,
                     int8_t* __restrict__ q8, float2* __restrict__ q8_ds) {
  constexpr int QL = HD / kWarpSize, VL = VD / kWarpSize;
  allow_next_kernel();
  wait_previous_kernel();
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

  // Each warp takes kBatch of its positions per pass (j0, j0 + kWarps, ...): their key and value
  // loads are all in flight before the first dot product needs one, instead of one position's
  // loads at a time (the latency of a dependent load per position bounded long contexts).
  constexpr int kBatch = HD <= 128 ? 8 : 4;
  for (int32_t j0 = lo + warp; j0 <= p; j0 += kWarps * kBatch) {
    int64_t row[kBatch];
    float s[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int32_t j = min(j0 + b * kWarps, p);  // past p: a valid row, masked below
      row[b] = kv_row(st, seq, j, kv.block_size);
    }
    __half kf[kBatch][QL], vf[kBatch][VL];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const __half* kr = kv.k + row[b] * kv.k_width + int64_t(g) * HD;
      const __half* vr = kv.v + row[b] * kv.v_width + int64_t(g) * VD;
#pragma unroll
      for (int i = 0; i < QL; ++i) kf[b][i] = kr[lane + i * kWarpSize];
#pragma unroll
      for (int i = 0; i < VL; ++i) vf[b][i] = vr[lane + i * kWarpSize];
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float d = 0.f;
#pragma unroll
      for (int i = 0; i < QL; ++i) d += qv[i] * __half2float(kf[b][i]);
      s[b] = d;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) s[b] = warp_sum(s[b]);
    float m_new = m;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (a.softcap > 0) s[b] = tanhf(s[b] / a.softcap) * a.softcap;
      s[b] = j0 + b * kWarps <= p ? s[b] * a.scale : -INFINITY;
      m_new = fmaxf(m_new, s[b]);
    }
    // Position j0 is always in range, so m_new is finite.
    const float corr = expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int i = 0; i < VL; ++i) acc[i] *= corr;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const float w = expf(s[b] - m_new);  // 0 for masked positions
      l += w;
#pragma unroll
      for (int i = 0; i < VL; ++i) acc[i] += w * __half2float(vf[b][i]);
    }
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
    const int64_t e0 = r * int64_t(a.n_head) * VD + int64_t(h) * VD;
#pragma unroll
    for (int i = 0; i < VL; ++i) {
      const float v = o[i] / lt;
      out[e0 + lane + i * kWarpSize] = v;
      if (q8) quantize_q8_1_block(v, q8 + e0 + lane + i * kWarpSize, q8_ds + e0 / 32 + i, lane);
    }
  }
}

// One block of VD threads per (row, head): the chunks' partial results merged by their maxima.
template <int VD>
__global__ void attention_combine_kernel(const float* __restrict__ part, int chunks, float* __restrict__ out,
                                         int8_t* __restrict__ q8, float2* __restrict__ q8_ds) {
  allow_next_kernel();
  wait_previous_kernel();
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
  const int64_t e = int64_t(blockIdx.x) * VD + threadIdx.x;  // block (row, head): VD consecutive outputs
  out[e] = o / lt;
  if (q8) quantize_q8_1_block(o / lt, q8 + e, q8_ds + e / 32, threadIdx.x % kWarpSize);
}

template <int HD, int VD>
void launch_attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                      int64_t rows, int chunks, float* scratch, int8_t* q8, float2* q8_ds, cudaStream_t s) {
  const dim3 block(kWarps * kWarpSize);
  if (chunks <= 1) {
    launch(attention_kernel<HD, VD, false>, dim3(unsigned(rows * a.n_head)), block, s, a, kv, st, q, out, q8, q8_ds);
    return;
  }
  const dim3 grid(unsigned(rows * a.n_head), unsigned(chunks));
  launch(attention_kernel<HD, VD, true>, grid, block, s, a, kv, st, q, scratch, static_cast<int8_t*>(nullptr),
         static_cast<float2*>(nullptr));
  launch(attention_combine_kernel<VD>, dim3(unsigned(rows * a.n_head)), dim3(VD), s, static_cast<const float*>(scratch),
         chunks, out, q8, q8_ds);
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
               int64_t rows, cudaStream_t s, float* scratch, size_t scratch_floats, int8_t* q8, float2* q8_ds) {
  if (a.n_kv <= 0 || a.n_head % a.n_kv) cuda_invalid("attention: n_head must be a multiple of n_kv_head");
  if (rows <= 0) return;
  const int hd = a.head_dim, vd = a.value_dim;
  if (hd != vd) cuda_invalid("attention: head_dim != value_dim has no kernel");
  const size_t need = attention_scratch_floats(a, kv, st, rows);
  const int chunks = scratch && need > 0 && need <= scratch_floats ? split_chunks(a, kv, st, rows) : 1;
  switch (hd) {
    case 64: launch_attention<64, 64>(a, kv, st, q, out, rows, chunks, scratch, q8, q8_ds, s); break;
    case 128: launch_attention<128, 128>(a, kv, st, q, out, rows, chunks, scratch, q8, q8_ds, s); break;
    case 256: launch_attention<256, 256>(a, kv, st, q, out, rows, chunks, scratch, q8, q8_ds, s); break;
    default: cuda_invalid("attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace loom::backend::cuda
