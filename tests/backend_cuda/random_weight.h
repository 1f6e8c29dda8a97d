// A random quantized weight for the CUDA kernel tests: its stored rows quantized from fresh
// random floats, the reference dequantization (N x K, the CPU reference's), and the packed rows
// on the device; ref_dot is the double-precision dot the integer-dot kernels are held to.
#pragma once
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"
#include "random_inputs.h"

namespace loom::backend::cuda {

struct Weight {
  gguf::TensorType type;
  int64_t N, K;
  std::vector<float> deq;  // N x K reference dequantization
  DeviceBuffer packed;
  size_t row_bytes = 0;
};

// N stored rows of type t, each quantized from fresh normal floats (also the kernel bench's
// weights, where a dequantized copy of the 8B head would not fit).
inline std::vector<uint8_t> random_rows(std::mt19937_64& rng, gguf::TensorType t, int64_t N, int64_t K) {
  const size_t rb = quant::row_size(t, K);
  std::vector<uint8_t> stored(rb * size_t(N));
  for (int64_t n = 0; n < N; ++n) {
    const auto src = random_floats(rng, size_t(K));
    quant::quantize_row(t, src.data(), stored.data() + n * rb, K);
  }
  return stored;
}

inline Weight random_weight(std::mt19937_64& rng, gguf::TensorType t, int64_t N, int64_t K) {
  Weight w{t, N, K, std::vector<float>(size_t(N * K)), {}, 0};
  const size_t rb = quant::row_size(t, K);
  const std::vector<uint8_t> stored = random_rows(rng, t, N, K);
  for (int64_t n = 0; n < N; ++n) quant::dequantize_row(t, stored.data() + n * rb, w.deq.data() + n * K, K);
  const auto p = pack_rows(t, stored.data(), N, K);
  w.row_bytes = p.size() / size_t(N);
  w.packed = DeviceBuffer::of(p);
  return w;
}

// The bounds on |device - ref_dot| relative to the sum of |terms|. The integer-dot and int8
// tensor-core kernels: f32 sums of exact products. The tiled f16 kernel (MmaTiles): the
// weight's scale and offset and its value each round to f16 (2^-11), the offset before it
// cancels against the scaled code (up to ~4x the weight's magnitude: Q4_0's -8 d against codes
// near 8), and the activation rounds once (2^-11): 2^-11 (1 + 2 x 4) + 2^-11 < 5e-3.
constexpr double kIntDotRel = 1e-5;
constexpr double kF16Rel = 5e-3;

// Dot of weight row n with activation row r (dequantized q8_1), and the sum of |terms|.
inline std::pair<double, double> ref_dot(const Weight& w, const std::vector<float>& xq, int64_t r, int64_t n) {
  double s = 0, mag = 0;
  for (int64_t k = 0; k < w.K; ++k) {
    const double t = double(w.deq[size_t(n * w.K + k)]) * xq[size_t(r * w.K + k)];
    s += t, mag += std::abs(t);
  }
  return {s, mag};
}

}  // namespace loom::backend::cuda
