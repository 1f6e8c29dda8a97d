// Stored GGUF rows -> the packed layout of the integer-dot kernels (packed_layout.h): per row,
// every block's quant range back to back, then every block's other bytes, padded to 16.
#include <cstring>

#include "backend/cuda/check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/packed_layout.h"

namespace loom::backend::cuda {

std::vector<uint8_t> pack_rows(gguf::TensorType t, const uint8_t* stored, int64_t rows, int64_t K) {
  const PackedLayout l = packed_layout(t);
  if (!has_q8_kernel(t, K)) cuda_invalid("pack_rows: no integer-dot kernel for this weight type and K");
  const int64_t nb = K / l.elems;
  const size_t in_row = size_t(nb) * size_t(l.block_bytes), out_row = packed_row_bytes(t, K);
  std::vector<uint8_t> out(out_row * size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = stored + size_t(r) * in_row;
    uint8_t* dst = out.data() + size_t(r) * out_row;
    if (!l.repacked) {
      std::memcpy(dst, src, in_row);
      continue;
    }
    uint8_t* aux = dst + size_t(nb) * size_t(l.quant_bytes);
    const int tail = l.block_bytes - l.quant_off - l.quant_bytes;
    for (int64_t b = 0; b < nb; ++b, src += l.block_bytes, aux += l.aux_bytes()) {
      std::memcpy(dst + size_t(b) * size_t(l.quant_bytes), src + l.quant_off, size_t(l.quant_bytes));
      std::memcpy(aux, src, size_t(l.quant_off));
      std::memcpy(aux + l.quant_off, src + l.quant_off + l.quant_bytes, size_t(tail));
    }
  }
  return out;
}

}  // namespace loom::backend::cuda
