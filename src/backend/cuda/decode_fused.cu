// Kernels that do in one launch what a decode layer otherwise does in two or three (the plan's
// decode fusion, decode_fusion.h): the RMS norm that also quantizes its output for the
// integer-dot matmuls after it, and the rotary embedding of queries and keys together with the
// store of keys and values into the paged cache. Each computes the same values, in the same
// order of operations, as the unfused kernels (pointwise.cu, q8_1.cuh, rope.cu, attention.cu).
#include <cuda_fp16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kThreads = 256;  // as rms_norm_kernel's: block_sum_squares adds in an order set by the block size

// Blocks (row, part): each block of a row takes the row's sum of squares (every block the same
// bits: the order is set by the block size alone), then its warps normalise and quantize their
// share of the row's 32-element blocks (q8_1.cuh). With one block per row, a decode step's
// 4096-wide norm was one block walking 128 blocks of 32 — ~20 us on the 8B shape (ncu), the
// second-largest cost of its step after the matmuls; split, each warp takes about one.
__global__ void rms_norm_q8_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps,
                                   float* __restrict__ out, int64_t cols, int8_t* __restrict__ q,
                                   float2* __restrict__ ds) {
  allow_next_kernel();
  wait_previous_kernel();
  const float* xg = x + int64_t(blockIdx.x) * cols;
  float* og = out + int64_t(blockIdx.x) * cols;
  const float s = rsqrtf(block_sum_squares<kThreads>(xg, cols) / float(cols) + eps);
  const int lane = threadIdx.x % kWarpSize;
  const int64_t blocks = cols / 32, warps = blockDim.x / kWarpSize;
  for (int64_t b = blockIdx.y * warps + threadIdx.x / kWarpSize; b < blocks; b += gridDim.y * warps) {
    const int64_t c = b * 32 + lane;
    const float v = xg[c] * s * w[c];
    og[c] = v;
    quantize_q8_1_block(v, q + int64_t(blockIdx.x) * cols + c, ds + int64_t(blockIdx.x) * blocks + b, lane);
  }
}

// One thread per (row, head slot, pair j < head_dim / 2). Slots: the n_head query heads (roped
// into q_out), the key heads (roped, stored as f16), then the value row in head_dim-wide
// pieces (stored). Threads past the rotated pairs of a head move its pass-through dimensions,
// two each.
__global__ void rope_kv_store_kernel(RopeSpec rs, RopeAngles angles, const float* __restrict__ q, int64_t n_head,
                                     float* __restrict__ q_out, const float* __restrict__ k,
                                     const float* __restrict__ v, KvView kv, StepTables st, int64_t rows) {
  allow_next_kernel();
  wait_previous_kernel();
  const int64_t hd = rs.head_dim, half_hd = hd / 2, half_rot = rs.n_rot / 2;
  const int64_t n_kv = kv.k_width / hd, v_slots = (kv.v_width + hd - 1) / hd;
  const int64_t slots = n_head + n_kv + v_slots;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tid >= rows * slots * half_hd) return;
  const int64_t j = tid % half_hd, slot = (tid / half_hd) % slots, r = tid / (half_hd * slots);
  const int32_t pos = st.pos_of_row[r];
  if (slot >= n_head + n_kv) {  // values: elements 2j, 2j + 1 of this piece
    const int64_t row = kv_row(st, st.seq_of_row[r], pos, kv.block_size);
    const int64_t c0 = (slot - n_head - n_kv) * hd + 2 * j;
    for (int64_t c = c0; c < c0 + 2 && c < kv.v_width; ++c)
      kv.v[row * kv.v_width + c] = __float2half_rn(v[r * kv.v_width + c]);
    return;
  }
  const bool is_q = slot < n_head;
  const int64_t width = is_q ? n_head * hd : kv.k_width;
  const float* xh = (is_q ? q : k) + r * width + (is_q ? slot : slot - n_head) * hd;
  int64_t i0, i1;
  float y0, y1;
  if (j < half_rot) {
    i0 = rs.neox ? j : 2 * j;
    i1 = rs.neox ? j + half_rot : 2 * j + 1;
    float c, s;
    angles.cos_sin(pos, j, c, s);
    rotate_pair(xh[i0], xh[i1], c, s, y0, y1);
  } else {
    i0 = rs.n_rot + 2 * (j - half_rot);
    i1 = i0 + 1;
    y0 = xh[i0];
    y1 = xh[i1];
  }
  if (is_q) {
    float* o = q_out + r * width + slot * hd;
    o[i0] = y0;
    o[i1] = y1;
  } else {
    const int64_t row = kv_row(st, st.seq_of_row[r], pos, kv.block_size);
    __half* o = kv.k + row * kv.k_width + (slot - n_head) * hd;
    o[i0] = __float2half_rn(y0);
    o[i1] = __float2half_rn(y1);
  }
}

}  // namespace

void rms_norm_q8(const float* x, const float* w, float eps, float* out, int64_t rows, int64_t cols, int8_t* q,
                 float2* ds, cudaStream_t s) {
  if (cols <= 0 || cols % 32) cuda_invalid("rms_norm_q8: the row width must be a multiple of 32");
  if (rows <= 0) return;
  const int64_t parts = (cols / 32 + kThreads / kWarpSize - 1) / (kThreads / kWarpSize);  // ~one 32-block per warp
  launch(rms_norm_q8_kernel, dim3(unsigned(rows), unsigned(parts)), dim3(kThreads), s, x, w, eps, out, cols, q, ds);
}

void rope_kv_store(const RopeSpec& rs, const float* q, int64_t n_head, float* q_out, const float* k, const float* v,
                   const KvView& kv, const StepTables& st, int64_t rows, cudaStream_t s) {
  const int64_t hd = rs.head_dim;
  if (hd <= 0 || hd % 2 || rs.n_rot <= 0 || rs.n_rot > hd || rs.n_rot % 2 || kv.k_width % hd)
    cuda_invalid("rope_kv_store: head_dim must be even and divide the key width, n_rot even and <= head_dim");
  const int64_t slots = n_head + kv.k_width / hd + (kv.v_width + hd - 1) / hd;
  const int64_t n = rows * slots * (hd / 2);
  if (n <= 0) return;
  const RopeAngles angles{powf(rs.base, -2.0f / float(rs.n_rot)), rs.freq_scale, rs.ff};
  launch(rope_kv_store_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), s, rs, angles, q, n_head, q_out, k, v, kv, st,
         rows);
}

}  // namespace loom::backend::cuda
