#include "bench/stats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "common/error.h"

TEST(Stats, QuantilesInterpolateLikeNumpy) {
  std::vector<double> xs = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(bench::quantile(xs, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(bench::quantile(xs, 0.0), 1);
  EXPECT_DOUBLE_EQ(bench::quantile(xs, 1.0), 4);
  EXPECT_DOUBLE_EQ(bench::quantile(xs, 0.25), 1.75);
  auto s = bench::summarize({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.stddev, 1.5811388, 1e-6);
  EXPECT_DOUBLE_EQ(s.p95, 4.8);
}

TEST(Stats, PairedRatioFindsAKnownSpeedup) {
  // B is 1.5x A with 2% multiplicative noise: the CI must contain 1.5 and exclude 1.
  uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(0.98, 1.02), base(10, 20);
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) {
    double x = base(rng);
    a.push_back(x * noise(rng));
    b.push_back(1.5 * x * noise(rng));
  }
  auto r = bench::paired_ratio(a, b);
  EXPECT_LE(r.ci_lo, 1.5) << "seed " << seed;
  EXPECT_GE(r.ci_hi, 1.5) << "seed " << seed;
  EXPECT_GT(r.ci_lo, 1.4) << "seed " << seed;
  EXPECT_LT(r.ci_hi, 1.6) << "seed " << seed;
  EXPECT_LE(r.ci_lo, r.median);
  EXPECT_GE(r.ci_hi, r.median);
}

TEST(Stats, PairedRatioOfIdenticalSeriesIsOne) {
  std::vector<double> a = {3, 5, 7, 9};
  auto r = bench::paired_ratio(a, a);
  EXPECT_DOUBLE_EQ(r.median, 1);
  EXPECT_DOUBLE_EQ(r.ci_lo, 1);
  EXPECT_DOUBLE_EQ(r.ci_hi, 1);
}

TEST(Stats, PairedRatioRejectsBadInput) {
  EXPECT_THROW(bench::paired_ratio({1, 2}, {1}), loom::Error);
  EXPECT_THROW(bench::paired_ratio({}, {}), loom::Error);
  EXPECT_THROW(bench::paired_ratio({0, 1}, {1, 1}), loom::Error);
}
