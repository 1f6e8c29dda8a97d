#include "text/stream_decoder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/file.h"
#include "support/real_models.h"
#include "text/utf8.h"

using namespace loom::text;

namespace {
// Feeds every token of `text` one at a time; every chunk must be valid UTF-8 on its own and
// the chunks must add up to the text.
void expect_streams_back(const Tokenizer& tok, const std::string& text) {
  StreamDecoder dec(tok);
  std::string all;
  for (TokenId id : tok.encode(text, false, false)) {
    const std::string chunk = dec.push(id);
    size_t tail = 0;
    EXPECT_EQ(utf8_valid_prefix(chunk, tail), chunk.size()) << "chunk is not valid UTF-8";
    EXPECT_EQ(tail, 0u);
    all += chunk;
  }
  all += dec.finish();
  EXPECT_EQ(all, text);
}
}  // namespace

TEST(StreamDecoder, HoldsSplitCharactersAndReplacesInvalidBytes) {
  // The byte-level core, without a model: push_bytes is push(id) minus the piece look-up.
  const std::string emoji = "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB";  // 👩‍💻
  const std::string path = loom::testing::real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  LOOM_REQUIRE_MODEL(path);
  gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  StreamDecoder d(tok);
  EXPECT_EQ(d.push_bytes("a\xF0\x9F"), "a");
  EXPECT_EQ(d.pending(), 2u);
  EXPECT_EQ(d.push_bytes("\x91"), "");
  EXPECT_EQ(d.push_bytes("\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB!"), emoji + "!");
  // Invalid bytes become U+FFFD as soon as they are known to be invalid.
  EXPECT_EQ(d.push_bytes("x\xFFy"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(d.push_bytes("\xE2\x82("), "\xEF\xBF\xBD(");  // one U+FFFD for the maximal subpart E2 82
  // An incomplete character left at the end is flushed as one U+FFFD.
  EXPECT_EQ(d.push_bytes("\xE2\x82"), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.pending(), 0u);
}

TEST(StreamDecoder, ByteLevelBpeEmojiPieces) {
  const std::string path = loom::testing::real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  LOOM_REQUIRE_MODEL(path);
  gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  // These encode to several tokens each, some of which end mid-character.
  expect_streams_back(tok, "Family: \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 ok");
  expect_streams_back(tok, "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xE4\xBD\xA0\xE5\xA5\xBD \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87");
}

TEST(StreamDecoder, SpmByteFallbackPieces) {
  const std::string path = loom::testing::real_model("gemma-3-270m-it-Q4_K_M.gguf");
  LOOM_REQUIRE_MODEL(path);
  gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  // A private-use plane-15 character is not a Gemma piece: it is spelled as 4 byte tokens.
  const std::string rare = "x\xF3\xB0\x80\x80y";
  const auto ids = tok.encode(rare, false, false);
  size_t bytes = 0;
  for (TokenId id : ids) bytes += (tok.vocab().attr(id) & kAttrByte) ? 1 : 0;
  EXPECT_EQ(bytes, 4u);
  expect_streams_back(tok, rare);
  StreamDecoder d(tok);
  std::vector<std::string> chunks;
  size_t last_byte = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    chunks.push_back(d.push(ids[i]));
    if (tok.vocab().attr(ids[i]) & kAttrByte) last_byte = i;
  }
  // The three leading byte tokens produce nothing; the fourth completes the character.
  ASSERT_GE(last_byte, 3u);
  for (size_t i = last_byte - 3; i < last_byte; ++i) EXPECT_EQ(chunks[i], "");
  EXPECT_EQ(chunks[last_byte], "\xF3\xB0\x80\x80");
}
