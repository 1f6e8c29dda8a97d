// Row lookups, normalisation and elementwise ops of the reference executor.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backend/cpu/reference_kernels.h"
#include "common/error.h"
#include "quant/ggml_order.h"
#include "quant/quant.h"

namespace loom::backend::cpu {

namespace {

// The second operand of a binary op: a value of the same shape, or a row broadcast over rows
// (a 1-D weight such as a bias, or a one-row value).
struct RowSource {
  const float* data;
  int64_t rows;
};

RowSource second_operand(KernelArgs& a) {
  const Tensor& x = *a.in[0];
  if (a.in[1]) {
    const Tensor& b = *a.in[1];
    if (b.cols != x.cols || (b.rows != x.rows && b.rows != 1))
      loom::fail("%{}: operand shapes {}x{} and {}x{} do not match", a.op.result, x.rows, x.cols, b.rows, b.cols);
    return {b.f.data(), b.rows};
  }
  if (!a.dense[1] || int64_t(a.weight[1]->elements()) != x.cols)
    loom::fail("%{}: weight @{} must be a vector of {} elements", a.op.result, a.op.operands[1].name, x.cols);
  return {a.dense[1], 1};
}

// o = f(x, y) elementwise, y a row-broadcast operand; f may also take the column index.
template <typename F>
void binary(KernelArgs& a, F f) {
  const Tensor& x = *a.in[0];
  const RowSource b = second_operand(a);
  a.out.f.resize(x.rows * x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* xr = x.f.data() + r * x.cols;
    const float* br = b.data + (b.rows == 1 ? 0 : r * x.cols);
    float* o = a.out.f.data() + r * x.cols;
    for (int64_t c = 0; c < x.cols; ++c) {
      if constexpr (std::is_invocable_v<F, float, float, int64_t>) o[c] = f(xr[c], br[c], c);
      else o[c] = f(xr[c], br[c]);
    }
  }
}

template <typename F>
void unary(KernelArgs& a, F f) {
  const Tensor& x = *a.in[0];
  a.out.f.resize(x.f.size());
  for (size_t i = 0; i < x.f.size(); ++i) a.out.f[i] = f(x.f[i]);
}

const Tensor& value_operand(KernelArgs& a, size_t i) {
  if (!a.in[i]) loom::fail("%{}: operand {} must be a value, not a weight", a.op.result, i + 1);
  return *a.in[i];
}

// ggml_silu_f32, what ggml_vec_swiglu_f32 applies past the last whole 16 columns of a row.
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// GELU, tanh approximation. ggml-cpu (GGML_GELU_FP16) evaluates it through a table indexed by
// the fp16 rounding of x and holding fp16 results, saturating beyond ±10; the reference
// reproduces that rounding so geglu models see the same activations as under llama.cpp.
inline float gelu_tanh_exact(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}
inline float gelu_tanh(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  using loom::quant::round_to_fp16;
  return round_to_fp16(gelu_tanh_exact(round_to_fp16(x)));
}

}  // namespace

void kernel_embed(KernelArgs& a) {
  const gguf::TensorInfo* table = a.weight[0];
  const Tensor& tok = value_operand(a, 1);
  if (!table) loom::fail("%{}: embed needs a weight table as its first operand", a.op.result);
  const int64_t vocab = int64_t(table->rows()), width = int64_t(table->row_elems());
  if (width != a.out.cols) loom::fail("%{}: table rows have {} elements, result has {}", a.op.result, width, a.out.cols);
  const size_t row_bytes = loom::quant::row_size(table->type, width);
  a.out.f.resize(a.out.rows * width);
  for (int64_t t = 0; t < a.out.rows; ++t) {
    const int32_t id = tok.i[t];
    if (id < 0 || id >= vocab) loom::fail("token id {} is outside the vocabulary [0, {})", id, vocab);
    loom::quant::dequantize_row(table->type, table->data + size_t(id) * row_bytes, a.out.f.data() + t * width, width);
  }
}

void kernel_rms_norm(KernelArgs& a) {
  const Tensor& x = value_operand(a, 0);
  const float* w = a.dense[1];
  if (!w) loom::fail("%{}: rms_norm needs a weight as its second operand", a.op.result);
  const int64_t g = int64_t(a.weight[1]->elements());
  if (g <= 0 || x.cols % g != 0) loom::fail("%{}: norm group {} does not divide row width {}", a.op.result, g, x.cols);
  const float eps = float(passes::norm_eps(a.op));
  a.out.f.resize(x.f.size());
  const int64_t groups = x.f.size() / g;
  a.ctx.pool.parallel_for(groups, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x.f.data() + i * g;
      float* o = a.out.f.data() + i * g;
      double sum = 0.0;  // as ggml: fp32 squares summed in ggml_float (double)
      for (int64_t c = 0; c < g; ++c) sum += double(xi[c] * xi[c]);
      const float mean = float(sum / double(g));
      const float s = 1.0f / std::sqrt(mean + eps);
      for (int64_t c = 0; c < g; ++c) o[c] = xi[c] * s * w[c];
    }
  });
}

void kernel_add(KernelArgs& a) { binary(a, [](float x, float y) { return x + y; }); }
void kernel_mul(KernelArgs& a) { binary(a, [](float x, float y) { return x * y; }); }

void kernel_scale(KernelArgs& a) {
  const float s = float(passes::scalar_attr(a.op));
  value_operand(a, 0);
  unary(a, [s](float x) { return x * s; });
}

void kernel_softcap(KernelArgs& a) {
  const float cap = float(passes::scalar_attr(a.op));
  if (!(cap > 0)) loom::fail("%{}: softcap cap must be > 0", a.op.result);
  const float inv = 1.0f / cap;  // ggml: scale(1/cap) -> tanh -> scale(cap)
  value_operand(a, 0);
  unary(a, [cap, inv](float x) { return std::tanh(x * inv) * cap; });
}

void kernel_swiglu(KernelArgs& a) {
  value_operand(a, 1);
  // ggml_vec_swiglu_f32 (AVX-512): ggml_v_silu on each whole 16 columns, ggml_silu_f32 after.
  const int64_t vec_end = a.in[0]->cols - a.in[0]->cols % 16;
  binary(a, [vec_end](float g, float u, int64_t c) { return (c < vec_end ? loom::quant::ggml::silu(g) : silu(g)) * u; });
}

void kernel_geglu(KernelArgs& a) {
  value_operand(a, 1);
  binary(a, [](float g, float u) { return gelu_tanh(g) * u; });
}

void kernel_slice(KernelArgs& a) {
  const Tensor& x = value_operand(a, 0);
  const auto [start, size] = passes::slice_attrs(a.op);
  if (start < 0 || size <= 0 || start + size > x.cols)
    loom::fail("%{}: slice [{}, {}) outside row width {}", a.op.result, start, start + size, x.cols);
  if (size != a.out.cols) loom::fail("%{}: slice size {} but result width {}", a.op.result, size, a.out.cols);
  a.out.f.resize(x.rows * size);
  for (int64_t r = 0; r < x.rows; ++r)
    std::memcpy(a.out.f.data() + r * size, x.f.data() + r * x.cols + start, size * sizeof(float));
}

}  // namespace loom::backend::cpu
