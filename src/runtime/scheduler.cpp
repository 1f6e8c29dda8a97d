#include "runtime/scheduler.h"

#include <algorithm>

#include "common/error.h"

namespace loom::runtime {

std::vector<StepSlice> schedule_step(std::span<const SeqProgress> seqs, int32_t budget, size_t rotate) {
  if (budget <= 0) loom::fail("scheduler: token budget must be > 0, got {}", budget);
  std::vector<StepSlice> out;
  std::vector<size_t> decoding;
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].decoding && seqs[i].pending > 0) decoding.push_back(i);
  int32_t left = budget;
  // Every decoding sequence's own token before any sequence's drafts: drafts only take what
  // the plain decode tokens leave of the budget.
  for (size_t k = 0; k < decoding.size() && left > 0; ++k, --left)
    out.push_back({decoding[(rotate + k) % decoding.size()], 1, true});
  for (auto& sl : out) {
    const int32_t extra = std::min(left, std::max(0, seqs[sl.seq].drafts));
    sl.count += extra;
    left -= extra;
  }
  // Batch order is admission order within the decode part too: a step's rows read the KV
  // pool in a stable order.
  std::sort(out.begin(), out.end(), [](const StepSlice& a, const StepSlice& b) { return a.seq < b.seq; });
  for (size_t i = 0; i < seqs.size() && left > 0; ++i) {
    if (seqs[i].decoding || seqs[i].pending <= 0) continue;
    const int32_t n = std::min(left, seqs[i].pending);
    out.push_back({i, n, n == seqs[i].pending});
    left -= n;
  }
  return out;
}

}  // namespace loom::runtime
