// How many tokens to draft next, from how the last drafts fared. Verification costs rows of
// the target (and a draft model costs its own steps), so a drafter that keeps missing should
// stop being asked: after a run of poor acceptance the length drops to 0 for a cool-down that
// doubles each time it recurs (up to kMaxCooldown steps), then a one-token probe asks again
// (a failed probe pauses again at once).
// Drafts that are all accepted lengthen the next one by one; a rejection after a accepted
// shortens it to a + 1, the length that would have sufficed plus one to probe further.
#pragma once
#include <cstdint>

namespace loom::runtime::spec {

class DraftLength {
 public:
  static constexpr int32_t kMaxCooldown = 64;
  static constexpr double kBackoffRate = 0.25;  // running acceptance below this: pause drafting

  explicit DraftLength(int32_t max = 8) : max_(max), k_(max) {}
  // Draft tokens to ask for in this step (0: plain decoding this step).
  int32_t next();
  // The outcome of a verified draft: `drafted` tokens proposed, `accepted` of them kept.
  void record(int32_t drafted, int32_t accepted);
  double rate() const { return rate_; }

 private:
  int32_t max_, k_;
  double rate_ = 0.5;   // exponential moving average of accepted / drafted
  int32_t cooldown_ = 0, backoff_ = 4;
};

}  // namespace loom::runtime::spec
