#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace bench {
namespace {

// splitmix64: small, fast, and identical on every platform (std distributions are not).
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return size_t(next() % n); }
};

double sorted_quantile(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  double pos = q * double(s.size() - 1);
  size_t i = size_t(pos);
  double frac = pos - double(i);
  return i + 1 < s.size() ? s[i] * (1 - frac) + s[i + 1] * frac : s[i];
}

}  // namespace

double quantile(std::vector<double> xs, double q) {
  std::sort(xs.begin(), xs.end());
  return sorted_quantile(xs, q);
}

Summary summarize(const std::vector<double>& xs) {
  Summary s;
  s.n = xs.size();
  if (xs.empty()) return s;
  std::vector<double> v = xs;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0;
  s.median = s.p50 = sorted_quantile(v, 0.5);
  s.p95 = sorted_quantile(v, 0.95);
  s.p99 = sorted_quantile(v, 0.99);
  return s;
}

PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b,
                         size_t resamples, uint64_t seed) {
  if (a.size() != b.size()) loom::fail("paired_ratio: {} A samples but {} B samples", a.size(), b.size());
  if (a.empty()) loom::fail("paired_ratio: no pairs");
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0)) loom::fail("paired_ratio: A sample {} is {} (must be > 0)", i, a[i]);
    r[i] = b[i] / a[i];
  }
  PairedRatio out;
  out.pairs = r.size();
  out.resamples = resamples;
  out.median = quantile(r, 0.5);
  SplitMix rng{seed};
  std::vector<double> medians(resamples), pick(r.size());
  for (size_t k = 0; k < resamples; ++k) {
    for (auto& x : pick) x = r[rng.below(r.size())];
    std::nth_element(pick.begin(), pick.begin() + long(pick.size() / 2), pick.end());
    // The exact median of the resample (mean of the two middle values for even n).
    double m = pick[pick.size() / 2];
    if (pick.size() % 2 == 0) m = (m + *std::max_element(pick.begin(), pick.begin() + long(pick.size() / 2))) / 2;
    medians[k] = m;
  }
  std::sort(medians.begin(), medians.end());
  out.ci_lo = sorted_quantile(medians, 0.025);
  out.ci_hi = sorted_quantile(medians, 0.975);
  return out;
}

}  // namespace bench
