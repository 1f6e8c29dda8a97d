#include "runtime/spec/match_stats.h"

#include <algorithm>

namespace loom::runtime::spec {

namespace {
constexpr int32_t kClassLength[] = {2, 3, 4, 5, 6, 7, 8, 12, 16};  // the length each class stands for
}

int32_t MatchStats::class_of(int32_t length) {
  if (length <= 8) return std::max(0, length - 2);
  return length < 16 ? 7 : 8;
}

MatchStats::MatchStats() {
  for (int32_t c = 0; c < kClasses; ++c) {
    const double m = kClassLength[c];
    agreed_[size_t(c)] = kPriorWeight * m / (m + 1);
    seen_[size_t(c)] = kPriorWeight;
  }
}

double MatchStats::p(int32_t length) const {
  const auto c = size_t(class_of(length));
  return agreed_[c] / seen_[c];
}

void MatchStats::observe(int32_t length, bool agreed) {
  const auto c = size_t(class_of(length));
  agreed_[c] += agreed ? 1.0 : 0.0;
  seen_[c] += 1.0;
  if (seen_[c] > kMemory) {  // keep the last ~kMemory observations' worth
    agreed_[c] *= kMemory / seen_[c];
    seen_[c] = kMemory;
  }
}

}  // namespace loom::runtime::spec
