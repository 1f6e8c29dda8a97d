// The gated activations (SwiGLU's SiLU, GeGLU's tanh GELU) as the reference backend computes
// them, in f32. One definition for the pointwise kernel and the matmul epilogues (warp per row
// and tensor cores), so that fused and unfused steps give the same bits.
#pragma once

namespace loom::backend::cuda {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

}  // namespace loom::backend::cuda
