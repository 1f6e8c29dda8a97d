// What a Plan needs from a KV cache: where the key and value rows of (layer, sequence,
// position) live. The cache itself — block allocation, block tables, rollback — is
// runtime::KvCache; a backend sees only this view, so paging can change without touching it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::backend {

// Storage of one cached key or value row. q8_0 is llama.cpp's q8_0 block format (32 int8
// values and one f16 scale per block, `-ctk/-ctv q8_0`): a row is width / 32 blocks, so
// every head of a row starts on a block boundary when head widths are multiples of 32.
enum class KvElem { f32, f16, q8_0 };

// Bytes of one row of `width` elements; throws loom::Error for q8_0 with width % 32 != 0.
size_t kv_row_bytes(KvElem e, int64_t width);
const char* kv_elem_name(KvElem e);
// "f32" | "f16" | "q8_0"; throws loom::Error naming the known types otherwise.
KvElem parse_kv_elem(const std::string& name);

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
