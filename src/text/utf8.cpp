#include "text/utf8.h"

#include <array>
#include <unordered_map>

#include "common/error.h"

namespace loom::text {

uint32_t utf8_decode_lenient(std::string_view s, size_t& pos) {
  const auto b = [&](size_t i) { return uint8_t(s[i]); };
  const uint8_t c0 = b(pos);
  const size_t n = s.size();
  auto cont = [&](size_t i) { return i < n && (b(i) & 0xC0) == 0x80; };
  if (!(c0 & 0x80)) {
    pos += 1;
    return c0;
  }
  if (!(c0 & 0x40)) {  // stray continuation byte
    pos += 1;
    return 0xFFFD;
  }
  if (!(c0 & 0x20)) {
    if (!cont(pos + 1)) { pos += 1; return 0xFFFD; }
    uint32_t r = (uint32_t(c0 & 0x1F) << 6) | (b(pos + 1) & 0x3F);
    pos += 2;
    return r;
  }
  if (!(c0 & 0x10)) {
    if (!cont(pos + 1) || !cont(pos + 2)) { pos += 1; return 0xFFFD; }
    uint32_t r = (uint32_t(c0 & 0x0F) << 12) | (uint32_t(b(pos + 1) & 0x3F) << 6) | (b(pos + 2) & 0x3F);
    pos += 3;
    return r;
  }
  if (!(c0 & 0x08)) {
    if (!cont(pos + 1) || !cont(pos + 2) || !cont(pos + 3)) { pos += 1; return 0xFFFD; }
    uint32_t r = (uint32_t(c0 & 0x07) << 18) | (uint32_t(b(pos + 1) & 0x3F) << 12) |
                 (uint32_t(b(pos + 2) & 0x3F) << 6) | (b(pos + 3) & 0x3F);
    pos += 4;
    return r;
  }
  pos += 1;
  return 0xFFFD;
}

void utf8_append(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(char(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(char(0xC0 | (cpt >> 6)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(char(0xE0 | (cpt >> 12)));
    out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out.push_back(char(0xF0 | (cpt >> 18)));
    out.push_back(char(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cpt & 0x3F)));
  } else {
    loom::fail("text: input decodes to code point U+{:X} beyond U+10FFFF (not supported)", cpt);
  }
}

std::string utf8_normalize_lenient(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t pos = 0;
  while (pos < s.size()) {
    // ASCII runs are by far the common case; copy them without decoding.
    if (!(uint8_t(s[pos]) & 0x80)) {
      out.push_back(s[pos++]);
      continue;
    }
    utf8_append(out, utf8_decode_lenient(s, pos));
  }
  return out;
}

size_t utf8_valid_prefix(std::string_view s, size_t& incomplete_tail) {
  incomplete_tail = 0;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    for (size_t k = 1; k < len; ++k) {
      if (i + k >= n) {  // ran out of bytes: an incomplete but so far valid sequence
        incomplete_tail = n - i;
        return n;
      }
      const uint8_t ck = uint8_t(s[i + k]);
      if (k == 1 ? (ck < lo || ck > hi) : (ck & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return n;
}

namespace {
struct ByteAlphabet {
  std::array<std::string, 256> enc;
  std::unordered_map<std::string, int> dec;
  ByteAlphabet() {
    std::array<int, 256> cp{};
    std::array<bool, 256> direct{};
    for (int c = 0x21; c <= 0x7E; ++c) direct[c] = true;
    for (int c = 0xA1; c <= 0xAC; ++c) direct[c] = true;
    for (int c = 0xAE; c <= 0xFF; ++c) direct[c] = true;
    int extra = 0;
    for (int c = 0; c < 256; ++c) cp[c] = direct[c] ? c : 256 + extra++;
    for (int c = 0; c < 256; ++c) {
      utf8_append(enc[c], uint32_t(cp[c]));
      dec.emplace(enc[c], c);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return alphabet().enc[b]; }

int unicode_to_byte(std::string_view utf8) {
  const auto& d = alphabet().dec;
  auto it = d.find(std::string(utf8));
  return it == d.end() ? -1 : it->second;
}

}  // namespace loom::text
