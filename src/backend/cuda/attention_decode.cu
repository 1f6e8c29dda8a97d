// Decode attention by KV group (version 5 of docs/cuda-kernels.md). The earlier decode kernel
// gave each (row, query head, 64-position chunk) a block: the 4 query heads of a GQA group each
// read the group's keys and values, with 2-byte loads, in thousands of tiny blocks. Here one
// block of kDecodeWarps warps takes (row, KV head, chunk) and every query head of the group (up to
// kMaxGroupHeads; larger groups use several blocks), so each key and value is read once:
//   - a position's head_dim halves are read by LP = head_dim / 8 lanes, one 16-byte load each
//     (64: 8 lanes, 128: 16, 256: 32), so a warp holds PP = 32 / LP positions at once, and
//     each lane has the loads of 2 x kBatch positions in flight (the next pass's are issued
//     before this pass's dot products);
//   - each lane keeps its 8 elements of every group head's query and output accumulator; the
//     LP lanes of a position add their partial dot products by shuffles (lanes_sum);
//   - every (warp, position slot) runs its own online softmax (max, sum, accumulator per
//     head) in fp32, base 2 (exp2f; the scale carries log2(e)), and the slots are merged
//     through shared memory in slot order at the end;
//   - the row's positions [lo, pos] are split evenly over gridDim.y chunks (the host picks the
//     count for ~two blocks per multiprocessor); one chunk writes the output and its q8_1 codes
//     directly, several write partials that attention_combine_kernel merges in chunk order
//     (or, with counters, the last of a row's blocks to finish: AttentionShape::merge_in_kernel).
// Every reduction has a fixed order, so a launch gives the same bits every run.
#include <cuda_fp16.h>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_kv.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

template <int HD, int GM>
__global__ void __launch_bounds__(kDecodeWarps * kWarpSize)
    decode_attention_kernel(AttentionShape a, KvView kv, StepTables st, const float* __restrict__ q,
                            float* __restrict__ out, int8_t* __restrict__ q8, float2* __restrict__ q8_ds,
                            float* __restrict__ part, unsigned* __restrict__ counters) {
  allow_next_kernel();
  wait_previous_kernel();
  decode_attention_block<HD, GM>(a, kv, st, q, out, q8, q8_ds, part, counters, blockIdx.x, blockIdx.y, gridDim.y);
}

// One block of kCombineThreads threads per (row, head).
template <int VD>
__global__ void __launch_bounds__(kCombineThreads)
    attention_combine_kernel(const float* __restrict__ part, int chunks, float* __restrict__ out,
                             int8_t* __restrict__ q8, float2* __restrict__ q8_ds) {
  allow_next_kernel();
  wait_previous_kernel();
  combine_head<VD>(part, chunks, out, q8, q8_ds, blockIdx.x);
}

template <int HD, int GM>
void launch_group(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                  int64_t rows, int chunks, float* scratch, unsigned* counters, int8_t* q8, float2* q8_ds,
                  cudaStream_t s) {
  const dim3 grid(unsigned(rows * a.n_kv * group_parts(a)), unsigned(chunks));
  const bool split = chunks > 1, combine = split && !counters;
  launch(decode_attention_kernel<HD, GM>, grid, dim3(kDecodeWarps * kWarpSize), s, a, kv, st, q, out,
         combine ? nullptr : q8, combine ? nullptr : q8_ds, split ? scratch : nullptr, split ? counters : nullptr);
  if (combine)
    launch(attention_combine_kernel<HD>, dim3(unsigned(rows * a.n_head)), dim3(kCombineThreads), s,
           static_cast<const float*>(scratch), chunks, out, q8, q8_ds);
}

template <int HD>
void launch_head_dim(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                     int64_t rows, int chunks, float* scratch, unsigned* counters, int8_t* q8, float2* q8_ds,
                     cudaStream_t s) {
  const int heads = std::min(a.n_head / a.n_kv, kMaxGroupHeads);  // the most one block computes
  if (heads <= 1) launch_group<HD, 1>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s);
  else if (heads <= 2) launch_group<HD, 2>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s);
  else if (heads <= 4) launch_group<HD, 4>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s);
  else launch_group<HD, 8>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s);
}

}  // namespace

void decode_attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                      int64_t rows, int chunks, float* scratch, unsigned* counters, int8_t* q8, float2* q8_ds,
                      cudaStream_t s) {
  // The 16-byte loads need every key and value row (and the head's offset in it) 16-byte aligned.
  if (kv.k_width % kLaneHalves || kv.v_width % kLaneHalves || reinterpret_cast<uintptr_t>(kv.k) % 16 ||
      reinterpret_cast<uintptr_t>(kv.v) % 16)
    cuda_invalid("attention: KV rows must be 16-byte aligned");
  if (chunks > 1 && !scratch) cuda_invalid("attention: a split decode needs scratch");
  if (chunks > kMaxDecodeChunks) cuda_invalid("attention: more decode chunks than the combine kernel holds");
  switch (a.head_dim) {
    case 64: launch_head_dim<64>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s); break;
    case 128: launch_head_dim<128>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s); break;
    case 256: launch_head_dim<256>(a, kv, st, q, out, rows, chunks, scratch, counters, q8, q8_ds, s); break;
    default: cuda_invalid("attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace loom::backend::cuda
