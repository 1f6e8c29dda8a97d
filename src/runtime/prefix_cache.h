// The prefix cache: full KV blocks indexed by the tokens they hold and everything before them,
// so a request whose prompt starts with the same tokens (a system prompt, the previous turns
// of a chat) takes the blocks instead of computing them again.
//
// A block's key is a chained hash: hash(parent key, the block's tokens), the parent being the
// key of the block before it (0 for the first). Two blocks with one key hold the same
// positions of the same token prefix, so their KV rows are equal. The cache stores each key's
// parent key and tokens and compares them on lookup, so only a collision of two 64-bit parent
// keys could confuse two prefixes.
//
// Blocks the cache indexes but no sequence references are "parked", least recently used
// first; the allocator evicts from the front of that list when its free list is empty.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace loom::runtime {

using BlockKey = uint64_t;

BlockKey chain_key(BlockKey parent, std::span<const int32_t> tokens);

class PrefixCache {
 public:
  // The block indexed under `key` when it holds `tokens` after `parent`, else -1.
  int32_t find(BlockKey key, BlockKey parent, std::span<const int32_t> tokens) const;
  // Indexes `block` under `key`; false (and nothing changes) when the key already has a
  // block or the block is indexed under another key.
  bool insert(BlockKey key, BlockKey parent, std::span<const int32_t> tokens, int32_t block);
  bool holds(int32_t block) const { return by_block_.count(block) != 0; }

  // A held block lost its last reference: it stays indexed, and becomes evictable.
  void park(int32_t block);
  // A parked block is referenced again.
  void unpark(int32_t block);
  bool parked(int32_t block) const;
  int32_t n_parked() const { return int32_t(lru_.size()); }
  // Drops the least recently parked block from the index and returns it; -1 when none.
  int32_t evict();
  int32_t n_indexed() const { return int32_t(by_block_.size()); }

 private:
  struct Entry {
    BlockKey parent;
    std::vector<int32_t> tokens;
    int32_t block;
  };
  std::unordered_map<BlockKey, Entry> by_key_;
  std::unordered_map<int32_t, BlockKey> by_block_;
  std::list<int32_t> lru_;  // parked blocks, oldest first
  std::unordered_map<int32_t, std::list<int32_t>::iterator> lru_pos_;
};

}  // namespace loom::runtime
