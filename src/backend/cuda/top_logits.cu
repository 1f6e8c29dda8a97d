// The k largest logits of each row, selected where the logits are (Plan::run_top): a batched
// decode step then moves k entries a row to the host instead of the vocabulary (128,256 floats
// a row for a Llama-3 vocabulary: 32 MB for 64 rows, and a host pass over each).
//
// k == 1 (greedy): one block per row, a strided pass keeping the largest (lowest id among
// equals), then warp and block reductions.
// k > 1: one block per row finds the k-th largest value by radix selection on the floats'
// order-preserving 32-bit keys — three passes over the row, each a shared-memory histogram of
// the next 11, 11 and 10 key bits among the elements that match the bits found so far — then
// one pass collects the elements above that key and, among those equal to it, the lowest ids.
// The entries come out in no particular order (the host sorts k entries); the set is exactly
// backend::top_logits' (ties broken by lowest id), so the sampler sees the same candidates.
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kBins = 2048;  // 11 key bits a pass

// A float's key: larger floats give larger unsigned keys (negative floats reversed); -0 is
// taken as +0 so that equal floats have equal keys, as the host's comparisons see them.
__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t b = __float_as_uint(f);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// (value, id) a beats b: larger value, or equal value and lower id; id < 0 is "none".
__device__ __forceinline__ bool beats(float va, int ia, float vb, int ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return va > vb || (va == vb && ia < ib);
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ x, int64_t V, int32_t* ids,
                                                          float* vals) {
  const float* r = x + int64_t(blockIdx.x) * V;
  float best = -FLT_MAX;
  int id = -1;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {  // ascending ids: a strict > keeps the lowest
    const float v = r[i];
    if (id < 0 || v > best) best = v, id = int(i);
  }
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    const float vo = shfl_xor(best, o);
    const int io = shfl_xor(id, o);
    if (beats(vo, io, best, id)) best = vo, id = io;
  }
  __shared__ float sv[kWarps];
  __shared__ int si[kWarps];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) sv[warp] = best, si[warp] = id;
  __syncthreads();
  if (warp != 0) return;
  best = lane < kWarps ? sv[lane] : -FLT_MAX;
  id = lane < kWarps ? si[lane] : -1;
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    const float vo = shfl_xor(best, o);
    const int io = shfl_xor(id, o);
    if (beats(vo, io, best, id)) best = vo, id = io;
  }
  if (lane == 0) ids[blockIdx.x] = id, vals[blockIdx.x] = best;
}

