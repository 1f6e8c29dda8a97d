// quant.h's type switch: checks type and length once, then calls the per-type reference.
#include <string>

#include "common/error.h"
#include "quant/quant.h"
#include "quant/ref.h"

namespace loom::quant {
namespace {

using gguf::TensorType;

std::string name_of(TensorType t) {
  return fmt::format("{} (id {})", gguf::type_name(t), uint32_t(t));
}

[[noreturn]] void unsupported(TensorType t, const char* what) {
  loom::fail("quant: {} not supported for tensor type {}", what, name_of(t));
}

int64_t blocks(TensorType t, int64_t n) {
  const int64_t be = block_elems(t);
  if (n < 0 || n % be != 0)
    loom::fail("quant: {} elements is not a whole number of {}-element blocks of {}", n, be,
               name_of(t));
  return n / be;
}

template <typename B>
const B* as(const void* p) { return static_cast<const B*>(p); }
template <typename B>
B* as(void* p) { return static_cast<B*>(p); }

}  // namespace

bool is_supported(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16:
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
    case TensorType::Q8_0: case TensorType::Q8_1:
    case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::Q4_K: case TensorType::Q5_K:
    case TensorType::Q6_K: case TensorType::Q8_K:
      return true;
    default:
      return false;
  }
}

int64_t block_elems(TensorType t) {
  if (!is_supported(t)) unsupported(t, "block geometry");
  return gguf::type_traits(t)->block_elems;
}

int64_t block_bytes(TensorType t) {
  if (!is_supported(t)) unsupported(t, "block geometry");
  return gguf::type_traits(t)->block_bytes;
}

