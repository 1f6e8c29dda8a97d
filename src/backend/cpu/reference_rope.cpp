// Rotary position embedding as ggml_rope_ext computes it on the CPU (no YaRN extrapolation):
// theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factor_i, built by repeated
// multiplication in fp32 as ggml's rope cache does. "normal" rotates pairs (2i, 2i+1) of each
// head (llama, GPT-J style); "neox" rotates (i, i + n_rot/2) (qwen, gemma, phi3). Dimensions
// beyond n_rot pass through.
#include <cmath>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "common/error.h"

namespace loom::backend::cpu {

void kernel_rope(KernelArgs& a) {
  if (!a.in[0] || !a.in[1]) loom::fail("%{}: rope takes a value and positions", a.op.result);
  const Tensor& x = *a.in[0];
  const Tensor& pos = *a.in[1];
  const passes::RopeAttrs ra = passes::rope_attrs(a.op);
  const int64_t head_dim = ra.head_dim, n_rot = ra.n_rot;
  const float base = float(ra.base), freq_scale = float(ra.freq_scale);
  if (head_dim <= 0 || x.cols % head_dim != 0) loom::fail("%{}: head_dim {} does not divide width {}", a.op.result, head_dim, x.cols);
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2) loom::fail("%{}: n_rot {} invalid for head_dim {}", a.op.result, n_rot, head_dim);
  const float* ff = nullptr;
  if (a.op.operands.size() > 2) {
    ff = a.dense[2];
    if (!ff || int64_t(a.weight[2]->elements()) != n_rot / 2)
      loom::fail("%{}: frequency factors must be a weight of {} elements", a.op.result, n_rot / 2);
  }
  const bool neox = ra.neox;
  const int64_t heads = x.cols / head_dim, half = n_rot / 2;
  const float theta_scale = std::pow(base, -2.0f / float(n_rot));
  a.out.f = x.f;
  std::vector<float> cs(n_rot);  // cos, sin per pair
  for (int64_t t = 0; t < x.rows; ++t) {
    float theta = float(pos.i[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float th = freq_scale * (ff ? theta / ff[i] : theta);
      cs[2 * i] = std::cos(th);
      cs[2 * i + 1] = std::sin(th);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < heads; ++h) {
      const float* xi = x.f.data() + t * x.cols + h * head_dim;
      float* o = a.out.f.data() + t * x.cols + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = xi[i0], x1 = xi[i1];
        o[i0] = x0 * c - x1 * s;
        o[i1] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace loom::backend::cpu
