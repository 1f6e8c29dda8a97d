#include "backend/host_kv.h"

#include <cstring>
#include <new>

#include "common/error.h"

namespace loom::backend {

HostKvStorage::HostKvStorage(const std::vector<KvLayerShape>& layers, int32_t n_blocks, int32_t block_size,
                             KvElem elem)
    : elem_(elem), n_blocks_(n_blocks), block_size_(block_size) {
  if (n_blocks <= 0) loom::fail("KV storage: block count must be > 0, got {}", n_blocks);
  if (block_size <= 0) loom::fail("KV storage: block size must be > 0, got {}", block_size);
  const size_t rows = size_t(n_blocks) * size_t(block_size);
  auto make = [&](int64_t width) {
    Rows r;
    r.row_bytes = kv_row_bytes(elem, width);
    // Zeroed, so a row never written reads as zeros rather than as leftovers (no NaN from junk);
    // calloc gets large blocks as fresh zero pages from the kernel, touched only when a row is
    // written, where a value-initialised array is memset in full up front (a 4096-position
    // cache: tens of MiB written at start-up).
    const size_t n = rows * r.row_bytes;
    r.data.reset(static_cast<uint8_t*>(std::calloc(n ? n : 1, 1)));
    if (!r.data) throw std::bad_alloc();
    return r;
  };
  for (const auto& l : layers) {
    k_.push_back(make(l.k_width()));
    v_.push_back(make(l.v_width()));
  }
}

size_t HostKvStorage::bytes() const {
  size_t n = 0;
  const size_t rows = size_t(n_blocks_) * size_t(block_size_);
  for (size_t l = 0; l < k_.size(); ++l) n += rows * (k_[l].row_bytes + v_[l].row_bytes);
  return n;
}

HostKvView HostKvView::bind(KvStorage& kv, const StepBatch& batch, const std::vector<KvLayerShape>& layers) {
  auto* host = dynamic_cast<HostKvStorage*>(&kv);
  if (!host) loom::fail("KV storage was not allocated by a CPU backend (use the plan's allocate_kv)");
  if (host->n_layers() != int(layers.size()))
    loom::fail("KV storage has {} layers, the plan's attention uses {}", host->n_layers(), layers.size());
  for (size_t l = 0; l < layers.size(); ++l)
    if (host->k_row_bytes(int(l)) != kv_row_bytes(host->elem(), layers[l].k_width()) ||
        host->v_row_bytes(int(l)) != kv_row_bytes(host->elem(), layers[l].v_width()))
      loom::fail("KV storage layer {} has rows of another geometry than the plan's", l);
  const int32_t bs = host->block_size();
  for (size_t i = 0; i < batch.size(); ++i) {
    const int32_t s = batch.seq(i), p = batch.positions[i];
    if (size_t(s) >= batch.block_tables.size())
      loom::fail("step batch: token {} is in sequence {} but the step has block tables for {} sequences", i, s,
                 batch.block_tables.size());
    const auto& table = batch.block_tables[size_t(s)];
    if (size_t(p / bs) >= table.size())
      loom::fail("step batch: position {} of sequence {} is beyond its block table ({} blocks of {})", p, s,
                 table.size(), bs);
  }
  // Every block a step may read (positions below the tokens' own) must be in the pool.
  for (const auto& table : batch.block_tables)
    for (int32_t b : table)
      if (b < 0 || b >= host->n_blocks())
        loom::fail("step batch: block {} is outside the KV pool of {} blocks", b, host->n_blocks());
  HostKvView v;
  v.storage_ = host;
  v.tables_ = &batch.block_tables;
  v.block_size_ = bs;
  return v;
}

}  // namespace loom::backend
