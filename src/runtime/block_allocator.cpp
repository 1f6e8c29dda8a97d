#include "runtime/block_allocator.h"

#include "common/error.h"

namespace loom::runtime {

BlockAllocator::BlockAllocator(int32_t n_blocks, PrefixCache& cache) : cache_(cache) {
  if (n_blocks <= 0) loom::fail("KV pool: block count must be > 0, got {}", n_blocks);
  refs_.assign(size_t(n_blocks), 0);
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 first
}

void BlockAllocator::check(int32_t block) const {
  if (block < 0 || block >= n_blocks()) loom::fail("KV pool: block {} out of range ({} blocks)", block, n_blocks());
}

int32_t BlockAllocator::available() const { return n_free() + cache_.n_parked() - reserved_; }

bool BlockAllocator::reserve(int32_t n) {
  if (n < 0) loom::fail("KV pool: cannot reserve {} blocks", n);
  if (n > available()) return false;
  reserved_ += n;
  return true;
}

void BlockAllocator::unreserve(int32_t n) {
  if (n < 0 || n > reserved_) loom::fail("KV pool: unreserving {} blocks but {} are reserved", n, reserved_);
  reserved_ -= n;
}

int32_t BlockAllocator::take_reserved() {
  if (reserved_ <= 0) loom::fail("KV pool: a block was taken without a reservation");
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = cache_.evict();
    // Unreachable while reservations never exceed free + parked (reserve() checks it).
    if (b < 0) loom::fail("KV pool: reserved blocks exceed what the pool holds");
  }
  --reserved_;
  refs_[size_t(b)] = 1;
  ++in_use_;
  return b;
}

void BlockAllocator::share(int32_t block) {
  check(block);
  if (refs_[size_t(block)] == 0) {
    if (!cache_.parked(block)) loom::fail("KV pool: block {} is free, it cannot be shared", block);
    cache_.unpark(block);
    ++in_use_;
  }
  ++refs_[size_t(block)];
}

void BlockAllocator::release(int32_t block) {
  check(block);
  if (refs_[size_t(block)] <= 0) loom::fail("KV pool: block {} released more often than taken", block);
  if (--refs_[size_t(block)] > 0) return;
  --in_use_;
  if (cache_.holds(block)) cache_.park(block);
  else free_.push_back(block);
}

int32_t BlockAllocator::ref_count(int32_t block) const {
  check(block);
  return refs_[size_t(block)];
}

}  // namespace loom::runtime
