// How often prompt lookup's next token is the one the target emits, per match length: one
// estimate per class of match length (2, 3, ... 8, 9-15, 16+), each a Beta posterior whose
// prior says a longer match is likelier to continue (length m: m / (m + 1), worth kPriorWeight
// observations) and whose evidence is discounted past kMemory observations, so a reply that
// stops quoting (or starts) moves the estimate within a few steps.
#pragma once
#include <array>
#include <cstdint>

namespace loom::runtime::spec {

class MatchStats {
 public:
  static constexpr double kPriorWeight = 4, kMemory = 16;
  MatchStats();
  // P(the lookup's next token is the target's) after a match of `length` tokens.
  double p(int32_t length) const;
  void observe(int32_t length, bool agreed);

 private:
  static constexpr int32_t kClasses = 9;
  static int32_t class_of(int32_t length);
  std::array<double, kClasses> agreed_{}, seen_{};
};

}  // namespace loom::runtime::spec
