// Deterministic random numbers that are the same on every platform and standard library
// (std::normal_distribution is not): splitmix64 and Box-Muller.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace loom::synth {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  // The generator after `n` calls of next() from `seed`: its state only counts (a stream can be
  // cut into parts generated on several threads, with the same numbers).
  static SplitMix64 at(uint64_t seed, uint64_t n) { return SplitMix64(seed + n * 0x9e3779b97f4a7c15ull); }
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below is finite.
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

class Normal {
 public:
  explicit Normal(uint64_t seed) : r_(seed) {}
  // The stream from its value `index` on (even: values come in pairs, two uniforms a pair).
  static Normal at(uint64_t seed, uint64_t index) { return Normal(SplitMix64::at(seed, index)); }
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = r_.uniform(), u2 = r_.uniform();
    double m = std::sqrt(-2.0 * std::log(u1));
    spare_ = m * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return m * std::cos(2.0 * M_PI * u2);
  }

 private:
  explicit Normal(SplitMix64 r) : r_(r) {}
  SplitMix64 r_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// FNV-1a of a name mixed with the seed: each tensor gets its own stream, independent of order.
inline uint64_t stream_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return SplitMix64(seed ^ h).next();
}

}  // namespace loom::synth
