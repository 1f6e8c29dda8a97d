#include "text/stream_decoder.h"

#include "text/utf8.h"

namespace loom::text {

namespace {
const char kReplacement[] = "\xEF\xBF\xBD";

// Length of the maximal prefix of an invalid sequence at s[0] (≥ 1): the lead byte plus any
// continuation bytes that were still acceptable for it.
size_t invalid_subpart(std::string_view s) {
  const uint8_t c = uint8_t(s[0]);
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 1;
  size_t k = 1;
  for (; k < len && k < s.size(); ++k) {
    const uint8_t ck = uint8_t(s[k]);
    if (k == 1 ? (ck < lo || ck > hi) : (ck & 0xC0) != 0x80) break;
  }
  return k;
}
}  // namespace

std::string StreamDecoder::push(TokenId id) { return push_bytes(tok_.token_to_piece(id, special_)); }

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  std::string_view rest = pending_;
  while (!rest.empty()) {
    size_t tail = 0;
    const size_t valid = utf8_valid_prefix(rest, tail);
    if (valid == rest.size()) {
      out.append(rest.substr(0, rest.size() - tail));
      rest = rest.substr(rest.size() - tail);
      break;
    }
    out.append(rest.substr(0, valid));
    rest = rest.substr(valid);
    out += kReplacement;
    rest = rest.substr(invalid_subpart(rest));
  }
  pending_ = std::string(rest);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = pending_.empty() ? "" : kReplacement;
  pending_.clear();
  return out;
}

}  // namespace loom::text
