// Decode attention by KV group (attention_decode.cu), the path of steps of few rows: one block
// per (row, KV head, chunk of the row's positions) computes every query head of the group, so
// each key and value is read once per group instead of once per query head. attention.cu
// decides the chunks (split_chunks) and sizes the scratch; this file only launches.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace loom::backend::cuda {

// Query heads one block computes at most: a group of n_head / n_kv heads larger than this is
// split over ceil(group / kMaxGroupHeads) blocks (each still reading its KV head once).
constexpr int kMaxGroupHeads = 8;

// Decode blocks a step should have (rows x KV heads x group parts x chunks): about two on each
// of an H100's or H200's 132 multiprocessors, so that a row's positions are read by the whole
// device (at depth 4096 on the 8B shape: 8 KV heads x 33 chunks of ~125 positions). Also the
// most chunks a row is split into (split_chunks in attention.cu decides).
constexpr int kMaxDecodeChunks = 264;
// Positions a chunk should have at least: a decode block reads 32-64 positions per pass, and
// every chunk costs a partial result (value_dim + 2 floats per head) for the combine to read.
constexpr int kMinDecodeChunk = 64;

// The head dims this kernel has: a position is read by head_dim / 8 lanes, which must divide the
// warp. attention.cu sends other multiples of 32 (Phi-3's 96; 32) to its own kernel.
inline bool has_decode_kernel(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

inline int group_parts(const AttentionShape& a) {
  const int group = a.n_head / a.n_kv;
  return (group + kMaxGroupHeads - 1) / kMaxGroupHeads;
}

// chunks == 1: the blocks write `out` (and its q8_1 codes when q8 is set) directly. chunks > 1:
// each row's positions [lo, pos] are split evenly over `chunks` blocks, which write their
// partial (max, sum, unnormalised output) to scratch (rows * n_head * chunks * (value_dim + 2)
// floats), and a combine kernel merges them in chunk order — or, with counters (one per block
// of a chunk: rows * n_kv * group_parts, zero before the launch, left zero), the last block of
// each (row, KV head, part) to finish merges them itself, in chunk order, and no combine kernel
// runs.
void decode_attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                      int64_t rows, int chunks, float* scratch, unsigned* counters, int8_t* q8, float2* q8_ds,
                      cudaStream_t s);

}  // namespace loom::backend::cuda
