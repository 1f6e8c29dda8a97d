// Scalar reference arithmetic on ggml's tensor element types: the definition every SIMD or
// GPU kernel in Loom is tested against.
//
//   dequantize_row(t, src, dst, n)  n elements of type t (n a multiple of t's block size) -> f32.
//   quantize_row(t, src, dst, n)    f32 -> type t, bit-identical to ggml's reference quantizers
//                                   (quantize_row_*_ref, i.e. what llama-quantize writes when no
//                                   importance matrix is given; F16/BF16 round to nearest even).
//   vec_dot_type(t)                 the type the activation row must be in for vec_dot with a
//                                   weight row of type t (ggml-cpu's type_traits.vec_dot_type):
//                                   Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1, Q2_K..Q6_K -> Q8_K,
//                                   F32 -> F32, F16 -> F16, BF16 -> BF16.
//   vec_dot(wt, w, a, n)            sum_i w[i]*a[i] with w of type wt and a of vec_dot_type(wt),
//                                   computed exactly as ggml's generic (scalar) ggml_vec_dot_*.
//
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// Q8_K (Q8_1 and Q8_K are activation formats: quantize/dequantize only, no vec_dot of their
// own). Anything else throws loom::Error naming the type; so does an n that is not a whole
// number of blocks. Buffers must not overlap; no alignment is required.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

namespace loom::quant {

// True when this module implements (de)quantization for t.
bool is_supported(gguf::TensorType t);
// Elements per block and bytes per block (1/4 for F32 etc.); throws for unsupported types.
int64_t block_elems(gguf::TensorType t);
int64_t block_bytes(gguf::TensorType t);
// Bytes for n elements of t; throws when n is not a multiple of the block size.
size_t row_size(gguf::TensorType t, int64_t n);

void dequantize_row(gguf::TensorType t, const void* src, float* dst, int64_t n);
void quantize_row(gguf::TensorType t, const float* src, void* dst, int64_t n);

gguf::TensorType vec_dot_type(gguf::TensorType weight_type);
float vec_dot(gguf::TensorType weight_type, const void* w_row, const void* act_row, int64_t n);

}  // namespace loom::quant
