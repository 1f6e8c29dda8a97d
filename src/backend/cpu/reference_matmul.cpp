// y = x · Wᵀ with W [N x K] in its stored type: each weight row is dequantized once (quant's
// reference dequantize_row) into a per-thread buffer and dotted with every activation row, so
// a prefill of T tokens pays the dequantization once. Threads split the output rows.
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "common/error.h"
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
  const bool plain_f32 = w->type == gguf::TensorType::F32;
  a.out.f.assign(t * n, 0.f);
  float* y = a.out.f.data();
  const float* xs = x.f.data();
  a.ctx.pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
    std::vector<float> row(plain_f32 ? 0 : k);
    for (int64_t r = b; r < e; ++r) {
      const uint8_t* src = w->data + size_t(r) * row_bytes;
      const float* wr = reinterpret_cast<const float*>(src);
      if (!plain_f32) {
        loom::quant::dequantize_row(w->type, src, row.data(), k);
        wr = row.data();
      }
      for (int64_t i = 0; i < t; ++i) y[i * n + r] = dot_f32(xs + i * k, wr, k);
    }
  });
}

}  // namespace loom::backend::cpu
