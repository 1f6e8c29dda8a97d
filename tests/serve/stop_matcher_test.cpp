#include "serve/stop_matcher.h"

#include <gtest/gtest.h>

namespace loom::serve {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, StopsAtTheFirstCompleteSequenceAcrossPieces) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(feed(m, {"hello E", "N", "D and more"}), "hello ");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, ReleasesAHeldPrefixThatDidNotComplete) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abc EN"), "abc ");  // "EN" may still become END
  EXPECT_EQ(m.push("x"), "ENx");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralAndNothingAfterStopping) {
  StopMatcher m({"bb", "ab"});
  EXPECT_EQ(m.push("xxabb"), "xx");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, WithoutStopsEverythingPassesAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.push("a"), "a");
  EXPECT_EQ(m.push("\xc3\xa9"), "\xc3\xa9");
}

}  // namespace
}  // namespace loom::serve
