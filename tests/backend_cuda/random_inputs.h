// Fresh random inputs for the CUDA kernel tests: one seed per test process (printed by the
// tests that report it, so a failure can be replayed) and normal floats from it.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace loom::backend::cuda {

inline uint64_t fresh_seed() {
  static const uint64_t s = std::random_device{}();
  return s;
}

inline std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float scale = 1.f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

}  // namespace loom::backend::cuda
