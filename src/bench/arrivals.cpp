#include "bench/arrivals.h"

#include <cmath>

#include <fmt/format.h>

#include "bench/request_set.h"
#include "common/error.h"

namespace bench {

std::string Arrivals::str() const {
  if (kind == Kind::closed_loop) return fmt::format("closed-loop, {} concurrent", concurrency);
  return fmt::format("Poisson {:g} req/s, seed {}", rate, seed);
}

std::vector<double> poisson_send_times(size_t count, double rate, uint64_t seed) {
  if (!(rate > 0) || !std::isfinite(rate)) loom::fail("a Poisson arrival rate must be a positive number, not {}", rate);
  SeededRng rng{seed ^ 0xa771a15ull};
  std::vector<double> t;
  double now = 0;
  for (size_t i = 0; i < count; ++i) {
    t.push_back(now);
    now += -std::log(1 - rng.uniform()) / rate;  // 1 - u is in (0, 1]: no log(0)
  }
  return t;
}

}  // namespace bench
