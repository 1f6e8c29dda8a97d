// Attention over the paged f16 KV cache. kv_store writes a step's keys and values at their
// positions. Steps of more than kMaxDecodeRows rows (prefill) give each (row, query head) one
// block of kWarps warps: warp w walks positions lo + w, lo + w + kWarps, ... with an online
// softmax (running max and sum), each lane holding head_dim / 32 query and value_dim / 32
// accumulator elements, and the warps' partial results are merged at the end. Steps of few rows
// (decode), and steps of one row for each sequence (a batch of decodes), run
// attention_decode.cu: one block per (row, KV head, chunk of positions) for all
// the query heads of the group, the chunks merged by a combine kernel when there are several
// (flash-decoding); split_chunks below decides how many. Head dims the decode kernel lacks (32,
// 96) run the prefill kernel at every step. Exact softmax semantics, fp32
// arithmetic throughout. A prompt (more than kMaxDecodeRows rows, all of one sequence) runs
// attention_mma.cu on tensor cores instead when the schedule asks (AttentionShape::tensor_cores).
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/attention_decode.h"
#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxDecodeRows = 8;

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

// One block per (row, head) over all its positions, writing the output (and its q8_1 codes).
template <int HD, int VD>
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
  const int32_t p = st.pos_of_row[r];
  const int32_t lo = a.window > 0 ? max(0, p - a.window + 1) : 0;

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
  const int64_t e0 = r * int64_t(a.n_head) * VD + int64_t(h) * VD;
#pragma unroll
  for (int i = 0; i < VL; ++i) {
    const float v = o[i] / lt;
    out[e0 + lane + i * kWarpSize] = v;
    if (q8) quantize_q8_1_block(v, q8 + e0 + lane + i * kWarpSize, q8_ds + e0 / 32 + i, lane);
  }
}

// Steps the decode kernel takes: few rows, or one row for each sequence (a batch of decodes:
// its rows share no keys, so blocks by (row, KV head) lose no reuse against the prefill
// kernel's blocks by (row, head), and read each key once per group, not once per head).
bool decode_step(const AttentionShape& a, const StepTables& st, int64_t rows) {
  return has_decode_kernel(a.head_dim) && (rows <= kMaxDecodeRows || st.n_seqs == rows);
}

// Chunks of a decode step (1: the decode blocks write the output themselves). Other steps run
// the prefill kernels and need no scratch. Otherwise: as many chunks
// as bring the step to kMaxDecodeChunks blocks, each of at least kMinDecodeChunk positions of
// the table bound. The bound, not the rows' positions (only the device knows those): each row's
// actual positions are split evenly over the chunks, so a bound rounded up idles no block.
int split_chunks(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows) {
  if (!decode_step(a, st, rows)) return 1;
  const int64_t bound = int64_t(st.max_blocks) * kv.block_size;  // > every position of the step
  const int64_t blocks = rows * a.n_kv * group_parts(a);
  const int64_t by_blocks = (kMaxDecodeChunks + blocks - 1) / blocks;
  const int64_t by_bound = (bound + kMinDecodeChunk - 1) / kMinDecodeChunk;
  return int(std::max<int64_t>(1, std::min(by_blocks, by_bound)));
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

int decode_chunks(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows, size_t scratch_floats) {
  if (!decode_step(a, st, rows)) return 0;
  const size_t need = attention_scratch_floats(a, kv, st, rows);
  return need > 0 && need <= scratch_floats ? split_chunks(a, kv, st, rows) : 1;
}

size_t attention_counter_words(const AttentionShape& a, int64_t rows) {
  return a.merge_in_kernel && a.n_kv > 0 ? size_t(rows * a.n_kv * group_parts(a)) : 0;
}

void attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
               int64_t rows, cudaStream_t s, float* scratch, size_t scratch_floats, int8_t* q8, float2* q8_ds,
               unsigned* counters) {
  if (a.n_kv <= 0 || a.n_head % a.n_kv) cuda_invalid("attention: n_head must be a multiple of n_kv_head");
  if (rows <= 0) return;
  const int hd = a.head_dim, vd = a.value_dim;
  if (hd != vd) cuda_invalid("attention: head_dim != value_dim has no kernel");
  if (const int chunks = decode_chunks(a, kv, st, rows, scratch ? scratch_floats : 0)) {
    decode_attention(a, kv, st, q, out, rows, chunks, scratch, a.merge_in_kernel ? counters : nullptr, q8, q8_ds, s);
    return;
  }
  if (a.tensor_cores && (st.n_seqs == 1 || st.tiles) && has_attention_mma(hd) && mma_device()) {
    attention_mma(a, kv, st, q, out, rows, s, q8, q8_ds);
    return;
  }
  const dim3 grid(unsigned(rows * a.n_head)), block(kWarps * kWarpSize);
  switch (hd) {
    case 32: launch(attention_kernel<32, 32>, grid, block, s, a, kv, st, q, out, q8, q8_ds); break;
    case 64: launch(attention_kernel<64, 64>, grid, block, s, a, kv, st, q, out, q8, q8_ds); break;
    case 96: launch(attention_kernel<96, 96>, grid, block, s, a, kv, st, q, out, q8, q8_ds); break;
    case 128: launch(attention_kernel<128, 128>, grid, block, s, a, kv, st, q, out, q8, q8_ds); break;
    case 256: launch(attention_kernel<256, 256>, grid, block, s, a, kv, st, q, out, q8, q8_ds); break;
    default: cuda_invalid("attention: head_dim must be 32, 64, 96, 128 or 256");
  }
}

}  // namespace loom::backend::cuda