__global__ void __launch_bounds__(kThreads) top_k_kernel(const float* __restrict__ x, int64_t V, int k, int32_t* ids,
                                                         float* vals) {
  __shared__ int hist[kBins];
  __shared__ int s_bin, s_need, s_above, s_equal;
  const float* r = x + int64_t(blockIdx.x) * V;
  ids += int64_t(blockIdx.x) * k;
  vals += int64_t(blockIdx.x) * k;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  // Radix selection: after each pass, `prefix` holds the key bits (under `mask`) of the k-th
  // largest element, and `need` how many of the largest elements sharing those bits it takes
  // to reach the k-th.
  uint32_t prefix = 0, mask = 0;
  int need = k, n_equal = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
    const int bins = pass == 2 ? 1024 : 2048;
    for (int i = threadIdx.x; i < kBins; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t t0 = 0; t0 < V; t0 += kThreads) {  // whole tiles: every lane reaches the ballot
      const int64_t i = t0 + threadIdx.x;
      const uint32_t u = i < V ? order_key(r[i]) : 0;
      const bool in = i < V && (u & mask) == prefix;
      const int bin = int((u >> shift) & uint32_t(bins - 1));
      // Logits crowd a few bins of the first pass: lanes with one bin add once, together.
      const LaneMask active = ballot(in);
      if (in) {
        const LaneMask peers = match_any(active, bin);
        if (lane == first_lane(peers)) atomicAdd(&hist[bin], lane_count(peers));
      }
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l sums bins [l * per, (l + 1) * per); suffix sums over lanes find the lane whose
      // bins hold the need-th largest, which then walks its own bins down.
      const int per = bins / kWarpSize;
      int sum = 0;
      for (int j = 0; j < per; ++j) sum += hist[lane * per + j];
      int suffix = sum;  // elements in the bins of lanes >= this one
#pragma unroll
      for (int o = 1; o < kWarpSize; o <<= 1) {
        const int v = shfl_down(suffix, o);
        if (lane + o < kWarpSize) suffix += v;
      }
      int above = shfl_down(suffix, 1);  // in the bins of higher lanes
      if (lane == kWarpSize - 1) above = 0;
      if (suffix >= need && above < need) {
        int acc = above;
        for (int j = per - 1; j >= 0; --j) {
          const int c = hist[lane * per + j];
          if (acc + c >= need) {
            s_bin = lane * per + j;
            s_need = need - acc;
            s_equal = c;
            break;
          }
          acc += c;
        }
      }
    }
    __syncthreads();
    prefix |= uint32_t(s_bin) << shift;
    mask |= uint32_t(bins - 1) << shift;
    need = s_need;
    n_equal = s_equal;  // after the last pass: the elements whose key is the k-th's
    __syncthreads();  // every thread has read s_bin, s_need and s_equal before they are written again
  }
  // prefix is now the k-th largest key; k - need elements lie above it, n_equal equal it.
  const uint32_t kth = prefix;
  const int n_above = k - need;
  if (threadIdx.x == 0) s_above = 0;
  __syncthreads();
  if (n_equal == need) {  // every element equal to the k-th is taken: no order needed
    for (int64_t i = threadIdx.x; i < V; i += kThreads) {
      const float v = r[i];
      const uint32_t u = order_key(v);
      if (u >= kth) {
        const int at = atomicAdd(&s_above, 1);
        ids[at] = int(i), vals[at] = v;
      }
    }
    return;
  }
  // More elements equal the k-th than fit: the lowest ids among them, so the pass goes in
  // tiles of kThreads ids, ranking each tile's equal elements by id.
  __shared__ int warp_equal[kWarps];
  int taken = 0;  // equal elements placed by earlier tiles (the same in every thread)
  for (int64_t t0 = 0; t0 < V; t0 += kThreads) {
    const int64_t i = t0 + threadIdx.x;
    const float v = i < V ? r[i] : 0.f;
    const uint32_t u = i < V ? order_key(v) : 0;
    if (i < V && u > kth) {
      const int at = atomicAdd(&s_above, 1);
      ids[at] = int(i), vals[at] = v;
    }
    const bool eq = i < V && u == kth;
    const LaneMask b = ballot(eq);
    if (lane == 0) warp_equal[warp] = lane_count(b);
    __syncthreads();
    int before = taken;
    for (int w = 0; w < warp; ++w) before += warp_equal[w];
    before += lane_count(b & lanes_below(lane));
    if (eq && before < need) ids[n_above + before] = int(i), vals[n_above + before] = v;
    int tile = 0;
    for (int w = 0; w < kWarps; ++w) tile += warp_equal[w];
    taken += tile;
    __syncthreads();  // warp_equal is rewritten by the next tile
  }
}

}  // namespace

void top_logits(const float* x, int64_t rows, int64_t V, int k, int32_t* ids, float* vals, cudaStream_t s) {
  if (rows <= 0) return;
  if (k < 1 || k > V) cuda_invalid("top_logits: k outside [1, vocabulary]");
  if (V > INT32_MAX) cuda_invalid("top_logits: a row longer than int32 ids");
  if (k == 1) argmax_kernel<<<unsigned(rows), kThreads, 0, s>>>(x, V, ids, vals);
  else top_k_kernel<<<unsigned(rows), kThreads, 0, s>>>(x, V, k, ids, vals);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::backend::cuda
