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
    // Which arm runs first alternates, so an order effect (the second run finding caches or
    // clocks as the first left them) falls on each arm in half the pairs instead of always on B.
    const bool b_first = b && (r & 1);
    double va = 0, vb = 0;
    if (b_first) vb = b(r, warm);
    va = a(r, warm);
    if (b && !b_first) vb = b(r, warm);
    if (!warm) {
      out.a.push_back(va);
      if (b) out.b.push_back(vb);
    }
  }
  return out;
}

}  // namespace bench
