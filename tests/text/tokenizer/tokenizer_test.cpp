// API behaviour of text::Tokenizer on the two provisioned models. Expected ids were taken
// from llama.cpp (llama-cpp-python, vocab_only) on the same files; the full agreement check
// over the corpus is tests/python/test_tokenizer.py.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "gguf/file.h"
#include "support/real_models.h"

using namespace loom::text;

namespace {
#define LOAD_MODEL(var, name)                                                   \
  const std::string var##_path = loom::testing::real_model(name);                 \
  LOOM_REQUIRE_MODEL(var##_path);                                                 \
  gguf::File var##_file = gguf::File::open(var##_path);                           \
  const Tokenizer var = Tokenizer::from_gguf(var##_file)

const char kSample[] = "Hello world! It's 2024, isn't it?  <|im_start|>user <start_of_turn>x\\n\\n  y";
}  // namespace

TEST(Tokenizer, SmolLm2VocabularyFacts) {
  LOAD_MODEL(tok, "SmolLM2-135M-Instruct.Q4_1.gguf");
  const Vocab& v = tok.vocab();
  EXPECT_EQ(v.kind, VocabKind::Bpe);
  EXPECT_EQ(v.pre, PreType::Smollm);
  EXPECT_EQ(v.size(), 49152u);
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.is_eog(v.find("<|im_end|>")));
  const std::vector<TokenId> expect = {19556, 905, 17, 657, 506, 216, 34, 32, 34, 36, 28, 3247, 982, 357, 47, 216, 2067, 108, 306,
                                       79, 3738, 108, 46, 4093, 2067, 3738, 79, 1714, 79, 20589, 46, 104, 76, 94, 76, 94, 216, 329};
  EXPECT_EQ(tok.encode(kSample, true, false), expect);
  // parse_special: the control token text becomes the token.
  const auto ids = tok.encode("<|im_start|>user", false, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], v.find("<|im_start|>"));
  EXPECT_EQ(tok.token_to_piece(ids[0], false), "");
  EXPECT_EQ(tok.token_to_piece(ids[0], true), "<|im_start|>");
  EXPECT_EQ(tok.decode(ids, false, true), "<|im_start|>user");
  EXPECT_EQ(tok.decode(ids, false, false), "user");
}

TEST(Tokenizer, Gemma3VocabularyFacts) {
  LOAD_MODEL(tok, "gemma-3-270m-it-Q4_K_M.gguf");
  const Vocab& v = tok.vocab();
  EXPECT_EQ(v.kind, VocabKind::Spm);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  const std::vector<TokenId> expect = {2, 9259, 1902, 236888, 1030, 236789, 236751, 236743, 236778, 236771, 236778, 236812,
                                       236764, 5889, 236789, 236745, 625, 236881, 138, 236820, 236909, 548, 236779, 3041,
                                       111038, 2364, 655, 3041, 236779, 1340, 236779, 887, 236813, 236781, 236785, 236749,
                                       236785, 236749, 138, 236762};
  EXPECT_EQ(tok.encode(kSample, true, false), expect);
  // User-defined tokens ("\n\n", runs of spaces) are matched even without parse_special.
  const auto nl = tok.encode("a\n\nb", false, false);
  EXPECT_NE(std::find(nl.begin(), nl.end(), v.find("\n\n")), nl.end());
  // "</s>" is marked control by llama.cpp's end-of-generation rules, so plain text spells it.
  EXPECT_TRUE(v.attr(v.find("</s>")) & kAttrControl);
  EXPECT_EQ(tok.encode("</s>", false, true), std::vector<TokenId>{v.find("</s>")});
  EXPECT_GT(tok.encode("</s>", false, false).size(), 1u);
  // BOS handling: decode(remove_special) drops the BOS it added.
  const auto ids = tok.encode("round trip", true, false);
  EXPECT_EQ(ids.front(), v.bos);
  EXPECT_EQ(tok.decode(ids, true, false), "round trip");
  EXPECT_THROW(tok.token_to_piece(TokenId(v.size()), true), loom::Error);
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_EQ(tok.encode("", true, false), std::vector<TokenId>{v.bos});
}
