#include "runtime/prefix_cache.h"

#include <algorithm>

#include "common/error.h"

namespace loom::runtime {

namespace {
// splitmix64's finalizer: a cheap mix with full avalanche, enough for keys that are compared
// in full on lookup anyway.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

BlockKey chain_key(BlockKey parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix(h ^ (uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ull));
  return h == 0 ? 1 : h;  // 0 is the root's key
}

int32_t PrefixCache::find(BlockKey key, BlockKey parent, std::span<const int32_t> tokens) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  const Entry& e = it->second;
  if (e.parent != parent || !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) return -1;
  return e.block;
}

bool PrefixCache::insert(BlockKey key, BlockKey parent, std::span<const int32_t> tokens, int32_t block) {
  if (by_key_.count(key) || by_block_.count(block)) return false;
  by_key_.emplace(key, Entry{parent, {tokens.begin(), tokens.end()}, block});
  by_block_.emplace(block, key);
  return true;
}

void PrefixCache::park(int32_t block) {
  if (!holds(block)) loom::fail("prefix cache: block {} is not indexed", block);
  if (lru_pos_.count(block)) return;
  lru_pos_[block] = lru_.insert(lru_.end(), block);
}

void PrefixCache::unpark(int32_t block) {
  auto it = lru_pos_.find(block);
  if (it == lru_pos_.end()) return;
  lru_.erase(it->second);
  lru_pos_.erase(it);
}

bool PrefixCache::parked(int32_t block) const { return lru_pos_.count(block) != 0; }

int32_t PrefixCache::evict() {
  if (lru_.empty()) return -1;
  const int32_t b = lru_.front();
  lru_.pop_front();
  lru_pos_.erase(b);
  auto k = by_block_.find(b);
  by_key_.erase(k->second);
  by_block_.erase(k);
  return b;
}

}  // namespace loom::runtime
