// When a serving benchmark sends its requests: closed-loop (a fixed number of clients, each
// sending its next request when the last one ends) or open-loop Poisson arrivals at a stated
// rate from a seed (exponential gaps), sent on time whether or not earlier requests have ended.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct Arrivals {
  enum class Kind { closed_loop, poisson } kind = Kind::closed_loop;
  int concurrency = 1;  // closed-loop clients
  double rate = 0;      // Poisson: requests per second
  uint64_t seed = 1;
  std::string str() const;  // "closed-loop, 8 concurrent" / "Poisson 2 req/s, seed 1"
};

// Send times (seconds after the start) of `count` Poisson arrivals: cumulative exponential
// gaps of mean 1/rate drawn from `seed`; the first request goes at 0.
std::vector<double> poisson_send_times(size_t count, double rate, uint64_t seed);

}  // namespace bench
