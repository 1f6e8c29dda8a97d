// Prompt lookup decoding: no second model. The last n tokens of the context (n from
// kMaxNgram down to kMinNgram) are searched for earlier in the prompt and the text so far;
// the tokens that followed their most recent earlier occurrence are the draft. Input-grounded
// replies (a summary quoting its passage, an edit of given code) repeat long runs of the
// prompt, which this finds at the cost of a scan.
#pragma once
#include "runtime/spec/drafter.h"

namespace loom::runtime::spec {

class PromptLookup final : public DraftSource {
 public:
  static constexpr int32_t kMaxNgram = 4, kMinNgram = 2;
  std::unique_ptr<Drafter> make() const override;
  std::string name() const override { return "lookup"; }
};

// The draft itself, exposed for tests.
std::vector<int32_t> lookup_draft(std::span<const int32_t> context, int32_t max);

}  // namespace loom::runtime::spec
