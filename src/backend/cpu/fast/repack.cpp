#include "backend/cpu/fast/repack.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <cstring>

#include "quant/blocks.h"

namespace loom::backend::cpu::fast {

bool repack_for_gemm_size(const gguf::TensorInfo& t, RepackedWeight& out) {
  using namespace loom::quant;
  if (t.type != gguf::TensorType::Q5_0) return false;
  out.type = gguf::TensorType::Q8_0;
  out.bytes = size_t(repack_blocks(t)) * sizeof(BlockQ8_0);
  return true;
}

int64_t repack_blocks(const gguf::TensorInfo& t) { return int64_t(t.elements()) / loom::quant::kQK; }

void repack_for_gemm(const gguf::TensorInfo& t, int64_t b0, int64_t b1, uint8_t* out) {
  using namespace loom::quant;
  const auto* src = reinterpret_cast<const BlockQ5_0*>(t.data);
  auto* dst = reinterpret_cast<BlockQ8_0*>(out);
  for (int64_t i = b0; i < b1; ++i) {
    uint32_t qh;
    std::memcpy(&qh, src[i].qh, sizeof qh);
    dst[i].d = src[i].d;
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = int(((qh >> j) << 4) & 0x10), xh1 = int((qh >> (j + 12)) & 0x10);
      dst[i].qs[j] = int8_t(((src[i].qs[j] & 0x0f) | xh0) - 16);
      dst[i].qs[j + kQK / 2] = int8_t(((src[i].qs[j] >> 4) | xh1) - 16);
    }
  }
}

HugeBuffer::HugeBuffer(size_t bytes, bool huge) : n_(bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t alloc = (bytes + kHuge - 1) / kHuge * kHuge;
  p_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc ? alloc : kHuge));
  if (!p_) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) madvise(p_, alloc, MADV_HUGEPAGE);  // a hint: failure leaves 4 KiB pages
#else
  (void)huge;
#endif
}

HugeBuffer::~HugeBuffer() { std::free(p_); }

uint8_t* HugeArena::alloc(size_t bytes) {
  constexpr size_t kChunk = size_t(64) << 20;
  bytes = (bytes + 63) / 64 * 64;
  if (bytes > kChunk / 4) return own_.emplace_back(bytes, huge_pages).data();
  if (chunks_.empty() || used_ + bytes > chunks_.back().size()) {
    chunks_.emplace_back(kChunk, huge_pages);
    used_ = 0;
  }
  uint8_t* p = chunks_.back().data() + used_;
  used_ += bytes;
  return p;
}

}  // namespace loom::backend::cpu::fast