size_t row_size(TensorType t, int64_t n) { return size_t(blocks(t, n) * block_bytes(t)); }

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
  if (!is_supported(t)) unsupported(t, "dequantize");
  blocks(t, n);
  switch (t) {
    case TensorType::F32: {
      const float* s = as<float>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case TensorType::F16: {
      const uint16_t* s = as<uint16_t>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case TensorType::BF16: {
      const uint16_t* s = as<uint16_t>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case TensorType::Q4_0: return ref::dequantize_q4_0(as<BlockQ4_0>(src), dst, n);
    case TensorType::Q4_1: return ref::dequantize_q4_1(as<BlockQ4_1>(src), dst, n);
    case TensorType::Q5_0: return ref::dequantize_q5_0(as<BlockQ5_0>(src), dst, n);
    case TensorType::Q5_1: return ref::dequantize_q5_1(as<BlockQ5_1>(src), dst, n);
    case TensorType::Q8_0: return ref::dequantize_q8_0(as<BlockQ8_0>(src), dst, n);
    case TensorType::Q8_1: return ref::dequantize_q8_1(as<BlockQ8_1>(src), dst, n);
    case TensorType::Q2_K: return ref::dequantize_q2_K(as<BlockQ2_K>(src), dst, n);
    case TensorType::Q3_K: return ref::dequantize_q3_K(as<BlockQ3_K>(src), dst, n);
    case TensorType::Q4_K: return ref::dequantize_q4_K(as<BlockQ4_K>(src), dst, n);
    case TensorType::Q5_K: return ref::dequantize_q5_K(as<BlockQ5_K>(src), dst, n);
    case TensorType::Q6_K: return ref::dequantize_q6_K(as<BlockQ6_K>(src), dst, n);
    case TensorType::Q8_K: return ref::dequantize_q8_K(as<BlockQ8_K>(src), dst, n);
    default: unsupported(t, "dequantize");
  }
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
  if (!is_supported(t)) unsupported(t, "quantize");
  blocks(t, n);
  switch (t) {
    case TensorType::F32: {
      float* d = as<float>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case TensorType::F16: {
      uint16_t* d = as<uint16_t>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case TensorType::BF16: {
      uint16_t* d = as<uint16_t>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case TensorType::Q4_0: return ref::quantize_q4_0(src, as<BlockQ4_0>(dst), n);
    case TensorType::Q4_1: return ref::quantize_q4_1(src, as<BlockQ4_1>(dst), n);
    case TensorType::Q5_0: return ref::quantize_q5_0(src, as<BlockQ5_0>(dst), n);
    case TensorType::Q5_1: return ref::quantize_q5_1(src, as<BlockQ5_1>(dst), n);
    case TensorType::Q8_0: return ref::quantize_q8_0(src, as<BlockQ8_0>(dst), n);
    case TensorType::Q8_1: return ref::quantize_q8_1(src, as<BlockQ8_1>(dst), n);
    case TensorType::Q2_K: return ref::quantize_q2_K(src, as<BlockQ2_K>(dst), n);
    case TensorType::Q3_K: return ref::quantize_q3_K(src, as<BlockQ3_K>(dst), n);
    case TensorType::Q4_K: return ref::quantize_q4_K(src, as<BlockQ4_K>(dst), n);
    case TensorType::Q5_K: return ref::quantize_q5_K(src, as<BlockQ5_K>(dst), n);
    case TensorType::Q6_K: return ref::quantize_q6_K(src, as<BlockQ6_K>(dst), n);
    case TensorType::Q8_K: return ref::quantize_q8_K(src, as<BlockQ8_K>(dst), n);
    default: unsupported(t, "quantize");
  }
}

TensorType vec_dot_type(TensorType t) {
  switch (t) {
    case TensorType::F32: return TensorType::F32;
    case TensorType::F16: return TensorType::F16;
    case TensorType::BF16: return TensorType::BF16;
    case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: return TensorType::Q8_0;
    case TensorType::Q4_1: case TensorType::Q5_1: return TensorType::Q8_1;
    case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::Q4_K: case TensorType::Q5_K:
    case TensorType::Q6_K:
      return TensorType::Q8_K;
    default: unsupported(t, "vec_dot");
  }
}

float vec_dot(TensorType t, const void* w, const void* a, int64_t n) {
  vec_dot_type(t);  // rejects types without a dot product
  blocks(t, n);
  switch (t) {
    case TensorType::F32: return ref::vec_dot_f32(as<float>(w), as<float>(a), n);
    case TensorType::F16: return ref::vec_dot_f16(as<uint16_t>(w), as<uint16_t>(a), n);
    case TensorType::BF16: return ref::vec_dot_bf16(as<uint16_t>(w), as<uint16_t>(a), n);
    case TensorType::Q4_0: return ref::vec_dot_q4_0_q8_0(as<BlockQ4_0>(w), as<BlockQ8_0>(a), n);
    case TensorType::Q4_1: return ref::vec_dot_q4_1_q8_1(as<BlockQ4_1>(w), as<BlockQ8_1>(a), n);
    case TensorType::Q5_0: return ref::vec_dot_q5_0_q8_0(as<BlockQ5_0>(w), as<BlockQ8_0>(a), n);
    case TensorType::Q5_1: return ref::vec_dot_q5_1_q8_1(as<BlockQ5_1>(w), as<BlockQ8_1>(a), n);
    case TensorType::Q8_0: return ref::vec_dot_q8_0_q8_0(as<BlockQ8_0>(w), as<BlockQ8_0>(a), n);
    case TensorType::Q2_K: return ref::vec_dot_q2_K_q8_K(as<BlockQ2_K>(w), as<BlockQ8_K>(a), n);
    case TensorType::Q3_K: return ref::vec_dot_q3_K_q8_K(as<BlockQ3_K>(w), as<BlockQ8_K>(a), n);
    case TensorType::Q4_K: return ref::vec_dot_q4_K_q8_K(as<BlockQ4_K>(w), as<BlockQ8_K>(a), n);
    case TensorType::Q5_K: return ref::vec_dot_q5_K_q8_K(as<BlockQ5_K>(w), as<BlockQ8_K>(a), n);
    case TensorType::Q6_K: return ref::vec_dot_q6_K_q8_K(as<BlockQ6_K>(w), as<BlockQ8_K>(a), n);
    default: unsupported(t, "vec_dot");
  }
}

}  // namespace loom::quant
