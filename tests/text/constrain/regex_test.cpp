// Regular expressions: on fresh random strings the matcher agrees with std::regex (ECMAScript)
// on whole-string matches; unsupported features are refused by name; inside a JSON string the
// translation only ever produces valid JSON string content.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "match_util.h"
#include "text/constrain/regex.h"

using namespace loom::text::constrain;
using namespace loom::text::constrain::testing;

namespace {
std::shared_ptr<const Grammar> re(const std::string& r, RegexTarget t = RegexTarget::raw) {
  return gbnf("root ::= " + regex_to_gbnf(r, t));
}
}  // namespace

TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "a*b+c?",        "(ab|cd)*e",       "[a-c]{2,4}",       "x(y|z){1,}w?",    "[^ab]+a",
      "\\d{3}-\\d{4}", "(a|b)*abb",       "a{2}|b{3}|c",      "[abc]*\\.[de]",   "(?:ab)+|(?:ba)+",
      "a.b",           "[a-][b\\]]",      "(a+)+b",           "\\w+\\s\\w*",     "[0-9]+(\\.[0-9]+)?",
      "((a|b)(c|d)){2}", "a?b?c?d?",      "(x|xy)(z|yz)",      "[\\dab]{1,3}c",   "a{0,2}b{1,}?"};
  const std::string alphabet = "abcdexyzw01239.- ]\n";
  std::mt19937 rng(std::random_device{}());
  for (const auto& p : patterns) {
    auto g = re(p);
    const std::regex oracle(p, std::regex::ECMAScript);
    int agreed = 0;
    for (int k = 0; k < 400; ++k) {
      std::string s;
      const size_t n = rng() % 9;
      for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
      const bool expect = std::regex_match(s, oracle);
      EXPECT_EQ(matches(g, s), expect) << "pattern " << p << " on '" << s << "'";
      agreed += matches(g, s) == expect;
    }
    EXPECT_EQ(agreed, 400) << p;
  }
}

TEST(Regex, AnchorsLazyAndLiteralBraces) {
  EXPECT_TRUE(matches(re("^ab+$"), "abbb"));
  EXPECT_TRUE(matches(re("a+?b"), "aab"));
  EXPECT_TRUE(matches(re("a{b"), "a{b"));   // not a quantifier: a literal brace, as in Python
  EXPECT_TRUE(matches(re("a{,2}b"), "aab"));  // Python's {,n}: 0 to n
  EXPECT_FALSE(matches(re("a{,2}b"), "aaab"));
  EXPECT_TRUE(matches(re("\\$\\^\\(\\)"), "$^()"));
}

TEST(Regex, NegatedShorthandsStayAscii) {
  // Python's \D excludes every Unicode digit; the translation keeps to ASCII so what it
  // generates matches under Unicode rules too.
  auto g = re("\\D");
  EXPECT_TRUE(matches(g, "x"));
  EXPECT_FALSE(matches(g, "\xD9\xA3"));  // ARABIC-INDIC DIGIT THREE
  EXPECT_FALSE(matches(g, "5"));
  auto n = re("[^\\d]");
  EXPECT_FALSE(matches(n, "\xD9\xA3"));
  EXPECT_TRUE(matches(re("[^a]"), "\xC3\xA9"));  // a plain negated class is Unicode-wide
}

TEST(Regex, UnsupportedFeaturesNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreference"}, {"a(?=b)", "lookaround"}, {"\\bword", "word boundary"},
      {"a^b", "anchor inside"},    {"(?i)abc", "inline flag"}, {"\\p{L}", "Unicode property"},
      {"a++", "possessive"},       {"(ab", "missing ')'"},    {"[ab", "missing ']'"},
      {"*a", "follows nothing"},   {"a{5,2}", "n < m"},       {"a{5000}", "above"}};
  for (const auto& [p, needle] : cases) {
    try {
      regex_to_gbnf(p);
      ADD_FAILURE() << "no error for " << p;
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << p << ": " << e.what();
    }
  }
}

TEST(Regex, JsonStringTargetGivesValidJsonContent) {
  // Random walks through the translated pattern: every complete string, quoted, must parse
  // as JSON and its decoded text must fully match the pattern.
  const std::vector<std::string> patterns = {"[^x]{1,6}", ".{2,5}", "a\"b\\\\c", "[\\s\\S]{3}", "\\W+", "(\"|\\n)+q"};
  std::mt19937 rng(std::random_device{}());
  for (const auto& p : patterns) {
    auto g = re(p, RegexTarget::json_string);
    const std::regex oracle(p, std::regex::ECMAScript);
    for (int k = 0; k < 100; ++k) {
      Matcher m(g);
      std::string s;
      for (int step = 0; step < 40; ++step) {
        if (m.accepting() && (m.state().tops.empty() || rng() % 4 == 0)) break;
        const ByteSet next = m.next_bytes(m.state());
        std::vector<int> bytes;
        for (int b = 0; b < 256; ++b)
          if (next.has(uint8_t(b))) bytes.push_back(b);
        ASSERT_FALSE(bytes.empty());
        const char c = char(bytes[rng() % bytes.size()]);
        ASSERT_TRUE(m.advance(std::string(1, c)));
        s += c;
      }
      if (!m.accepting()) continue;
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse("\"" + s + "\"")) << p << ": " << s;
      const std::string text = j.get<std::string>();
      bool ascii = true;
      for (unsigned char c : text) ascii = ascii && c < 0x80;
      if (ascii) EXPECT_TRUE(std::regex_match(text, oracle)) << p << ": " << s;  // std::regex reads bytes
      else EXPECT_EQ(p.find("\\W"), std::string::npos) << "\\W must stay ASCII: " << s;
    }
  }
}
