#include "runtime/spec/prompt_lookup.h"

#include <algorithm>

namespace loom::runtime::spec {

std::vector<int32_t> lookup_draft(std::span<const int32_t> context, int32_t max) {
  const size_t n_ctx = context.size();
  for (int32_t n = PromptLookup::kMaxNgram; n >= PromptLookup::kMinNgram; --n) {
    if (size_t(n) >= n_ctx) continue;
    const auto tail = context.subspan(n_ctx - size_t(n));
    // Most recent earlier occurrence first: the nearest context is the likeliest to continue.
    for (size_t start = n_ctx - size_t(n); start-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + ptrdiff_t(start))) continue;
      const size_t from = start + size_t(n);
      const size_t len = std::min(size_t(max), n_ctx - from);
      return {context.begin() + ptrdiff_t(from), context.begin() + ptrdiff_t(from + len)};
    }
  }
  return {};
}

namespace {
class LookupDrafter final : public Drafter {
 public:
  std::vector<int32_t> draft(std::span<const int32_t> context, int32_t max) override {
    return lookup_draft(context, max);
  }
};
}  // namespace

std::unique_ptr<Drafter> PromptLookup::make() const { return std::make_unique<LookupDrafter>(); }

}  // namespace loom::runtime::spec
