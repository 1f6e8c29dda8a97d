// Internal seam between the dispatcher (dispatch.cpp) and the per-ISA kernel sets
// (isa_avx2.cpp, isa_avx512.cpp), each compiled with its own target flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace loom::quant::simd::detail {

struct GemmArgs {
  const uint8_t* w;
  size_t w_row_bytes;
  int64_t n_rows;
  const uint8_t* act;
  size_t act_row_bytes;
  int64_t n_act;
  float* out;
  size_t out_stride;
  int64_t k;
  uint64_t act_version = 0;  // gemm_packed's: nonzero when what a thread derives from act may be reused
};

// Each returns false (doing nothing) when the level has no kernel for the type.
namespace avx2 {
bool gemm(gguf::TensorType wt, const GemmArgs& g);
// x8 layouts (packed.h), as avx512::gemm_packed; false for the types without an AVX2 kernel.
bool gemm_packed(gguf::TensorType wt, const GemmArgs& g);
bool quantize(gguf::TensorType t, const float* x, void* y, int64_t n);
}  // namespace avx2
namespace avx512 {
bool gemm(gguf::TensorType wt, const GemmArgs& g);
// x8 layouts (packed.h): w = the first group, w_row_bytes = bytes per group of 8 rows.
bool gemm_packed(gguf::TensorType wt, const GemmArgs& g);
bool quantize(gguf::TensorType t, const float* x, void* y, int64_t n);
}  // namespace avx512

}  // namespace loom::quant::simd::detail
