// The KV cache: key and value rows per layer, stored in fixed-size blocks of positions. Each
// sequence has a block table (logical block -> physical block) so sequences share one pool,
// grow on demand and give blocks back on rollback — the seam paged attention and continuous
// batching build on. Storage is f16 (llama.cpp's default), f32 or q8_0.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/kv_store.h"

namespace loom::runtime {

struct KvCacheOptions {
  backend::KvElem elem = backend::KvElem::f16;
  int32_t n_ctx = 4096;      // most positions one sequence may hold
  int32_t max_seqs = 1;      // sequences that may be live at once
  int32_t block_size = 256;  // positions per block
};

class KvCache final : public backend::KvStore {
 public:
  KvCache(std::vector<backend::KvLayerShape> layers, KvCacheOptions opts);

  backend::KvElem elem() const override { return opts_.elem; }
  int32_t block_size() const override { return opts_.block_size; }
  void reserve(int32_t seq, int32_t n_pos) override;
  void* k_row(int layer, int32_t seq, int32_t pos) override;
  void* v_row(int layer, int32_t seq, int32_t pos) override;

  // Positions [0, length) of seq are addressable.
  int32_t length(int32_t seq) const;
  // Forgets positions >= n_pos of seq (rollback after rejected draft tokens, or a new turn
  // that shares only a prefix); blocks no longer needed return to the pool.
  void truncate(int32_t seq, int32_t n_pos);
  void clear(int32_t seq) { truncate(seq, 0); }

  int32_t n_ctx() const { return opts_.n_ctx; }
  int32_t free_blocks() const { return int32_t(free_.size()); }
  size_t bytes() const;
  const std::vector<backend::KvLayerShape>& layers() const { return layers_; }

 private:
  uint8_t* row(const std::vector<uint8_t>& buf, size_t row_bytes, int32_t seq, int32_t pos);
  void check_seq(int32_t seq) const;
  std::vector<backend::KvLayerShape> layers_;
  KvCacheOptions opts_;
  std::vector<size_t> k_row_bytes_, v_row_bytes_;  // per layer (backend::kv_row_bytes)
  std::vector<std::vector<uint8_t>> k_, v_;      // per layer: n_blocks * block_size rows
  std::vector<std::vector<int32_t>> tables_;     // per sequence: physical block per logical block
  std::vector<int32_t> lengths_;
  std::vector<int32_t> free_;                    // physical blocks not in any table
};

}  // namespace loom::runtime
