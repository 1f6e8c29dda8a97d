#include "runtime/spec/prompt_lookup.h"

#include <algorithm>

#include "runtime/spec/draft_gain.h"
#include "runtime/spec/match_stats.h"

namespace loom::runtime::spec {

LookupMatch longest_match(std::span<const int32_t> context, int32_t max) {
  LookupMatch out;
  const size_t n = context.size();
  if (n < 2 || max <= 0) return out;
  const int32_t last = context[n - 1];
  size_t best_end = 0;
  // `end`: where an earlier occurrence of the context's end would end. Scanned from the most
  // recent back, so a longer match must be strictly longer to win: the nearest of equals.
  for (size_t end = n - 1; end-- > 0;) {
    if (context[end] != last) continue;
    int32_t len = 1;
    while (len < PromptLookup::kMaxMatch && size_t(len) <= end && context[end - len] == context[n - 1 - len]) ++len;
    if (len > out.length) {
      out.length = len;
      best_end = end;
      if (len == PromptLookup::kMaxMatch) break;
    }
  }
  if (out.length < PromptLookup::kMinNgram) return {};
  // What followed the match, copied on past the context's end as an overlapping copy does (a
  // phrase that repeats with period p goes on repeating): token i is the context's at
  // best_end + 1 + i, or this draft's own once that passes the end.
  for (size_t i = 0; i < size_t(max); ++i) {
    const size_t at = best_end + 1 + i;
    out.continuation.push_back(at < n ? context[at] : out.continuation[at - n]);
  }
  return out;
}

namespace {

class LookupDrafter final : public Drafter {
 public:
  bool sizes_own_drafts() const override { return true; }

  std::vector<int32_t> draft(std::span<const int32_t> context, int32_t max) override {
    score(context);
    LookupMatch m = longest_match(context, max);
    // P(draft i + 1 accepted | 1..i were): once i drafts are accepted the match is i longer.
    std::vector<double> p_next(m.continuation.size());
    for (size_t i = 0; i < p_next.size(); ++i) p_next[i] = stats_.p(m.length + int32_t(i));
    static const StepCost kTable;  // no timings: the CPU table
    const int32_t k = best_draft_length(p_next, step_cost_ ? *step_cost_ : kTable);
    pending_ = {context.size(), m};
    return {m.continuation.begin(), m.continuation.begin() + k};
  }

 private:
  // The last lookup against what the target emitted after it (drafted or not): each token of
  // its continuation that agreed, then the first that did not, is one observation at the match
  // length it was predicted from.
  void score(std::span<const int32_t> context) {
    const auto [at, m] = pending_;
    pending_ = {};
    if (m.length == 0 || context.size() <= at) return;
    const auto emitted = context.subspan(at);
    const size_t n = std::min(emitted.size(), m.continuation.size());
    for (size_t i = 0; i < n; ++i) {
      const bool agreed = emitted[i] == m.continuation[i];
      stats_.observe(m.length + int32_t(i), agreed);
      if (!agreed) break;
    }
  }

  MatchStats stats_;
  std::pair<size_t, LookupMatch> pending_;  // context length at the last lookup, and its match
};

}  // namespace

std::unique_ptr<Drafter> PromptLookup::make() const { return std::make_unique<LookupDrafter>(); }

}  // namespace loom::runtime::spec
