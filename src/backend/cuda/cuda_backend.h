// The CUDA backend ("cuda"): a compiled program runs on one device and stream (a step of few
// rows as one CUDA graph replay), with the matmul weights resident in device memory packed for
// the integer-dot kernels (or in their stored GGUF formats), 1-D weights as f32, the KV pool in
// device memory (f16, paged through the step's block tables) and activations in buffers
// re-used across ops by liveness. Decode matmuls quantize their activations to q8_1 (as
// llama.cpp's mmvq) and prefill matmuls run in f16 on the tensor cores (cuBLAS), so results
// agree with the reference backend within the correctness contract (mean KL <= 0.01), not bit
// for bit.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "backend/device_meter.h"

namespace loom::backend::cuda {

std::unique_ptr<Backend> make_cuda_backend();
// NVML board energy and the backend's peak device allocation (device_meter.cpp).
std::unique_ptr<DeviceMeter> make_cuda_meter();

}  // namespace loom::backend::cuda
