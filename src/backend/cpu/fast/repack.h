// Compile-time weight repacking for the fast backend. Q5_0 rows are rewritten as Q8_0 with the
// same scales: every Q5_0 value (q - 16, in [-16, 15]) is an int8, both formats dot against
// Q8_0 activations, so the integer sums and therefore the results are unchanged, while the
// Q8_0 kernels skip the fifth-bit unpacking (on this machine's AVX-512 kernels a Q5_0 GEMV
// streams ~5 GB/s per thread against ~10 GB/s for Q8_0). Used for prefill only (+10% pp256 on
// the 135M Q4_K_M shape, 1 thread); decode keeps the stored rows, which move 22/34 the bytes
// (repacked decode measured -11%). Costs 34/22 of those weights' bytes in memory;
// LOOM_FAST_REPACK=0 turns it off.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/file.h"

namespace loom::backend::cpu::fast {

struct RepackedWeight {
  gguf::TensorType type;
  std::vector<uint8_t> data;
};

// True when `t` (a matmul weight) is repacked; `out` then holds the new rows.
bool repack_for_gemm(const gguf::TensorInfo& t, RepackedWeight& out);

}  // namespace loom::backend::cpu::fast
