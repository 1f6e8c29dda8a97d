// KV storage in host memory (the CPU backends'), and the view a step's attention reads it
// through. Rows of one layer live in one array, block after block, so the rows of a block are
// contiguous: a kernel may walk a block with a stride and look up the block table only at a
// block boundary.
#pragma once
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace loom::backend {

class HostKvStorage final : public KvStorage {
 public:
  HostKvStorage(const std::vector<KvLayerShape>& layers, int32_t n_blocks, int32_t block_size, KvElem elem);
  KvElem elem() const override { return elem_; }
  int32_t n_blocks() const override { return n_blocks_; }
  int32_t block_size() const override { return block_size_; }
  size_t bytes() const override;

  int n_layers() const { return int(k_.size()); }
  size_t k_row_bytes(int layer) const { return k_[size_t(layer)].row_bytes; }
  size_t v_row_bytes(int layer) const { return v_[size_t(layer)].row_bytes; }
  uint8_t* k_base(int layer) { return k_[size_t(layer)].data.get(); }
  uint8_t* v_base(int layer) { return v_[size_t(layer)].data.get(); }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Rows {
    size_t row_bytes = 0;
    std::unique_ptr<uint8_t[], Free> data;
  };
  KvElem elem_;
  int32_t n_blocks_, block_size_;
  std::vector<Rows> k_, v_;  // per layer: n_blocks * block_size rows
};

// What one step's kernels see of the cache: the storage and the step's block tables.
// bind() checks once per step that every token's (sequence, position) lies in a block of the
// pool; the row lookups after it are unchecked arithmetic.
class HostKvView {
 public:
  // Throws loom::Error when `kv` is not host storage of `layers`' geometry, or a token's
  // position is outside its sequence's block table.
  static HostKvView bind(KvStorage& kv, const StepBatch& batch, const std::vector<KvLayerShape>& layers);

  KvElem elem() const { return storage_->elem(); }
  int32_t block_size() const { return block_size_; }
  uint8_t* k_row(int layer, int32_t seq, int32_t pos) const {
    return storage_->k_base(layer) + row_index(seq, pos) * storage_->k_row_bytes(layer);
  }
  uint8_t* v_row(int layer, int32_t seq, int32_t pos) const {
    return storage_->v_base(layer) + row_index(seq, pos) * storage_->v_row_bytes(layer);
  }

 private:
  size_t row_index(int32_t seq, int32_t pos) const {
    return size_t((*tables_)[size_t(seq)][size_t(pos / block_size_)]) * size_t(block_size_) + size_t(pos % block_size_);
  }
  HostKvStorage* storage_ = nullptr;
  const std::vector<std::span<const int32_t>>* tables_ = nullptr;
  int32_t block_size_ = 1;
};

}  // namespace loom::backend
