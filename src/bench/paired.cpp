#include "bench/paired.h"

#include <thread>

#include "backend/cpu/fast/spin_pool.h"
#include "common/error.h"

namespace bench {

namespace {
// Each run starts once the run before it has gone quiet: the CPU pool's workers spin for a
// while after their last section, so without the pause one arm's run shares its cores with the
// other arm's spinning workers. An A/A pair of one engine never sees it; two engines do — a
// tune session's fresh rebuild timed against its final program read 0.57-0.86 of it on a
// 2-core host (ratio CI), and `loom bench --vs` gave the peer's runs that handicap.
void settle() { std::this_thread::sleep_for(2 * loom::backend::cpu::fast::SpinPool::kSpinFor); }
}  // namespace

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
    if (b_first) vb = (settle(), b(r, warm));
    va = (settle(), a(r, warm));
    if (b && !b_first) vb = (settle(), b(r, warm));
    if (!warm) {
      out.a.push_back(va);
      if (b) out.b.push_back(vb);
    }
  }
  return out;
}

}  // namespace bench
