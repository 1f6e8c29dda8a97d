// KV storage for backend tests, without the runtime's bookkeeping: storage from the plan and
// one block table per sequence, n_ctx positions each. A sequence's blocks are taken from the
// end of the pool, interleaved with the other sequences', so no two consecutive blocks of a
// sequence are adjacent in memory and the kernels' block-table lookups are exercised.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace loom::testing {

struct TestKv {
  std::unique_ptr<backend::KvStorage> storage;
  std::vector<std::vector<int32_t>> tables;

  TestKv(const backend::Plan& plan, backend::KvElem e, int32_t n_ctx, int seqs = 1, int32_t block = 4) {
    const int32_t per = (n_ctx + block - 1) / block, total = per * seqs;
    storage = plan.allocate_kv(total, block, e);
    tables.resize(size_t(seqs));
    for (int s = 0; s < seqs; ++s)
      for (int32_t i = 0; i < per; ++i) tables[size_t(s)].push_back(total - 1 - (i * seqs + s));
  }
  // `b` with this pool's block tables attached.
  backend::StepBatch bind(backend::StepBatch b) const {
    b.block_tables.assign(tables.begin(), tables.end());
    return b;
  }
  void run(backend::Plan& plan, backend::StepBatch b, float* logits) { plan.run(bind(std::move(b)), *storage, logits); }
};

}  // namespace loom::testing
