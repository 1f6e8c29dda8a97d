// Compile-time weight repacking for the fast backend. Q5_0 rows are rewritten as Q8_0 with the
// same scales: every Q5_0 value (q - 16, in [-16, 15]) is an int8, both formats dot against
// Q8_0 activations, so the integer block sums are unchanged; and the Q5_0 kernels decode to
// exactly the bytes the Q8_0 kernels read from this copy and dot them the same way (quant/simd/
// legacy.inc, DecQ5_0), so a row's result has the same bits from either: decode on the stored
// rows and prefill on the copy keep the backend batch-invariant. The Q8_0 kernels skip the
// fifth-bit unpacking (on this machine's AVX-512 kernels a Q5_0 GEMV streams ~5 GB/s per
// thread against ~10 GB/s for Q8_0). Used for prefill only (+10% pp256 on the 135M Q4_K_M
// shape, 1 thread); decode keeps the stored rows, which move 22/34 the bytes (repacked decode
// measured -11%). Costs 34/22 of those weights' bytes in memory; the schedule's
// `matmul = {prefill_repack = false}` turns it off. On AVX-512 and AVX2 the x8 layout
// (quant/simd/packed.h) replaces both for every weight that has one (fast_compile.cpp), so
// this copy is only made at the scalar level or with `matmul = {layout = "rows"}`.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/file.h"

namespace loom::backend::cpu::fast {

// Whether `t` (a matmul weight) has a GEMM copy, its type, and the copy's size in bytes.
struct RepackedWeight {
  gguf::TensorType type;
  size_t bytes;
};
bool repack_for_gemm_size(const gguf::TensorInfo& t, RepackedWeight& out);

// Writes blocks [b0, b1) of `t`'s GEMM copy into `dst` (the whole copy, `out.bytes` long):
// callers split the blocks across threads (start-up of a Q5_0 model spent a quarter of its
// time here on one thread).
void repack_for_gemm(const gguf::TensorInfo& t, int64_t b0, int64_t b1, uint8_t* dst);
// Blocks in `t` (the unit of the split above).
int64_t repack_blocks(const gguf::TensorInfo& t);

// Heap buffer for weights the GEMV streams: 2 MiB aligned and madvise(MADV_HUGEPAGE)d before
// first touch, so a decode step's weight stream walks ~400x fewer pages (4 KiB pages put one
// TLB miss on every 4 KiB of the stream, in the way of the software prefetches). `huge`
// false (the schedule's `huge_pages = false`) leaves the hint out.
class HugeBuffer {
 public:
  HugeBuffer() = default;
  HugeBuffer(size_t bytes, bool huge);
  HugeBuffer(HugeBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  HugeBuffer& operator=(HugeBuffer&&) = delete;
  ~HugeBuffer();
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

// Bump allocator over HugeBuffers (64 MiB chunks; larger requests get their own), so that small
// weights share huge pages instead of each rounding up to 2 MiB. Blocks are 64-byte aligned
// and live as long as the arena.
class HugeArena {
 public:
  uint8_t* alloc(size_t bytes);
  bool huge_pages = true;  // set before the first alloc

 private:
  std::vector<HugeBuffer> chunks_, own_;
  size_t used_ = 0;  // bytes of chunks_.back() handed out
};

}  // namespace loom::backend::cpu::fast
