#include "bench/paired.h"

#include "common/error.h"

namespace bench {

PairedRun run_paired(int warmup, int pairs, const PairedArm& a, const PairedArm& b,
                     const std::function<void(int, int)>& progress) {
  if (pairs < 1 || warmup < 0) loom::fail("paired run: {} pairs after {} warm-up rounds", pairs, warmup);
  PairedRun out;
  for (int r = -warmup; r < pairs; ++r) {
    if (progress) progress(r + warmup, warmup + pairs);
    const bool warm = r < 0;
    const double va = a(r, warm);
    if (b) {
      const double vb = b(r, warm);
      if (!warm) out.b.push_back(vb);
    }
    if (!warm) out.a.push_back(va);
  }
  return out;
}

}  // namespace bench
