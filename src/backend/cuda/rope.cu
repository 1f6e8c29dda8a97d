// Rotary position embedding, one thread per rotated pair (the angles: rope.cuh).
#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope.cuh"

namespace loom::backend::cuda {

namespace {

__global__ void rope_kernel(const float* __restrict__ x, const int32_t* __restrict__ pos, float* __restrict__ out,
                            int64_t rows, int64_t cols, int64_t head_dim, int64_t n_rot, RopeAngles angles, bool neox) {
  const int64_t half = n_rot / 2, heads = cols / head_dim;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // Threads past the rotated pairs copy the pass-through dimensions.
  const int64_t pairs = rows * heads * half;
  if (tid < pairs) {
    const int64_t i = tid % half, h = (tid / half) % heads, r = tid / (half * heads);
    float c, s;
    angles.cos_sin(pos[r], i, c, s);
    const int64_t base = r * cols + h * head_dim;
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = x[base + i0], x1 = x[base + i1];
    rotate_pair(x0, x1, c, s, out[base + i0], out[base + i1]);
    return;
  }
  const int64_t pass = head_dim - n_rot, t = tid - pairs;
  if (pass <= 0 || t >= rows * heads * pass) return;
  const int64_t d = n_rot + t % pass, h = (t / pass) % heads, r = t / (pass * heads);
  out[r * cols + h * head_dim + d] = x[r * cols + h * head_dim + d];
}

}  // namespace

void rope(const float* x, const int32_t* pos, float* out, int64_t rows, int64_t cols, int64_t head_dim, int64_t n_rot,
          float base, float freq_scale, const float* ff, bool neox, cudaStream_t s) {
  if (head_dim <= 0 || cols % head_dim || n_rot <= 0 || n_rot > head_dim || n_rot % 2)
    cuda_invalid("rope: head_dim must divide the width and n_rot be even and <= head_dim");
  const int64_t heads = cols / head_dim;
  const int64_t n = rows * heads * (n_rot / 2 + (head_dim - n_rot));
  if (n <= 0) return;
  const RopeAngles angles{powf(base, -2.0f / float(n_rot)), freq_scale, ff};
  rope_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, pos, out, rows, cols, head_dim, n_rot, angles, neox);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::backend::cuda
