// Statistics for measurements: order statistics, spread, and the paired bootstrap that
// Loom's paired comparison asks for (A and B interleaved, ratio per pair; docs/architecture.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bench {

struct Summary {
  size_t n = 0;
  double mean = 0, stddev = 0;
  double min = 0, median = 0, max = 0;
  double p50 = 0, p95 = 0, p99 = 0;
};

// Linear-interpolated quantile (q in [0, 1]) of unsorted samples; 0 for an empty set.
double quantile(std::vector<double> xs, double q);
Summary summarize(const std::vector<double>& xs);

struct PairedRatio {
  double median = 0;    // median of per-pair ratios b[i] / a[i]
  double ci_lo = 0;     // bootstrap 95% confidence interval of that median
  double ci_hi = 0;
  size_t pairs = 0;
  size_t resamples = 0;
};

// Ratio b/a per pair, median, and a percentile bootstrap CI over `resamples` resamplings of
// the pairs (deterministic for a given seed). Throws loom::Error on unequal or empty input.
PairedRatio paired_ratio(const std::vector<double>& a, const std::vector<double>& b,
                         size_t resamples = 10000, uint64_t seed = 0x5eed);

}  // namespace bench
