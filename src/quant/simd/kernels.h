// x86 fast path of the quantized dot products: activation quantizers and a GEMM/GEMV over
// whole weight matrices, each with the scalar reference in quant/quant.h as its definition.
//
//   act_type(wt)                    the format gemm wants the activation rows in for weights of
//                                   type wt: vec_dot_type(wt) for the quantized types (Q8_0,
//                                   Q8_1, Q8_K), and F32 for F32, F16 and BF16 weights (unlike
//                                   ggml, F16/BF16 weights are dotted against f32 activations).
//   quantize_activations(t, x, y, n)
//                                   SIMD activation quantizer for t in {Q8_0, Q8_1, Q8_K}; bytes
//                                   identical to quant::ggml::quantize_activations (llama.cpp's
//                                   x86 from_float: Q8_0/Q8_1 id = 127/amax, all ties to even).
//                                   t = F32 copies. Anything else throws loom::Error.
//   gemm(wt, w, w_row_bytes, n_rows, act, act_row_bytes, n_act, out, out_stride, k)
//                                   out[a*out_stride + r] = dot(weight row r, activation row a)
//                                   for r < n_rows, a < n_act; k elements per row. Weight row r
//                                   starts at w + r*w_row_bytes, activation row a at
//                                   act + a*act_row_bytes (already in act_type(wt)). Any row
//                                   range works (callers split rows across threads); the tile
//                                   shape is chosen from n_act (1 = decode GEMV, streamed).
//                                   Integer partial sums are exact; only the order of the float
//                                   accumulation differs from quant::vec_dot.
//
// Types with SIMD kernels: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F32, F16, BF16.
// Faster still on AVX-512 and AVX2: the same dots on weights repacked at load time into
// row-interleaved groups of 8 rows (packed.h: gemm_packed; Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K).
// Q2_K and Q3_K run the scalar reference at every ISA level. Other types throw loom::Error.
//
// ISA: chosen once from CPUID (AVX-512 F/BW/VL/VNNI -> "avx512vnni", AVX2+FMA+F16C -> "avx2",
// otherwise "scalar"). force_isa caps it at a lower level (the fast backend's `isa` schedule
// key, tests and A/B runs); nothing in the environment changes it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace loom::quant::simd {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

gguf::TensorType act_type(gguf::TensorType weight_type);

void quantize_activations(gguf::TensorType act_type, const float* x, void* y, int64_t n);

void gemm(gguf::TensorType wt, const void* w, size_t w_row_bytes, int64_t n_rows,
          const void* act, size_t act_row_bytes, int64_t n_act, float* out, size_t out_stride,
          int64_t k);

// The level in use: "avx512vnni", "avx2" or "scalar".
const char* isa_name();
Isa isa();
// Best level this CPU (and this build) can run.
Isa best_isa();
// Use at most `level` from now on (clamped to best_isa()); affects all threads.
void force_isa(Isa level);

}  // namespace loom::quant::simd
