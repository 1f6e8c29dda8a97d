// Row lookups, normalisation and elementwise ops of the fast backend. Each works on whole
// rows, in parallel over rows when the job is big enough (prefill) and on the calling thread
// otherwise (decode), with the same semantics as reference_pointwise.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/vec_math.h"
#include "common/error.h"
#include "quant/quant.h"

namespace loom::backend::cpu::fast {

void run_embed(const Step& s, Exec& e) {
  const gguf::TensorInfo* t = s.table;
  const int64_t vocab = int64_t(t->rows()), width = s.cols;
  const size_t rb = loom::quant::row_size(t->type, width);
  for (int64_t r = 0; r < e.rows; ++r)
    if (e.tokens[r] < 0 || e.tokens[r] >= vocab)
      loom::fail("token id {} is outside the vocabulary [0, {})", e.tokens[r], vocab);
  float* out = e.value(s.out);
  parallel_rows(e, e.rows, width * 4, [&](int64_t b, int64_t en) {
    for (int64_t r = b; r < en; ++r)
      loom::quant::dequantize_row(t->type, t->data + size_t(e.tokens[r]) * rb, out + r * width, width);
  });
}

void run_rms_norm(const Step& s, Exec& e) {
  const float* x = e.value(s.in[0]);
  float* out = e.value(s.out);
  const int64_t g = s.group, per_row = s.cols / g;
  const float eps = s.f0;
  const float* w = s.vec;
  parallel_rows(e, e.rows, s.cols, [&](int64_t b, int64_t en) {
    for (int64_t i = b * per_row; i < en * per_row; ++i) {
      const float* xi = x + i * g;
      const float mean = float(sum_squares(xi, g) / double(g));  // as ggml: fp32 mean of a double sum
      scale_mul_row(xi, 1.0f / std::sqrt(mean + eps), w, out + i * g, g);
    }
  });
}

void run_binary(const Step& s, Exec& e) {
  const float* a = e.value(s.in[0]);
  const bool row_b = s.in[1] < 0;  // a 1-D weight broadcast over rows
  const float* b = row_b ? s.vec : e.value(s.in[1]);
  float* out = e.value(s.out);
  const int64_t n = s.cols;
  const StepKind kind = s.kind;
  parallel_rows(e, e.rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* ar = a + r * n;
      const float* br = row_b ? b : b + r * n;
      float* o = out + r * n;
      switch (kind) {
        case StepKind::add:
          for (int64_t c = 0; c < n; ++c) o[c] = ar[c] + br[c];
          break;
        case StepKind::mul:
          for (int64_t c = 0; c < n; ++c) o[c] = ar[c] * br[c];
          break;
        case StepKind::swiglu: swiglu_row(ar, br, o, n); break;
        case StepKind::geglu: geglu_row(ar, br, o, n); break;
        default: loom::fail("%{}: not a binary op", s.op->result);
      }
    }
  });
}

void run_unary(const Step& s, Exec& e) {
  const float* x = e.value(s.in[0]);
  float* out = e.value(s.out);
  const int64_t n = s.cols;
  const float f = s.f0;
  const bool cap = s.kind == StepKind::softcap;
  const float inv = cap ? 1.0f / f : 0.f;  // ggml: scale(1/cap) -> tanh -> scale(cap)
  parallel_rows(e, e.rows, cap ? 16 * n : n, [&](int64_t r0, int64_t r1) {
    const float* xi = x + r0 * n;
    float* o = out + r0 * n;
    const int64_t m = (r1 - r0) * n;
    if (cap)
      for (int64_t i = 0; i < m; ++i) o[i] = std::tanh(xi[i] * inv) * f;
    else
      for (int64_t i = 0; i < m; ++i) o[i] = xi[i] * f;
  });
}

void run_slice(const Step& s, Exec& e) {
  const float* x = e.value(s.in[0]);
  float* out = e.value(s.out);
  for (int64_t r = 0; r < e.rows; ++r)
    std::memcpy(out + r * s.cols, x + r * s.in_cols + s.start, size_t(s.cols) * sizeof(float));
}

}  // namespace loom::backend::cpu::fast
