// Attention over the paged f16 KV cache. kv_store writes a step's keys and values at their
// positions; attention gives each (row, query head) one block of kWarps warps: warp w walks
// positions lo + w, lo + w + kWarps, ... with an online softmax (running max and sum), each
// lane holding head_dim / 32 query and value_dim / 32 accumulator elements, and the warps'
// partial results are merged at the end. Exact softmax semantics, fp32 arithmetic throughout.
#include <cuda_fp16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarps = 4;

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

template <int HD, int VD>
__global__ void __launch_bounds__(kWarps * kWarpSize)
    attention_kernel(AttentionShape a, KvView kv, StepTables st, const float* __restrict__ q, float* __restrict__ out) {
  constexpr int QL = HD / kWarpSize, VL = VD / kWarpSize;
  const int64_t r = blockIdx.x / a.n_head;
  const int h = blockIdx.x % a.n_head, g = h / (a.n_head / a.n_kv);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int32_t seq = st.seq_of_row[r], p = st.pos_of_row[r];
  const int32_t lo = a.window > 0 ? max(0, p - a.window + 1) : 0;

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
  float* orow = out + r * int64_t(a.n_head) * VD + int64_t(h) * VD;
#pragma unroll
  for (int i = 0; i < VL; ++i) orow[lane + i * kWarpSize] = o[i] / lt;
}

template <int HD, int VD>
void launch_attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                      int64_t rows, cudaStream_t s) {
  attention_kernel<HD, VD><<<unsigned(rows * a.n_head), kWarps * kWarpSize, 0, s>>>(a, kv, st, q, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_store(const KvView& kv, const StepTables& st, const float* k, const float* v, int64_t rows, cudaStream_t s) {
  const int64_t n = rows * (kv.k_width + kv.v_width);
  if (n <= 0) return;
  kv_store_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(kv, st, k, v, rows);
  LOOM_CUDA_CHECK_LAUNCH();
}

void attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
               int64_t rows, cudaStream_t s) {
  if (a.n_kv <= 0 || a.n_head % a.n_kv) cuda_invalid("attention: n_head must be a multiple of n_kv_head");
  if (rows <= 0) return;
  const int hd = a.head_dim, vd = a.value_dim;
  if (hd != vd) cuda_invalid("attention: head_dim != value_dim has no kernel");
  switch (hd) {
    case 64: launch_attention<64, 64>(a, kv, st, q, out, rows, s); break;
    case 128: launch_attention<128, 128>(a, kv, st, q, out, rows, s); break;
    case 256: launch_attention<256, 256>(a, kv, st, q, out, rows, s); break;
    default: cuda_invalid("attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace loom::backend::cuda
