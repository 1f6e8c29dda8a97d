#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cstdio>
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
  // B is 1.5x A with 2% multiplicative noise. A 95% interval misses the truth one time in twenty
  // by design, so one random draw cannot be the test: over 200 fixed-seed experiments the interval
  // must contain 1.5 about 95% of the time, always exclude 1 and stay narrow.
  std::uniform_real_distribution<double> noise(0.98, 1.02), base(10, 20);
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    std::mt19937_64 rng(1000 + t);
    std::vector<double> a, b;
    for (int i = 0; i < 30; ++i) {
      double x = base(rng);
      a.push_back(x * noise(rng));
      b.push_back(1.5 * x * noise(rng));
    }
    auto r = bench::paired_ratio(a, b, 2000, 77 + t);
    covered += r.ci_lo <= 1.5 && r.ci_hi >= 1.5;
    ASSERT_GT(r.ci_lo, 1.4) << "trial " << t;
    ASSERT_LT(r.ci_hi, 1.6) << "trial " << t;
    ASSERT_LE(r.ci_lo, r.median) << "trial " << t;
    ASSERT_GE(r.ci_hi, r.median) << "trial " << t;
  }
  double coverage = double(covered) / trials;
  std::printf("paired_ratio 95%% CI covered the true ratio in %d of %d experiments\n", covered, trials);
  EXPECT_GE(coverage, 0.88);
  EXPECT_LE(coverage, 0.995);
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
