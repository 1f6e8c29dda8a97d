#include "runtime/kv_cache.h"

#include "common/error.h"

namespace loom::runtime {

KvCache::KvCache(std::vector<backend::KvLayerShape> layers, KvCacheOptions opts)
    : layers_(std::move(layers)), opts_(opts) {
  if (opts_.n_ctx <= 0) loom::fail("KV cache: context length must be > 0, got {}", opts_.n_ctx);
  if (opts_.max_seqs <= 0) loom::fail("KV cache: max_seqs must be > 0, got {}", opts_.max_seqs);
  if (opts_.block_size <= 0) loom::fail("KV cache: block size must be > 0, got {}", opts_.block_size);
  const int64_t blocks_per_seq = (int64_t(opts_.n_ctx) + opts_.block_size - 1) / opts_.block_size;
  const int64_t n_blocks = blocks_per_seq * opts_.max_seqs;
  const int64_t rows = n_blocks * opts_.block_size;
  for (const auto& l : layers_) {
    k_row_bytes_.push_back(backend::kv_row_bytes(opts_.elem, l.k_width()));
    v_row_bytes_.push_back(backend::kv_row_bytes(opts_.elem, l.v_width()));
    k_.emplace_back(size_t(rows) * k_row_bytes_.back());
    v_.emplace_back(size_t(rows) * v_row_bytes_.back());
  }
  tables_.resize(opts_.max_seqs);
  lengths_.assign(opts_.max_seqs, 0);
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

void KvCache::check_seq(int32_t seq) const {
  if (seq < 0 || seq >= opts_.max_seqs)
    loom::fail("KV cache: sequence {} out of range (the cache holds {} sequences)", seq, opts_.max_seqs);
}

void KvCache::reserve(int32_t seq, int32_t n_pos) {
  check_seq(seq);
  if (n_pos > opts_.n_ctx)
    loom::fail("context length exceeded: sequence {} needs {} positions, the context holds {} (-c)", seq, n_pos,
               opts_.n_ctx);
  auto& table = tables_[seq];
  const size_t need = (size_t(n_pos) + opts_.block_size - 1) / opts_.block_size;
  while (table.size() < need) {
    if (free_.empty()) loom::fail("KV cache: no free blocks left for sequence {} ({} positions)", seq, n_pos);
    table.push_back(free_.back());
    free_.pop_back();
  }
  if (n_pos > lengths_[seq]) lengths_[seq] = n_pos;
}

int32_t KvCache::length(int32_t seq) const {
  check_seq(seq);
  return lengths_[seq];
}

void KvCache::truncate(int32_t seq, int32_t n_pos) {
  check_seq(seq);
  if (n_pos < 0) loom::fail("KV cache: cannot truncate to negative position {}", n_pos);
  if (n_pos >= lengths_[seq]) return;
  lengths_[seq] = n_pos;
  auto& table = tables_[seq];
  const size_t keep = (size_t(n_pos) + opts_.block_size - 1) / opts_.block_size;
  while (table.size() > keep) {
    free_.push_back(table.back());
    table.pop_back();
  }
}

uint8_t* KvCache::row(const std::vector<uint8_t>& buf, size_t row_bytes, int32_t seq, int32_t pos) {
  // Hot path: no allocation, no locking; reserve() made the position addressable.
  if (seq < 0 || seq >= opts_.max_seqs || pos < 0 || pos >= lengths_[seq])
    loom::fail("KV cache: position {} of sequence {} is not reserved", pos, seq);
  const int64_t block = tables_[seq][pos / opts_.block_size];
  const int64_t r = block * opts_.block_size + pos % opts_.block_size;
  return const_cast<uint8_t*>(buf.data()) + size_t(r) * row_bytes;
}

void* KvCache::k_row(int layer, int32_t seq, int32_t pos) {
  if (layer < 0 || size_t(layer) >= layers_.size()) loom::fail("KV cache: layer {} out of range", layer);
  return row(k_[layer], k_row_bytes_[layer], seq, pos);
}

void* KvCache::v_row(int layer, int32_t seq, int32_t pos) {
  if (layer < 0 || size_t(layer) >= layers_.size()) loom::fail("KV cache: layer {} out of range", layer);
  return row(v_[layer], v_row_bytes_[layer], seq, pos);
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l) n += k_[l].size() + v_[l].size();
  return n;
}

}  // namespace loom::runtime
