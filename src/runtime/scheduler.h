// Forming one step: which tokens of which running sequences go into the next StepBatch.
// Decode tokens first (every sequence whose prompt is done has one sampled token waiting,
// and perhaps drafts to verify after it: they come along as far as the budget allows),
// then prefill chunks of the sequences still reading their prompt, in admission order, as
// much of each as the token budget (n_batch) leaves. Decode first keeps the running streams'
// token latency flat while a long prompt is read in pieces beside them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace loom::runtime {

struct SeqProgress {
  int32_t pending = 0;    // tokens known but not yet computed
  bool decoding = false;  // the prompt is done: pending is the one token sampled last
  int32_t drafts = 0;     // decoding: draft tokens to verify after it (speculative decoding)
};

struct StepSlice {
  size_t seq = 0;       // index into the progress list
  int32_t count = 0;    // its next `count` pending tokens (decoding: 1 + the drafts that fit)
  bool logits = false;  // the slice reaches the last pending token: sample after it
};

// When decoding sequences outnumber the budget, the ones from `rotate` (mod their count) on
// go first, so the caller advancing `rotate` by the budget serves each in turn.
std::vector<StepSlice> schedule_step(std::span<const SeqProgress> seqs, int32_t budget, size_t rotate = 0);

}  // namespace loom::runtime
