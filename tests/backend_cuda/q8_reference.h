// The scalar q8_1 quantizer the CUDA kernel tests compare the device's codes with.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace loom::backend::cuda {

// The q8_1 contract: per 32 elements d = amax / 127, codes round(x * (1 / d)) with ties away
// from zero (0 when d is 0), and the sum d * sum(codes).
struct Q8Rows {
  std::vector<int8_t> q;
  std::vector<float> d, sum;
  std::vector<float> dequantized() const {
    std::vector<float> x(q.size());
    for (size_t i = 0; i < q.size(); ++i) x[i] = d[i / 32] * float(q[i]);
    return x;
  }
};

inline Q8Rows quantize_ref(const std::vector<float>& x, int64_t ldx, int64_t rows, int64_t K) {
  Q8Rows o;
  o.q.resize(size_t(rows * K));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* v = x.data() + r * ldx + b * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int c = int(std::round(v[i] * id));
        o.q[size_t(r * K + b * 32 + i)] = int8_t(c);
        sum += c;
      }
      o.d.push_back(d);
      o.sum.push_back(d * float(sum));
    }
  return o;
}

}  // namespace loom::backend::cuda
