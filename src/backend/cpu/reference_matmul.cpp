// y = x · Wᵀ with W [N x K] in its stored type, as ggml-cpu computes it on x86: each activation
// row is first converted to the weight type's vec_dot_type as ggml's run-time quantizers do
// (Q8_0, Q8_1 or Q8_K for the block types, F16/BF16 for those float types) and every output is
// quant::ggml::dot of a stored weight row with it -- the integer block sums and the float lanes
// of the kernel llama.cpp picks for a batch of that many rows (quant/ggml_order.h). F32
// weights are dotted in f32. Threads split the output rows.
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "common/error.h"
#include "quant/ggml_order.h"
#include "quant/quant.h"

namespace loom::backend::cpu {

void kernel_matmul(KernelArgs& a) {
  const gguf::TensorInfo* w = a.weight[1];
  if (!a.in[0] || !w) loom::fail("%{}: matmul takes a value and a weight", a.op.result);
  const Tensor& x = *a.in[0];
  const int64_t k = int64_t(w->row_elems()), n = int64_t(w->rows()), t = x.rows;
  if (x.cols != k) loom::fail("%{}: activation width {} but weight @{} rows have {}", a.op.result, x.cols, a.op.operands[1].name, k);
  if (a.out.cols != n) loom::fail("%{}: weight @{} has {} rows but result width is {}", a.op.result, a.op.operands[1].name, n, a.out.cols);
  const size_t row_bytes = loom::quant::row_size(w->type, k);
  const gguf::TensorType act_type = loom::quant::vec_dot_type(w->type);
  const bool plain_f32 = act_type == gguf::TensorType::F32;
  a.out.f.assign(t * n, 0.f);
  float* y = a.out.f.data();
  const float* xs = x.f.data();
  // The activation rows in the vec_dot type, converted once for all weight rows.
  const size_t act_bytes = plain_f32 ? 0 : loom::quant::row_size(act_type, k);
  std::vector<uint8_t> acts(size_t(t) * act_bytes);
  if (!plain_f32)
    a.ctx.pool.parallel_for(t, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) loom::quant::ggml::quantize_activations(act_type, xs + i * k, acts.data() + i * act_bytes, k);
    });
  a.ctx.pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const uint8_t* src = w->data + size_t(r) * row_bytes;
      if (plain_f32) {
        for (int64_t i = 0; i < t; ++i) y[i * n + r] = dot_f32(xs + i * k, reinterpret_cast<const float*>(src), k);
      } else {
        for (int64_t i = 0; i < t; ++i) y[i * n + r] = loom::quant::ggml::dot(w->type, src, acts.data() + i * act_bytes, k, t);
      }
    }
  });
}

}  // namespace loom::backend::cpu
