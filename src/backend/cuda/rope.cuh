// The rotation angle of rotary pair i at a position, shared by the rope kernel and the fused
// rope + KV store (so both give the same bits). theta_i is built by i repeated fp32
// multiplications of the position by base^(-2/n_rot), as ggml's rope cache (and the reference
// backend) build it, so angles at long positions agree to the last bit rather than to powf's
// rounding; cos/sin are the accurate (not intrinsic) versions for the same reason.
#pragma once
#include <cstdint>

namespace loom::backend::cuda {

struct RopeAngles {
  float theta_scale = 1, freq_scale = 1;  // theta_scale = base^(-2/n_rot)
  const float* ff = nullptr;              // frequency factors (llama3's rope_freqs), or null
  __device__ __forceinline__ void cos_sin(int32_t pos, int64_t i, float& c, float& s) const {
    float theta = float(pos);
    for (int64_t j = 0; j < i; ++j) theta *= theta_scale;
    const float th = freq_scale * (ff ? theta / ff[i] : theta);
    c = cosf(th);
    s = sinf(th);
  }
};

}  // namespace loom::backend::cuda
