// The device half of attention_decode.cu (decode attention by KV group), shared with the
// persistent decode step (decode_persistent.cu): one block's work on one (row, KV head, chunk),
// and the merge of one (row, head)'s chunks.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention_decode.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

constexpr int kDecodeWarps = 4;
constexpr int kLaneHalves = 8;  // one 16-byte load of f16

__device__ __forceinline__ void halves_to_floats(const uint4& u, float (&f)[kLaneHalves]) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int i = 0; i < kLaneHalves / 2; ++i) {
    const float2 x = __half22float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// One (row, head)'s output from its merged accumulator and sum, a warp's lanes taking elements
// lane, lane + 32, ...; and its q8_1 codes when q8 is set.
template <int HD>
__device__ __forceinline__ void write_head(const float (&o)[HD / kWarpSize], float lt, int64_t rh, float* out,
                                           int8_t* q8, float2* q8_ds, int lane) {
  const int64_t e = rh * HD;
#pragma unroll
  for (int i = 0; i < HD / kWarpSize; ++i) {
    const float v = o[i] / lt;
    out[e + lane + i * kWarpSize] = v;
    if (q8) quantize_q8_1_block(v, q8 + e + lane + i * kWarpSize, q8_ds + e / 32 + i, lane);
  }
}

// Block bx (row, KV head, part of its group) over chunk `by` of `chunks` of the row's positions
// (a kernel's blockIdx and gridDim.y; a persistent step's work items). GM: the most query heads
// a block computes (a power of two >= the heads it has, ng, a runtime count). Every thread of
// the block calls it (it synchronises the block); the caller has waited for q and the KV rows.
template <int HD, int GM>
__device__ __forceinline__ void decode_attention_block(const AttentionShape& a, const KvView& kv, const StepTables& st,
                                                       const float* q, float* out, int8_t* q8, float2* q8_ds,
                                                       float* part, unsigned* counters, unsigned bx, unsigned by,
                                                       unsigned chunks) {
  constexpr int LP = HD / kLaneHalves;  // lanes per position
  constexpr int PP = kWarpSize / LP;    // positions per warp
  constexpr int kSlots = kDecodeWarps * PP;   // positions per block pass
  constexpr int VL = HD / kWarpSize;    // output elements per lane in the final merge
  // Positions per slot and pass; the next pass's are loaded while this one's are used, so a
  // slot has 2 * kBatch positions' loads in flight (fewer for 8 heads: their registers).
  constexpr int kBatch = GM >= 8 ? 2 : 4;
  static_assert(LP <= kWarpSize && kWarpSize % LP == 0, "head_dim: 64, 128 or 256");
  const int group = a.n_head / a.n_kv, parts = (group + kMaxGroupHeads - 1) / kMaxGroupHeads;
  const int64_t r = bx / (a.n_kv * parts);
  const int kvh = int(bx / parts) % a.n_kv, gp = int(bx % parts);
  const int h0 = kvh * group + gp * kMaxGroupHeads, ng = min(GM, group - gp * kMaxGroupHeads);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int slot = warp * PP + lane / LP, e0 = (lane % LP) * kLaneHalves;
  const int32_t seq = st.seq_of_row[r], p = st.pos_of_row[r];
  const int32_t lo_row = a.window > 0 ? max(0, p - a.window + 1) : 0;
  const int32_t per = (p - lo_row + int32_t(chunks)) / int32_t(chunks);  // ceil(span / chunks)
  const int32_t lo = lo_row + int32_t(by) * per, hi = min(p, lo + per - 1);  // lo > hi: empty

  float qv[GM][kLaneHalves];
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    const float* qr = q + (r * a.n_head + h0 + g) * HD + e0;
#pragma unroll
    for (int e = 0; e < kLaneHalves; ++e) qv[g][e] = g < ng ? qr[e] : 0.f;
  }
  float m[GM], l[GM], acc[GM][kLaneHalves];
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    m[g] = -INFINITY, l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < kLaneHalves; ++e) acc[g][e] = 0.f;
  }

  // Softmax in base 2: exp(x) = exp2(x * log2(e)), the factor folded into the scale (a partial's
  // max is in these units too, for the combine kernel).
  const float scale_log2 = a.scale * 1.4426950408889634f, inv_softcap = a.softcap > 0 ? 1.f / a.softcap : 0.f;
  const __half* kbase = kv.k + int64_t(kvh) * HD + e0;
  const __half* vbase = kv.v + int64_t(kvh) * HD + e0;
  // The slot of lane takes positions lo + slot + kSlots * i; the loop bound is the warp's first
  // slot (uniform in the warp, as the shuffles need), and positions past hi are masked.
  uint4 kn[kBatch], vn[kBatch];  // the next pass's keys and values
  // Block sizes are powers of two in practice: a shift and a mask instead of a division.
  const int32_t bs = kv.block_size, bs_shift = __ffs(bs) - 1;
  const bool bs_pow2 = (bs & (bs - 1)) == 0;
  const int32_t* table = st.tables + int64_t(seq) * st.max_blocks;
  auto load = [&](int32_t j0) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int32_t j = min(j0 + (lane / LP) + b * kSlots, hi);  // past hi: a valid row, masked below
      int64_t row;
      if (bs_pow2) row = int64_t(table[j >> bs_shift]) * bs + (j & (bs - 1));
      else row = kv_row(st, seq, j, bs);
      kn[b] = *reinterpret_cast<const uint4*>(kbase + row * kv.k_width);
      vn[b] = *reinterpret_cast<const uint4*>(vbase + row * kv.v_width);
    }
  };
  constexpr int32_t kPass = kSlots * kBatch;
  if (lo + warp * PP <= hi) load(lo + warp * PP);
  for (int32_t j0 = lo + warp * PP; j0 <= hi; j0 += kPass) {
    uint4 kr[kBatch], vr[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) kr[b] = kn[b], vr[b] = vn[b];
    if (j0 + kPass <= hi) load(j0 + kPass);  // in flight while this pass computes
    float s[kBatch][GM];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float kf[kLaneHalves];
      halves_to_floats(kr[b], kf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < kLaneHalves; ++e) d += qv[g][e] * kf[e];
        s[b][g] = d;
      }
    }
    // Every head, padding ones too (their query is 0): no branch around the shuffles, which the
    // compiler would otherwise wrap in convergence barriers. Scores in log2 units (exp2f).
    float mn[GM];
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      mn[g] = m[g];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        float x = lanes_sum<LP>(s[b][g]);
        if (a.softcap > 0) x = tanhf(x * inv_softcap) * a.softcap;
        x = j0 + (lane / LP) + b * kSlots <= hi ? x * scale_log2 : -INFINITY;
        s[b][g] = x;
        mn[g] = fmaxf(mn[g], x);
      }
    }
    // A slot whose positions all lie past hi (and that saw none before) keeps max -inf: its
    // weights are 0 and its state stays as it was.
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      const float corr = mn[g] == -INFINITY ? 1.f : exp2f(m[g] - mn[g]);
      l[g] *= corr;
