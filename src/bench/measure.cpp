#include "bench/measure.h"

#include <chrono>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_tokens(int n, int64_t vocab, uint64_t& state) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: reproducible
    x = int32_t((state >> 33) % uint64_t(vocab));
  }
  return t;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void fill_depth(loom::runtime::Session& s, int depth, uint64_t& state) {
  s.reset();
  if (depth > 0) s.prefill(random_tokens(depth, s.vocab_size(), state));
}

}  // namespace

Sample measure_pp(loom::runtime::Session& s, int n, int depth, uint64_t seed) {
  fill_depth(s, depth, seed);
  auto toks = random_tokens(n, s.vocab_size(), seed);
  auto t0 = Clock::now();
  s.prefill(toks);
  return {since(t0), {}};
}

Sample measure_tg(loom::runtime::Session& s, int n, int depth, uint64_t seed) {
  fill_depth(s, depth, seed);
  auto toks = random_tokens(n, s.vocab_size(), seed);
  Sample out;
  out.token_seconds.reserve(size_t(n));
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto ti = Clock::now();
    s.decode(toks[size_t(i)]);
    out.token_seconds.push_back(since(ti));
  }
  out.seconds = since(t0);
  return out;
}

}  // namespace bench
