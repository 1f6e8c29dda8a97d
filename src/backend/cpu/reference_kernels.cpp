#include "backend/cpu/reference_kernels.h"

#include <utility>

namespace loom::backend::cpu {

Kernel find_kernel(std::string_view opcode) {
  static const std::pair<std::string_view, Kernel> table[] = {
      {"embed", kernel_embed},       {"rms_norm", kernel_rms_norm}, {"matmul", kernel_matmul},
      {"add", kernel_add},           {"mul", kernel_mul},           {"scale", kernel_scale},
      {"softcap", kernel_softcap},   {"swiglu", kernel_swiglu},     {"geglu", kernel_geglu},
      {"slice", kernel_slice},       {"rope", kernel_rope},         {"attention", kernel_attention},
  };
  for (const auto& [name, k] : table)
    if (name == opcode) return k;
  return nullptr;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace loom::backend::cpu
