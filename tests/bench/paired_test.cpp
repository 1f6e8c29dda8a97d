// The one paired loop (bench/paired.h): both arms in every round, in alternating order (A
// first in even rounds, B first in odd ones, so an order effect cannot always fall on one arm),
// the same round number for both (so both draw the same input), warm-up rounds run but not
// counted, and every run starting once the CPU pool's workers of the run before have stopped
// spinning.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "backend/cpu/fast/spin_pool.h"
#include "bench/paired.h"
#include "common/error.h"

TEST(PairedLoop, InterleavesAbWithWarmupDiscarded) {
  std::string order;
  std::vector<int> rounds_a, rounds_b;
  const auto run = bench::run_paired(
      2, 3,
      [&](int r, bool warm) {
        order += warm ? 'a' : 'A';
        rounds_a.push_back(r);
        return 10.0 + r;
      },
      [&](int r, bool warm) {
        order += warm ? 'b' : 'B';
        rounds_b.push_back(r);
        return 20.0 + r;
      });
  EXPECT_EQ(order, "abbaABBAAB");
  EXPECT_EQ(rounds_a, rounds_b);
  EXPECT_EQ(rounds_a, (std::vector<int>{-2, -1, 0, 1, 2}));
  EXPECT_EQ(run.a, (std::vector<double>{10, 11, 12}));
  EXPECT_EQ(run.b, (std::vector<double>{20, 21, 22}));
}

TEST(PairedLoop, SingleArmAndBadCounts) {
  const auto run = bench::run_paired(0, 2, [](int, bool) { return 1.0; }, {});
  EXPECT_EQ(run.a.size(), 2u);
  EXPECT_TRUE(run.b.empty());
  EXPECT_THROW(bench::run_paired(0, 0, [](int, bool) { return 1.0; }, {}), loom::Error);
}

TEST(PairedLoop, EveryRunStartsAfterThePoolsSpin) {
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> starts, ends;
  const auto arm = [&](int, bool) {
    starts.push_back(Clock::now());
    ends.push_back(Clock::now());
    return 1.0;
  };
  bench::run_paired(1, 3, arm, arm);
  ASSERT_EQ(starts.size(), 8u);
  for (size_t i = 1; i < starts.size(); ++i)
    EXPECT_GE(starts[i] - ends[i - 1], loom::backend::cpu::fast::SpinPool::kSpinFor) << "run " << i;
}
