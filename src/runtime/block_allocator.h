// The paged KV pool's bookkeeping: which of its blocks are free, how many sequences reference
// each, and how many are promised to admitted sequences. The storage itself is the backend's
// (backend::KvStorage); this class only hands out block numbers.
//
// Reservations are what make a full pool impossible in the middle of a step: a sequence is
// admitted only when every block it may still need can be reserved, and take_reserved() then
// always succeeds. A block the prefix cache indexes is not freed at its last release but
// parked there; when the free list is empty, take_reserved() evicts the least recently parked
// one. Parked blocks therefore count as available.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/prefix_cache.h"

namespace loom::runtime {

class BlockAllocator {
 public:
  BlockAllocator(int32_t n_blocks, PrefixCache& cache);

  int32_t n_blocks() const { return int32_t(refs_.size()); }
  int32_t n_free() const { return int32_t(free_.size()); }
  int32_t in_use() const { return in_use_; }  // blocks some sequence references
  int32_t n_reserved() const { return reserved_; }
  // Blocks a new reservation may still claim: free + parked - reserved.
  int32_t available() const;

  // Promises n blocks to a caller; false (nothing promised) when they cannot all be had.
  bool reserve(int32_t n);
  void unreserve(int32_t n);
  // One promised block, with one reference: from the free list, else evicted from the cache.
  int32_t take_reserved();
  // One more reference to a block in use or parked (a parked one leaves the cache's LRU and
  // so stops being available: count it before reserving).
  void share(int32_t block);
  // One reference fewer; at none the block is parked when the cache indexes it, else freed.
  void release(int32_t block);
  int32_t ref_count(int32_t block) const;

 private:
  void check(int32_t block) const;
  PrefixCache& cache_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
  int32_t reserved_ = 0, in_use_ = 0;
};

}  // namespace loom::runtime
