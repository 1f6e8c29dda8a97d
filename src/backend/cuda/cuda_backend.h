// The CUDA backend ("cuda"): a compiled program runs op by op on one device and stream, with the
// weights resident in device memory in their stored GGUF formats, 1-D weights as f32, the KV
// pool in device memory (f16, paged through the step's block tables) and activations in
// buffers re-used across ops by liveness. Semantics are the reference backend's, in fp32 with
// dequantized weights (no activation quantization): results agree with it within the
// correctness contract (mean KL <= 0.01), not bit for bit.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace loom::backend::cuda {

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace loom::backend::cuda
