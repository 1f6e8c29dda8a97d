// Where a sequence's position lives in a paged KV pool (kernels.h: KvView, StepTables).
#pragma once
#include <cstdint>

#include "backend/cuda/kernels.h"

namespace loom::backend::cuda {

__device__ __forceinline__ int64_t kv_row(const StepTables& st, int32_t seq, int32_t p, int32_t bs) {
  return int64_t(st.tables[int64_t(seq) * st.max_blocks + p / bs]) * bs + p % bs;
}

}  // namespace loom::backend::cuda
