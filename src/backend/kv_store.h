// What a Plan needs from a KV cache: where the key and value rows of (layer, sequence,
// position) live. The cache itself — block allocation, block tables, rollback — is
// runtime::KvCache; a backend sees only this view, so paging can change without touching it.
#pragma once
#include <cstdint>

namespace loom::backend {

enum class KvElem { f32, f16 };

struct KvLayerShape {
  int n_kv_head = 0;
  int head_dim = 0;   // key width per head
  int value_dim = 0;  // value width per head
  int64_t k_width() const { return int64_t(n_kv_head) * head_dim; }
  int64_t v_width() const { return int64_t(n_kv_head) * value_dim; }
  bool operator==(const KvLayerShape&) const = default;
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual KvElem elem() const = 0;
  // Makes positions [0, n_pos) of `seq` addressable; throws loom::Error when the context
  // length or the block pool is exceeded. Called by a plan before it writes a step.
  virtual void reserve(int32_t seq, int32_t n_pos) = 0;
  // Rows of k_width()/v_width() elements of elem(); valid after reserve() covered the position.
  virtual void* k_row(int layer, int32_t seq, int32_t pos) = 0;
  virtual void* v_row(int layer, int32_t seq, int32_t pos) = 0;
  // Positions per storage block: rows of one block are contiguous, so a kernel may walk a
  // block with a stride instead of asking for every row.
  virtual int32_t block_size() const = 0;
};

}  // namespace loom::backend
