#include "text/utf8.h"

#include <gtest/gtest.h>

using namespace loom::text;

TEST(Utf8, LenientDecodeLikeLlamaCpp) {
  // Truncated and stray bytes become U+FFFD one byte at a time; overlong forms and surrogates
  // pass through (llama.cpp checks bit structure only).
  EXPECT_EQ(utf8_normalize_lenient("a\xC3"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8_normalize_lenient("\xE2\x82("), "\xEF\xBF\xBD\xEF\xBF\xBD(");
  EXPECT_EQ(utf8_normalize_lenient("\x80\x81"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_normalize_lenient(std::string("\xC0\x80", 2)), std::string(1, '\0'));
  EXPECT_EQ(utf8_normalize_lenient("\xED\xA0\x80"), "\xED\xA0\x80");
  EXPECT_EQ(utf8_normalize_lenient("\xF8\x88"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_normalize_lenient("h\xC3\xA9llo \xF0\x9F\x98\x80"), "h\xC3\xA9llo \xF0\x9F\x98\x80");
  EXPECT_THROW(utf8_normalize_lenient("\xF4\x90\x80\x80"), std::exception);  // U+110000
}

TEST(Utf8, ValidPrefixHoldsIncompleteTail) {
  size_t tail = 0;
  EXPECT_EQ(utf8_valid_prefix("ab\xF0\x9F", tail), 4u);
  EXPECT_EQ(tail, 2u);
  EXPECT_EQ(utf8_valid_prefix("ab\xF0(", tail), 2u);  // F0 followed by ASCII: invalid at 2
  EXPECT_EQ(utf8_valid_prefix("\xED\xA0\x80", tail), 0u);  // surrogates are not valid UTF-8
  EXPECT_EQ(utf8_valid_prefix("\xC3\xA9", tail), 2u);
  EXPECT_EQ(tail, 0u);
}

TEST(Utf8, ByteAlphabetRoundTrips) {
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(uint8_t(b))), b);
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(byte_to_unicode('A'), "A");
  EXPECT_EQ(unicode_to_byte("\xE2\x82\xAC"), -1);
}
