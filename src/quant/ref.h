// Per-type scalar reference kernels behind quant.h's dispatch. Each takes a whole number of
// blocks (k elements); callers go through quant.h, which checks types and sizes.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace loom::quant::ref {

// legacy_quants.cpp
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t k);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t k);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t k);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t k);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t k);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t k);
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t k);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t k);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t k);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t k);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t k);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t k);

// kquants_q2_q3.cpp, kquants_q4_q5.cpp, kquants_q6_q8.cpp
void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t k);
void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t k);
void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t k);
void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t k);
void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t k);
void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t k);
void dequantize_q2_K(const BlockQ2_K* x, float* y, int64_t k);
void dequantize_q3_K(const BlockQ3_K* x, float* y, int64_t k);
void dequantize_q4_K(const BlockQ4_K* x, float* y, int64_t k);
void dequantize_q5_K(const BlockQ5_K* x, float* y, int64_t k);
void dequantize_q6_K(const BlockQ6_K* x, float* y, int64_t k);
void dequantize_q8_K(const BlockQ8_K* x, float* y, int64_t k);

// vec_dot_kquants.cpp: a K super-block's quant codes in element order, offsets removed.
void unpack_q2_K(const BlockQ2_K& b, int8_t* codes);
void unpack_q3_K(const BlockQ3_K& b, int8_t* codes);
void unpack_q4_K(const BlockQ4_K& b, int8_t* codes);
void unpack_q5_K(const BlockQ5_K& b, int8_t* codes);
void unpack_q6_K(const BlockQ6_K& b, int8_t* codes);

// vec_dot_legacy.cpp
float vec_dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t n);
float vec_dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t n);
float vec_dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t n);
float vec_dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t n);
float vec_dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t n);
float vec_dot_f32(const float* x, const float* y, int64_t n);
float vec_dot_f16(const uint16_t* x, const uint16_t* y, int64_t n);
float vec_dot_bf16(const uint16_t* x, const uint16_t* y, int64_t n);

// vec_dot_kquants.cpp
float vec_dot_q2_K_q8_K(const BlockQ2_K* x, const BlockQ8_K* y, int64_t n);
float vec_dot_q3_K_q8_K(const BlockQ3_K* x, const BlockQ8_K* y, int64_t n);
float vec_dot_q4_K_q8_K(const BlockQ4_K* x, const BlockQ8_K* y, int64_t n);
float vec_dot_q5_K_q8_K(const BlockQ5_K* x, const BlockQ8_K* y, int64_t n);
float vec_dot_q6_K_q8_K(const BlockQ6_K* x, const BlockQ8_K* y, int64_t n);

}  // namespace loom::quant::ref
