// Row-interleaved ("x8") weight layouts for the decode GEMV and the prefill GEMM, built once at
// load time: 8 consecutive weight rows become one group whose blocks are interleaved so that
// 32-bit lane r of a ymm holds 4 consecutive weights of row r. One vpdpbusd against 4
// activation bytes broadcast to all lanes then advances 8 row dot products at once: no
// horizontal sums, no per-row scale shuffles, and decoded weights are reused across the
// activation rows of a tile. Integer block sums and scales are exactly those of the stored
// format (the layouts are bijections of it: unpack_rows(pack_rows(w)) == w); only the float
// accumulation order differs from quant::vec_dot, as with gemm().
//
// Layouts, per block index b of a row (bytes of one group block = 8 x the stored block):
//   Q8_0x8 (272 B)   d[8] fp16 | u8[t=0..7][r][4]: q + 128 of weights 4t..4t+3
//   Q4_0x8 (144 B)   d[8] fp16 | u8[j=0..3][r][4]: low nibble weight 4j+p, high nibble 4j+16+p
//   Q4_1x8 (160 B)   d[8] | m[8] fp16 | nibbles as Q4_0x8
//   Q5_0x8 (176 B)   d[8] fp16 | u32 mask[t=0..7]: bit 4r+p = fifth bit of weight 4t+p of row r
//                    | u8[j=0..3][r][4]: low nibble weight 4j+p, high nibble weight 4j+16+p
//   Q4_Kx8 (1184 B)  d[8] | dmin[8] fp16 | sc u8[sub=0..7][r] | mins u8[pair=0..3][r][2]
//                    | per sub s: u8[j=0..3][r][4]: low nibble 32s+4j+p, high 32s+16+4j+p
//   Q6_Kx8 (1680 B)  d[8] fp16 | sc i8[sub=0..15][r] | per 32-chunk c: u8[j][r][4] low 4 bits
//                    (low nibble 32c+4j+p, high 32c+16+4j+p) | per chunk c: u8[h=0..1][r][4]
//                    with bits 2f..2f+1 = top 2 bits of weight 32c+16h+4f+p
// A group of rows r0..r0+7 starts at packed + (r0/8) * group_bytes(wt, k).
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"
#include "quant/simd/kernels.h"

namespace loom::quant::simd {

constexpr int kPackRows = 8;

// Types with an x8 layout: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K.
bool has_packed_layout(gguf::TensorType wt);
// True when `level` has kernels of its own for wt's x8 layout (AVX-512 and AVX2: every type
// with the layout); below that gemm_packed unpacks each group and runs gemm(), which is only a
// correctness fallback.
bool has_packed_kernel(gguf::TensorType wt, Isa level);
// Bytes of one group of 8 rows of k elements.
size_t packed_group_bytes(gguf::TensorType wt, int64_t k);
// n_rows (a multiple of 8) stored rows -> n_rows/8 groups at out.
void pack_rows(gguf::TensorType wt, const void* w, size_t w_row_bytes, int64_t n_rows, int64_t k, void* out);
// The inverse: groups back to stored rows.
void unpack_rows(gguf::TensorType wt, const void* packed, int64_t n_rows, int64_t k, void* w, size_t w_row_bytes);
// gemm() on packed rows: out[a*out_stride + r] = dot(row r, activation a), n_rows a multiple of
// 8, activations in act_type(wt). AVX-512 VNNI and AVX2 kernels (has_packed_kernel); otherwise
// each group is unpacked and gemm() runs on it.
// act_version: 0, or a value the caller never reuses for other activation bytes: every call
// with the same nonzero act_version, act and n_act reads the same bytes. The AVX2 prefill
// kernels then keep, per thread, what they derive from the activation rows (block scales and
// offset sums) and skip deriving it again: a prefill matmul calls gemm_packed once per tile of
// weight rows on the same activation block, and Q5_0's per-block offset sums cost ~4% of its
// kernel time when made again for every 128 weight rows. The results are the same either way.
void gemm_packed(gguf::TensorType wt, const void* packed, int64_t n_rows, const void* act,
                 size_t act_row_bytes, int64_t n_act, float* out, size_t out_stride, int64_t k,
                 uint64_t act_version = 0);

}  // namespace loom::quant::simd