#pragma unroll
      for (int e = 0; e < kLaneHalves; ++e) acc[g][e] *= corr;
      m[g] = mn[g];
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float vf[kLaneHalves];
      halves_to_floats(vr[b], vf);
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        const float w = mn[g] != -INFINITY ? exp2f(s[b][g] - mn[g]) : 0.f;  // 0 when masked
        l[g] += w;
#pragma unroll
        for (int e = 0; e < kLaneHalves; ++e) acc[g][e] += w * vf[e];
      }
    }
  }

  // Merge the slots in slot order: per head, the maximum over slots, then the rescaled sums.
  __shared__ float sm[kSlots][GM], sl[kSlots][GM];
  __shared__ __align__(16) float sacc[kSlots][GM][HD];
  if (lane % LP == 0) {
#pragma unroll
    for (int g = 0; g < GM; ++g) sm[slot][g] = m[g], sl[slot][g] = l[g];
  }
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    float4* dst = reinterpret_cast<float4*>(&sacc[slot][g][e0]);
    dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
  }
  __syncthreads();
  for (int g = warp; g < ng; g += kDecodeWarps) {
    float mt = -INFINITY;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) mt = fmaxf(mt, sm[k][g]);
    float lt = 0.f, o[VL];
#pragma unroll
    for (int i = 0; i < VL; ++i) o[i] = 0.f;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const float c = sm[k][g] == -INFINITY ? 0.f : exp2f(sm[k][g] - mt);  // a slot that saw no position
      lt += sl[k][g] * c;
