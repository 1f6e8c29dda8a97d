// The rotation angle of rotary pair i at a position, shared by the kernels that rotate (so all
// give the same bits). theta_i is built by i repeated fp32 multiplications of the position by
// base^(-2/n_rot), as ggml's rope cache (and the reference backend) build it, so angles at long
// positions agree to the last bit rather than to powf's rounding; cos/sin are the accurate
// (not intrinsic) versions for the same reason.
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

// A pair rotated by the angle of (c, s), with its roundings named (not left to contraction), so
// that every kernel that rotates (rope, rope_kv_store, the q/k/v matmuls' epilogue) gives the
// same bits.
__device__ __forceinline__ void rotate_pair(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
  y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
}

}  // namespace loom::backend::cuda
