// The KV seam: the runtime keeps the bookkeeping (which block of the pool holds which
// positions of which sequence: runtime::BlockAllocator, block tables), the backend owns the
// memory (Plan::allocate_kv: host memory for the CPU backends, device memory for a GPU one).
// A step carries each sequence's block table (StepBatch::block_tables), and attention finds
// the row of (layer, sequence, position) as block_table[pos / block_size] — no call back into
// the runtime per row.
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

// The memory of a paged KV pool, allocated by a backend: for every cache layer, n_blocks
// blocks of block_size key rows and as many value rows. It knows nothing of sequences.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual KvElem elem() const = 0;
  virtual int32_t n_blocks() const = 0;
  virtual int32_t block_size() const = 0;  // positions per block
  virtual size_t bytes() const = 0;
};

}  // namespace loom::backend
