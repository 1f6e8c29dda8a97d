// Prompt lookup decoding: no second model. The context's end is matched against every earlier
// position of the prompt and the text so far; the occurrence whose preceding tokens agree with
// the context's end the longest (at least kMinNgram, the most recent among equals) gives the
// draft: the tokens that followed it. Input-grounded replies (a summary quoting its passage, an
// edit of given code) repeat long runs of the prompt, which this finds at the cost of a scan.
//
// How much of that continuation is worth verifying depends on how long the match is (a 2-token
// match is often a coincidence, a 20-token one is a quotation) and on the request (a summary
// copies, a story does not). Each sequence's drafter keeps, per match length, a running estimate
// of how often the lookup's next token is the target's (match_stats.h), scored after every step
// against the tokens the target actually emitted — also on steps where it drafted nothing, since
// the lookup is cheap to run without verifying it. The draft is then cut to the length that
// pays (draft_gain.h): on open-ended text the estimates fall and the drafter stops proposing,
// with no probes to pay for; when the reply starts quoting, long matches are drafted at once.
#pragma once
#include "runtime/spec/drafter.h"

namespace loom::runtime::spec {

class PromptLookup final : public DraftSource {
 public:
  static constexpr int32_t kMinNgram = 2;
  // Matches are not measured past this: longer ones are all quotations, and the cap bounds the
  // scan on a context that repeats one token.
  static constexpr int32_t kMaxMatch = 64;
  std::unique_ptr<Drafter> make() const override;
  std::string name() const override { return "lookup"; }
};

struct LookupMatch {
  std::vector<int32_t> continuation;  // the `max` tokens that followed the match (none: no match)
  int32_t length = 0;                 // tokens of the context's end matched (0: none)
};

// The longest match of the context's end and its continuation (up to `max` tokens).
LookupMatch longest_match(std::span<const int32_t> context, int32_t max);

// The continuation alone, exposed for tests.
inline std::vector<int32_t> lookup_draft(std::span<const int32_t> context, int32_t max) {
  return longest_match(context, max).continuation;
}

}  // namespace loom::runtime::spec
