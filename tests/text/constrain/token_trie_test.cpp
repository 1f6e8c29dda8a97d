// The token mask: on a made-up vocabulary with multi-byte and terminal-spanning tokens, the
// trie walk allows exactly the tokens a brute-force check (advance a copy of the matcher by
// the token's bytes) allows, at every step of random constrained walks; end-of-generation
// tokens exactly when the grammar accepts.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "match_util.h"
#include "text/constrain/token_trie.h"

using namespace loom::text::constrain;
using namespace loom::text::constrain::testing;

namespace {
std::vector<std::string> random_vocab(std::mt19937& rng) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));  // byte tokens: any text is reachable
  const std::string parts[] = {"{\"", "\":", "\"", ", \"", "true", "false", "null", "}", "]", "[", "12", "3,", "\",\"",
                               "name", "é", "\xC3", "\xA9x", " ", "  ", "\n", "abc", "\"}", "0.5", "e+", "-"};
  for (int i = 0; i < 250; ++i) {
    std::string t;
    const int n = 1 + int(rng() % 3);
    for (int k = 0; k < n; ++k) t += parts[rng() % std::size(parts)];
    v.push_back(t);
  }
  v.push_back("");  // a control token: no text, never allowed
  v.push_back("");  // the end-of-generation token
  return v;
}
}  // namespace

TEST(TokenTrie, MaskEqualsBruteForceAlongRandomWalks) {
  std::mt19937 rng(std::random_device{}());
  const auto vocab = random_vocab(rng);
  const int32_t eog = int32_t(vocab.size() - 1);
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{eog});
  const std::vector<std::pair<SourceKind, std::string>> sources = {
      {SourceKind::json_object, ""},
      {SourceKind::json_schema, R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},
        "v":{"type":"array","items":{"type":"number"},"maxItems":3},"b":{"enum":[true,null]}},"required":["name","b"]})"},
      {SourceKind::gbnf, "root ::= (\"abc\" | [0-9]+ \",\")+ \"\\n\"?"},
      {SourceKind::regex, "(é|e)+x{1,3}"}};
  for (const auto& [kind, text] : sources) {
    auto g = compiled(kind, text);
    for (int walk = 0; walk < 3; ++walk) {
      Constraint c(g, trie);
      Matcher shadow(g);
      for (int step = 0; step < 30; ++step) {
        const auto mask = c.mask();
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < vocab.size(); ++id) {
          Matcher probe = shadow;
          bool ok;
          if (int32_t(id) == eog) ok = shadow.accepting();
          else ok = !vocab[id].empty() && probe.advance(vocab[id]);
          const bool got = (mask[id >> 6] >> (id & 63)) & 1;
          ASSERT_EQ(got, ok) << "token " << id << " '" << vocab[id] << "' at step " << step << " of " << text;
          if (ok) allowed.push_back(int32_t(id));
        }
        ASSERT_FALSE(allowed.empty());
        const int32_t t = allowed[rng() % allowed.size()];
        if (t == eog) break;
        c.accept(t);
        ASSERT_TRUE(shadow.advance(vocab[size_t(t)]));
        EXPECT_EQ(c.finished(), shadow.finished());
        if (c.finished()) break;
      }
    }
  }
}

TEST(TokenTrie, RejectsATokenOutsideTheMask) {
  std::vector<std::string> vocab = {"a", "b", "ab", ""};
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{3});
  Constraint c(gbnf("root ::= \"a\" \"b\"?"), trie);
  EXPECT_FALSE(c.allowed(1));
  EXPECT_FALSE(c.allowed(3));  // the end token before the grammar accepts
  EXPECT_THROW(c.accept(1), loom::Error);
  c.accept(0);
  EXPECT_TRUE(c.allowed(3));
  EXPECT_TRUE(c.allowed(1));
  EXPECT_FALSE(c.allowed(2));
  c.accept(1);
  EXPECT_TRUE(c.finished());
}

TEST(TokenTrie, ABudgetOfTokensAlwaysEndsComplete) {
  // Random walks through recursive and unbounded grammars, told how many tokens are left:
  // whatever is drawn, the output is complete by the last token (when a completion fits).
  std::mt19937 rng(std::random_device{}());
  const auto vocab = random_vocab(rng);
  const int32_t eog = int32_t(vocab.size() - 1);
  auto trie = std::make_shared<const TokenTrie>(vocab, std::vector<int32_t>{eog});
  const std::vector<std::pair<SourceKind, std::string>> sources = {
      {SourceKind::json_object, ""},
      {SourceKind::json_schema, R"({"$defs":{"n":{"type":"object","properties":{"name":{"type":"string"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["name","kids"]}},"$ref":"#/$defs/n"})"},
      {SourceKind::gbnf, "root ::= \"(\" root* \")\" | [a-z]+"}};
  for (const auto& [kind, text] : sources) {
    auto g = compiled(kind, text);
    Matcher fresh(g);
    const int shortest = int(fresh.min_to_finish(fresh.state()));  // bytes; a token is at least one
    for (int budget = shortest + 2; budget <= shortest + 30; budget += 7)
      for (int walk = 0; walk < 4; ++walk) {
        Constraint c(g, trie);
        int used = 0;
        bool ended = false;
        for (; used < budget && !c.finished(); ++used) {
          c.set_budget(budget - used);
          const auto& mask = c.mask();
          std::vector<int32_t> allowed;
          for (size_t id = 0; id < vocab.size(); ++id)
            if ((mask[id >> 6] >> (id & 63)) & 1) allowed.push_back(int32_t(id));
          ASSERT_FALSE(allowed.empty());
          const int32_t t = allowed[rng() % allowed.size()];
          if (t == eog) {
            ended = true;
            break;
          }
          c.accept(t);
        }
        EXPECT_TRUE(ended || c.accepting()) << text << " budget " << budget;
      }
  }
}
