// The device layout of weights read by the integer-dot decode kernels (matmul_q8.cu). GGUF
// blocks of Q4_0 (18 B), Q5_0 (22), Q8_0 (34) and Q6_K (210) are only 2-byte aligned, so a
// kernel cannot read their quants with 16-byte loads. Per weight row the packed layout puts
// every block's quant bytes first, back to back ([nb x quant_bytes], 16-byte aligned since
// quant_bytes is a multiple of 16), then every block's remaining bytes (scales, high bits) in
// their stored order ([nb x aux_bytes]), and pads the row to 16 bytes. Q4_K and Q5_K blocks
// (144, 176 B) are already 16-byte multiples and stay as stored. Plain C++: included by the
// host packer (weight_pack.cpp) and the kernels alike.
#pragma once
#include <cstdint>

#include "gguf/tensor_type.h"

namespace loom::backend::cuda {

struct PackedLayout {
  int elems = 0;        // elements per block
  int block_bytes = 0;  // stored bytes per block
  int quant_off = 0;    // where the quant range starts in a stored block
  int quant_bytes = 0;  // its length (a multiple of 16)
  bool repacked = false;
  constexpr int aux_bytes() const { return block_bytes - quant_bytes; }
};

// Zero elems: the type has no integer-dot kernel.
constexpr PackedLayout packed_layout(gguf::TensorType t) {
  using gguf::TensorType;
  switch (t) {
    case TensorType::Q4_0: return {32, 18, 2, 16, true};
    case TensorType::Q4_1: return {32, 20, 4, 16, true};
    case TensorType::Q5_0: return {32, 22, 6, 16, true};
    case TensorType::Q8_0: return {32, 34, 2, 32, true};
    case TensorType::Q4_K: return {256, 144, 0, 144, false};
    case TensorType::Q5_K: return {256, 176, 0, 176, false};
    case TensorType::Q6_K: return {256, 210, 0, 192, true};
    default: return {};
  }
}

// Bytes of one packed row of K elements (K a multiple of the block's elements).
constexpr size_t packed_row_bytes(gguf::TensorType t, int64_t K) {
  const PackedLayout l = packed_layout(t);
  return (size_t(K / l.elems) * size_t(l.block_bytes) + 15) / 16 * 16;
}

}  // namespace loom::backend::cuda
