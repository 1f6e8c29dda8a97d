#include "runtime/spec/draft_length.h"

#include <algorithm>

namespace loom::runtime::spec {

int32_t DraftLength::next() {
  if (max_ <= 0) return 0;
  if (cooldown_ > 0) {
    --cooldown_;
    return 0;
  }
  return std::clamp(k_, 1, max_);
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;  // nothing was proposed: no evidence either way
  rate_ = 0.75 * rate_ + 0.25 * double(accepted) / double(drafted);
  k_ = accepted == drafted ? std::min(max_, k_ + 1) : std::max(1, accepted + 1);
  if (rate_ < kBackoffRate) {
    cooldown_ = backoff_;
    backoff_ = std::min(kMaxCooldown, backoff_ * 2);
    // The probe after the pause starts just above the threshold: one more failure pauses again
    // (for twice as long), one success resumes drafting.
    rate_ = kBackoffRate + 0.05;
    k_ = 1;
  } else if (rate_ > 0.5) {
    backoff_ = 4;
  }
}

}  // namespace loom::runtime::spec
