#include "backend/cpu/reference_kernels.h"


namespace loom::backend::cpu {

Kernel kernel_for(passes::Opcode c) {
  using passes::Opcode;
  switch (c) {
    case Opcode::embed: return kernel_embed;
    case Opcode::rms_norm: return kernel_rms_norm;
    case Opcode::matmul: return kernel_matmul;
    case Opcode::add: return kernel_add;
    case Opcode::mul: return kernel_mul;
    case Opcode::scale: return kernel_scale;
    case Opcode::softcap: return kernel_softcap;
    case Opcode::swiglu: return kernel_swiglu;
    case Opcode::geglu: return kernel_geglu;
    case Opcode::slice: return kernel_slice;
    case Opcode::rope: return kernel_rope;
    case Opcode::attention: return kernel_attention;
  }
  return nullptr;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace loom::backend::cpu
