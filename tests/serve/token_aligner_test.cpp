// TokenAligner: a token is reported with the text that completes it, a stop cut keeps the
// tokens that begin before it, and text_offset counts code points.
#include "serve/token_aligner.h"

#include <gtest/gtest.h>

#include "serve/stop_matcher.h"

namespace loom::serve {
namespace {

TokenReport tok(std::string piece) { return {std::move(piece), -1.f, {}, 0}; }

std::vector<std::string> pieces(const std::vector<TokenReport>& r) {
  std::vector<std::string> out;
  for (const auto& t : r) out.push_back(t.piece);
  return out;
}

// Feeds (piece, decoded text) events through a stop matcher and an aligner as the server does.
struct Feed {
  StopMatcher stop;
  TokenAligner align;
  size_t sent = 0;
  std::string text;
  std::vector<TokenReport> reported;
  explicit Feed(std::vector<std::string> stops) : stop(std::move(stops)) {}
  bool event(const std::string& piece, const std::string& decoded) {
    const auto t = tok(piece);
    align.event(&t, decoded);
    const std::string out = stop.push(decoded);
    text += out;
    sent += out.size();
    auto r = stop.stopped() ? align.finish(sent, true) : align.release(sent);
    reported.insert(reported.end(), r.begin(), r.end());
    return stop.stopped();
  }
  void end() {
    const std::string out = stop.flush();
    text += out;
    sent += out.size();
    auto r = align.finish(sent, false);
    reported.insert(reported.end(), r.begin(), r.end());
  }
};

TEST(TokenAligner, ATokenWaitsForTheCharacterItStarts) {
  Feed r({});
  r.event("a", "a");
  r.event("\xe2\x82", "");  // the first two bytes of U+20AC: no text yet
  EXPECT_EQ(pieces(r.reported), std::vector<std::string>{"a"});
  r.event("\xac", "\xe2\x82\xac");
  r.event("b", "b");
  EXPECT_EQ(pieces(r.reported), (std::vector<std::string>{"a", "\xe2\x82", "\xac", "b"}));
  EXPECT_EQ(r.reported[3].text_offset, 2);  // "a€" is 2 code points (4 bytes)
  EXPECT_EQ(r.reported[1].text_offset, 1);
  EXPECT_EQ(r.reported[2].text_offset, 1);
}

TEST(TokenAligner, HeldTextHoldsItsTokensAndAStopCutDropsTheRest) {
  Feed r({"END"});
  r.event("x", "x");
  r.event(" E", " E");  // "E" may start "END": held, so is the token
  EXPECT_EQ(pieces(r.reported), std::vector<std::string>{"x"});
  EXPECT_TRUE(r.event("ND!", "ND!"));
  // " E" begins before the cut (its space was sent): reported; "ND!" begins after it: not.
  EXPECT_EQ(r.text, "x ");
  EXPECT_EQ(pieces(r.reported), (std::vector<std::string>{"x", " E"}));
}

TEST(TokenAligner, AStopAtATokenBoundaryReportsNoneOfIt) {
  Feed r({"END"});
  r.event("ab", "ab");
  EXPECT_TRUE(r.event("END", "END"));
  EXPECT_EQ(r.text, "ab");
  EXPECT_EQ(pieces(r.reported), std::vector<std::string>{"ab"});
}

TEST(TokenAligner, WithoutAStopEveryTokenIsReportedAndTheirTextIsTheReply) {
  Feed r({"zz"});
  for (const char* p : {"he", "llo", " z", "ebra"}) r.event(p, p);
  r.end();
  EXPECT_EQ(r.text, "hello zebra");
  std::string joined;
  for (const auto& t : r.reported) joined += t.piece;
  EXPECT_EQ(joined, r.text);
}

}  // namespace
}  // namespace loom::serve
