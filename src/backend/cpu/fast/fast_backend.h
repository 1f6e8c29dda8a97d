// The fast CPU backend ("cpu"): the reference backend's semantics (reference.h; activations
// quantized to the weights' dot-product format, as llama.cpp does) with AVX-512 / AVX2 GEMM
// and GEMV kernels from quant/simd over weights repacked at load, matmuls that share an input
// sharing one activation quantization, preallocated activation buffers, a spinning thread pool
// and vectorized attention over the f16 KV cache. Results agree with the reference backend up
// to float summation order (and what that moves across a Q8 rounding boundary).
#pragma once
#include <memory>

#include "backend/backend.h"

namespace loom::backend::cpu {

std::unique_ptr<Backend> make_fast_backend();

}  // namespace loom::backend::cpu
