// Cached key/value elements of the fast backend: writing an f32 row in the cache's element
// type, reading one back as f32, and the operand rounding llama.cpp applies before its
// attention meets the cached rows.
//   f16:  rows stored with round-to-nearest-even; q and the normalized softmax weights are
//         rounded to f16 too (ggml's vec_dot_type for F16, flash attention off).
//   q8_0: rows stored as ggml's quantize_row_q8_0 stores them (quant::ggml::quantize_activations,
//         bit for bit); q is quantized the same way before q·k (the vec_dot_type of Q8_0).
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/kv_store.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/ggml_order.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace loom::backend::cpu::fast {

inline void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp32_to_fp16(src[i]);
}

inline void f16_to_f32(const uint16_t* h, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp16_to_fp32(h[i]);
}

// n elements; for q8_0 n is a multiple of 32 (kv_row_bytes refuses other widths).
inline void store_kv_row(KvElem e, const float* src, void* dst, int64_t n) {
  switch (e) {
    case KvElem::f32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case KvElem::f16: f32_to_f16(src, static_cast<uint16_t*>(dst), n); return;
    case KvElem::q8_0: loom::quant::ggml::quantize_activations(gguf::TensorType::Q8_0, src, dst, n); return;
  }
}

// Elements [0, n) of a row (or of a head within it: `src` at the head's first byte) as f32;
// q8_0 as ggml's dequantize_row_q8_0 (q * d).
inline void kv_row_to_f32(KvElem e, const uint8_t* src, float* dst, int64_t n) {
  switch (e) {
    case KvElem::f32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case KvElem::f16: f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n); return;
    case KvElem::q8_0: {
      const auto* b = reinterpret_cast<const loom::quant::BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / 32; ++i) {
        const float d = loom::quant::fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[i * 32 + j] = float(b[i].qs[j]) * d;
      }
      return;
    }
  }
}

// See the header comment: with an f16 cache llama.cpp rounds q and the normalized weights to
// f16, so scores and outputs agree with llama.cpp's to fp32 rounding rather than to f16
// rounding (~5e-4 relative), which the next activation quantization would otherwise amplify.
inline void round_f16(float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; i < n; ++i) x[i] = loom::quant::round_to_fp16(x[i]);
}

// x <- dequantize(quantize_q8_0(x)): the query llama.cpp's q·k sees with a q8_0 key cache, as
// f32 (exact: each element is an int8 times the block's f16 scale).
inline void round_q8_0(float* x, int64_t n) {
  loom::quant::BlockQ8_0 b;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    loom::quant::ggml::quantize_activations(gguf::TensorType::Q8_0, x + i, &b, 32);
    kv_row_to_f32(KvElem::q8_0, reinterpret_cast<const uint8_t*>(&b), x + i, 32);
  }
}

}  // namespace loom::backend::cpu::fast
