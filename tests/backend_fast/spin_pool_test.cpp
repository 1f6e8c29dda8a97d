// The fast backend's spinning pool: every index runs exactly once, every thread takes part in
// run(), an exception from any thread reaches the caller and the pool stays usable.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu/fast/spin_pool.h"

using loom::backend::cpu::fast::SpinPool;

TEST(SpinPool, EveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    SpinPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.for_each(n, [&](int64_t i, int t) {
        ASSERT_GE(t, 0);
        ASSERT_LT(t, threads);
        hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "index " << i << " threads " << threads;
    }
  }
}

TEST(SpinPool, ManyBackToBackSections) {
  SpinPool pool(3);  // more threads than this machine's cores: workers often join late
  for (int rep = 0; rep < 2000; ++rep) {
    std::atomic<int64_t> sum{0};
    pool.for_each(16, [&](int64_t i, int) { sum.fetch_add(i + 1); });
    ASSERT_EQ(sum.load(), 16 * 17 / 2) << "section " << rep;
  }
}

TEST(SpinPool, WakesAfterSleeping) {
  SpinPool pool(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers have gone to sleep
  std::atomic<int> count{0};
  pool.for_each(100, [&](int64_t, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 100);
}

TEST(SpinPool, ExceptionsPropagate) {
  SpinPool pool(2);
  EXPECT_THROW(pool.for_each(100, [](int64_t i, int) {
    if (i == 57) throw std::runtime_error("index failed");
  }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.for_each(10, [&](int64_t, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 10);
}
