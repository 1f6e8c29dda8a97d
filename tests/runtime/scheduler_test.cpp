// The step scheduler and the block allocator's bookkeeping, without a model.
#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/block_allocator.h"
#include "runtime/scheduler.h"

using namespace loom::runtime;

TEST(Scheduler, DecodeFirstThenPrefillUnderTheBudget) {
  const std::vector<SeqProgress> s = {{30, false}, {1, true}, {5, false}, {1, true}};
  auto st = schedule_step(s, 16);
  ASSERT_EQ(st.size(), 3u);  // two decode tokens, then 14 of the first prompt; the second waits
  EXPECT_EQ(st[0].seq, 1u);
  EXPECT_EQ(st[1].seq, 3u);
  EXPECT_TRUE(st[0].logits && st[1].logits);
  EXPECT_EQ(st[2].seq, 0u);
  EXPECT_EQ(st[2].count, 14);
  EXPECT_FALSE(st[2].logits);
  st = schedule_step(s, 64);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[2].count, 30);
  EXPECT_TRUE(st[2].logits);  // the chunk ends the prompt
  EXPECT_EQ(st[3].seq, 2u);
  EXPECT_EQ(st[3].count, 5);
}

TEST(Scheduler, DecodersBeyondTheBudgetTakeTurns) {
  const std::vector<SeqProgress> s(5, {1, true});
  auto a = schedule_step(s, 2, 0), b = schedule_step(s, 2, 2), c = schedule_step(s, 2, 4);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].seq, 0u);
  EXPECT_EQ(a[1].seq, 1u);
  EXPECT_EQ(b[0].seq, 2u);
  EXPECT_EQ(c[0].seq, 0u);  // 4, then 0: sorted into admission order
  EXPECT_EQ(c[1].seq, 4u);
  EXPECT_THROW(schedule_step(s, 0), loom::Error);
}

TEST(BlockAllocator, ReservationsRefcountsAndParking) {
  PrefixCache cache;
  BlockAllocator a(4, cache);
  EXPECT_TRUE(a.reserve(3));
  EXPECT_FALSE(a.reserve(2));  // 1 left
  const int32_t b0 = a.take_reserved(), b1 = a.take_reserved();
  EXPECT_EQ(a.in_use(), 2);
  EXPECT_EQ(a.n_reserved(), 1);
  const std::vector<int32_t> toks = {1, 2, 3, 4};
  const BlockKey k = chain_key(0, toks);
  ASSERT_TRUE(cache.insert(k, 0, toks, b0));
  EXPECT_FALSE(cache.insert(k, 0, toks, b1));  // one block per key
  a.share(b0);
  EXPECT_EQ(a.ref_count(b0), 2);
  a.release(b0);
  a.release(b0);  // indexed: parked, not freed
  EXPECT_EQ(cache.n_parked(), 1);
  EXPECT_EQ(a.available(), 4 - 1 - 1);  // b1 in use, one reserved; the parked one counts
  EXPECT_EQ(cache.find(k, 0, toks), b0);
  EXPECT_EQ(cache.find(k, 0, std::vector<int32_t>{1, 2, 3, 5}), -1);  // same key, other tokens
  a.share(b0);  // taken again from the cache
  EXPECT_EQ(cache.n_parked(), 0);
  a.release(b0);
  a.release(b1);
  a.unreserve(1);
  EXPECT_TRUE(a.reserve(4));  // 3 free + 1 parked
  for (int i = 0; i < 4; ++i) a.take_reserved();
  EXPECT_EQ(cache.n_indexed(), 0);  // the parked block was evicted to make the fourth
  EXPECT_THROW(a.take_reserved(), loom::Error);
  EXPECT_THROW(a.release(7), loom::Error);
}