#pragma unroll
      for (int i = 0; i < VL; ++i) o[i] += sacc[k][g][lane + i * kWarpSize] * c;
    }
    const int64_t rh = r * a.n_head + h0 + g;
    if (chunks > 1) {
      float* pr = part + (rh * chunks + by) * (HD + 2);
      if (lane == 0) pr[0] = mt, pr[1] = lt;  // an empty chunk: max -inf, sum 0, output 0
#pragma unroll
      for (int i = 0; i < VL; ++i) pr[2 + lane + i * kWarpSize] = o[i];
    } else {
      write_head<HD>(o, lt, rh, out, q8, q8_ds, lane);
    }
  }
  if (chunks == 1 || !counters) return;
  // The chunks merged by the last of the group's blocks to finish (counters: one per block of
  // the grid's x, zero before the launch and left zero), instead of a combine launch on the
  // chain: each block's partials are made visible device-wide before it takes its ticket, and
  // the last reads them past L1 (__ldcg). The merge runs in chunk order, so the bits do not
  // depend on which block is last.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counters + bx, 1u) == chunks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) counters[bx] = 0;  // ready for the next launch (a graph replays it)
  for (int g = warp; g < ng; g += kDecodeWarps) {
    const int64_t rh = r * a.n_head + h0 + g;
    const float* pr = part + rh * chunks * (HD + 2);
    float mt = -INFINITY;
    for (int c = lane; c < int(chunks); c += kWarpSize) mt = fmaxf(mt, __ldcg(pr + c * (HD + 2)));
    mt = warp_max(mt);
    float lt = 0.f, o[VL];
#pragma unroll
    for (int i = 0; i < VL; ++i) o[i] = 0.f;
#pragma unroll 4
    for (int c = 0; c < int(chunks); ++c) {
      const float* pc = pr + c * (HD + 2);
      const float mc = __ldcg(pc);
      const float w = mc == -INFINITY ? 0.f : exp2f(mc - mt);  // an empty chunk weighs 0
      lt += __ldcg(pc + 1) * w;
#pragma unroll
      for (int i = 0; i < VL; ++i) o[i] += __ldcg(pc + 2 + lane + i * kWarpSize) * w;
    }
    write_head<HD>(o, lt, rh, out, q8, q8_ds, lane);
  }
}

// One (row, head)'s chunks merged by their maxima (the combine kernel's block, or a persistent
// step's work item), as kCombineThreads threads would: the chunks' maxima and sums go to shared
// memory first (one load each, in parallel), then each thread adds its element over a 1/S share
// of the chunks (S = kCombineThreads / VD), several chunks' loads in flight, and the S shares are
// added in a fixed order: a serial walk over the chunks cost one L2 round trip per chunk (~20 us
// for 33 chunks). A block of fewer threads (a multiple of the warp; the persistent step's 128)
// takes several of those threads' shares each, so the bits are the same.
constexpr int kCombineThreads = 256;

template <int VD>
__device__ __forceinline__ void combine_head(const float* part, int chunks, float* out, int8_t* q8, float2* q8_ds,
                                             int64_t head) {
  constexpr int S = kCombineThreads / VD;
  __shared__ float mc[kMaxDecodeChunks], lc[kMaxDecodeChunks], wc[kMaxDecodeChunks], share[S][VD];
  const float* pr = part + head * chunks * (VD + 2);
  const int t = threadIdx.x, nt = blockDim.x;
  for (int c = t; c < chunks; c += nt) mc[c] = pr[c * (VD + 2)], lc[c] = pr[c * (VD + 2) + 1];
  __syncthreads();
  float mt = -INFINITY;  // the same value in every thread
  for (int c = 0; c < chunks; ++c) mt = fmaxf(mt, mc[c]);
  for (int c = t; c < chunks; c += nt) wc[c] = mc[c] == -INFINITY ? 0.f : exp2f(mc[c] - mt);  // empty: 0
  __syncthreads();
  for (int vt = t; vt < kCombineThreads; vt += nt) {
    const int i = vt % VD, sub = vt / VD;
    float o = 0.f;  // an empty chunk's output is 0 (written so by the decode kernel)
#pragma unroll 8
    for (int c = sub; c < chunks; c += S) o += pr[c * (VD + 2) + 2 + i] * wc[c];
    share[sub][i] = o;
  }
  __syncthreads();
  for (int i = t; i < VD; i += nt) {  // whole warps: VD and nt are multiples of the warp size
    float lt = 0.f, ot = 0.f;
    for (int c = 0; c < chunks; ++c) lt += lc[c] * wc[c];
#pragma unroll
    for (int k = 0; k < S; ++k) ot += share[k][i];
    const int64_t e = head * VD + i;  // (row, head): VD consecutive outputs
    out[e] = ot / lt;
    if (q8) quantize_q8_1_block(ot / lt, q8 + e, q8_ds + e / 32, i % kWarpSize);
  }
  __syncthreads();  // the shared arrays are the next call's
}

}  // namespace loom::backend::cuda
