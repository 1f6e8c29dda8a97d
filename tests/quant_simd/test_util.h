// Shared helpers of the quant::simd tests: ISA levels to sweep and random inputs.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/simd/kernels.h"

namespace loom::quant::simd::test {

inline std::vector<Isa> levels() {
  std::vector<Isa> v{Isa::scalar};
  if (best_isa() >= Isa::avx2) v.push_back(Isa::avx2);
  if (best_isa() >= Isa::avx512) v.push_back(Isa::avx512);
  return v;
}

inline const char* level_name(Isa l) {
  return l == Isa::avx512 ? "avx512" : l == Isa::avx2 ? "avx2" : "scalar";
}

// Restores the default level when a test ends.
struct IsaGuard {
  Isa saved = isa();
  ~IsaGuard() { force_isa(saved); }
};

inline uint64_t fresh_seed() { return std::random_device{}() | (uint64_t(std::random_device{}()) << 32); }

// Floats of mixed scale: most rows N(0, s) with s in [1e-3, 10], some outliers and zeros.
inline std::vector<float> random_floats(std::mt19937_64& rng, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> ls(-3.0f, 1.0f);
  const float s = std::pow(10.0f, ls(rng));
  std::normal_distribution<float> nd(0.0f, s);
  std::uniform_int_distribution<int> pick(0, 199);
  for (auto& x : v) {
    const int p = pick(rng);
    x = p == 0 ? 0.0f : p == 1 ? 20 * nd(rng) : nd(rng);
  }
  return v;
}

}  // namespace loom::quant::simd::test
