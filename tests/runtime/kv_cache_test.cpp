// Block allocation, rollback and overflow of the paged KV cache.
#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "runtime/kv_cache.h"

using namespace loom;
using runtime::KvCache;

TEST(KvCache, BlocksAllocatedOnDemandAndFreedOnRollback) {
  KvCache kv({{2, 4, 4}, {2, 4, 4}}, {backend::KvElem::f16, 32, 2, 8});
  EXPECT_EQ(kv.free_blocks(), 8);
  kv.reserve(0, 9);  // two blocks
  EXPECT_EQ(kv.free_blocks(), 6);
  EXPECT_EQ(kv.length(0), 9);
  kv.reserve(1, 3);
  EXPECT_EQ(kv.free_blocks(), 5);
  kv.truncate(0, 8);  // back to one block
  EXPECT_EQ(kv.free_blocks(), 6);
  EXPECT_EQ(kv.length(0), 8);
  kv.clear(1);
  EXPECT_EQ(kv.free_blocks(), 7);
}

TEST(KvCache, RowsKeepTheirContentAcrossGrowthAndRollback) {
  KvCache kv({{1, 4, 4}}, {backend::KvElem::f32, 16, 1, 4});
  kv.reserve(0, 6);
  for (int p = 0; p < 6; ++p) {
    float row[4] = {float(p), 1, 2, 3};
    std::memcpy(kv.k_row(0, 0, p), row, sizeof row);
  }
  kv.truncate(0, 5);
  EXPECT_THROW(kv.k_row(0, 0, 5), Error);  // forgotten
  kv.reserve(0, 12);
  for (int p = 0; p < 5; ++p) EXPECT_EQ(static_cast<float*>(kv.k_row(0, 0, p))[0], float(p));
}

TEST(KvCache, SequencesDoNotShareRows) {
  KvCache kv({{1, 2, 2}}, {backend::KvElem::f32, 8, 2, 4});
  kv.reserve(0, 4);
  kv.reserve(1, 4);
  EXPECT_NE(kv.k_row(0, 0, 1), kv.k_row(0, 1, 1));
  EXPECT_NE(kv.v_row(0, 0, 3), kv.k_row(0, 0, 3));
}

TEST(KvCache, OverflowAndBadIndicesAreErrors) {
  KvCache kv({{1, 4, 4}}, {backend::KvElem::f16, 10, 1, 4});
  kv.reserve(0, 10);
  try {
    kv.reserve(0, 11);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context length exceeded"), std::string::npos);
  }
  EXPECT_THROW(kv.reserve(1, 1), Error);
  EXPECT_THROW(kv.k_row(1, 0, 0), Error);
  EXPECT_THROW(kv.truncate(0, -1), Error);
}
