// The fast CPU backend ("cpu"): the reference backend's semantics (reference.h) with
// activations quantized to the weights' dot-product format (as llama.cpp does), AVX-512 /
// AVX2 GEMM kernels from quant/simd, preallocated activation buffers, a spinning thread pool
// and vectorized attention over the f16 KV cache. Results agree with the reference backend
// within the error of the Q8 activation quantization.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace loom::backend::cpu {

std::unique_ptr<Backend> make_fast_backend();

}  // namespace loom::backend::cpu
