// UTF-8 as llama.cpp reads it. Tokenization must agree with llama.cpp byte for byte, including
// on malformed input, so these helpers reproduce its lenient decoder rather than a strict one.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::text {

// Sequence length implied by a lead byte, from its high nibble alone (continuation bytes and
// 0xF8..0xFF count as 1 and 4 like llama.cpp's unicode_len_utf8).
inline size_t utf8_seq_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes one code point at `pos`, advancing it. Only the lead/continuation bit structure is
// checked (overlong forms and surrogates pass, as in llama.cpp); a byte that does not start a
// well-formed sequence yields U+FFFD and advances by one byte.
uint32_t utf8_decode_lenient(std::string_view s, size_t& pos);

// Appends the UTF-8 form of `cpt`; throws loom::Error above U+10FFFF (llama.cpp cannot
// encode those either).
void utf8_append(std::string& out, uint32_t cpt);

// Re-encodes `s` through the lenient decoder: what llama.cpp's BPE pre-tokenizer actually sees.
std::string utf8_normalize_lenient(std::string_view s);

// Length of the longest prefix of `s` that is complete, strictly valid UTF-8 up to a possibly
// incomplete (but so far valid) final sequence; `incomplete_tail` receives that tail's length.
// Returns the position of the first invalid byte, or s.size() when there is none.
size_t utf8_valid_prefix(std::string_view s, size_t& incomplete_tail);

// GPT-2 byte-level alphabet: each byte maps to one printable code point (bytes_to_unicode).
const std::string& byte_to_unicode(uint8_t b);
// Inverse; returns -1 when `utf8` is not one of the 256 alphabet characters.
int unicode_to_byte(std::string_view utf8);

}  // namespace loom::text
