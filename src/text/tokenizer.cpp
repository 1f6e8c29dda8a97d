#include "text/tokenizer.h"

#include "common/error.h"
#include "text/bpe.h"
#include "text/pretokenizer.h"
#include "text/special_tokens.h"
#include "text/spm.h"
#include "text/utf8.h"

namespace loom::text {

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::make_unique<Vocab>(std::move(vocab))) {
  specials_ = std::make_unique<SpecialTokenMatcher>(*vocab_);
  if (vocab_->kind == VocabKind::Bpe) {
    pre_ = std::make_unique<PreTokenizer>(vocab_->pre);
    bpe_ = std::make_unique<BpeModel>(*vocab_);
  }
  pieces_.resize(vocab_->size());
  for (size_t i = 0; i < pieces_.size(); ++i) pieces_[i] = compute_piece(TokenId(i));
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::encode_raw(std::string_view text, bool prefix_space, std::vector<TokenId>& out) const {
  const Vocab& v = *vocab_;
  if (v.kind == VocabKind::Spm) {
    std::string escaped;
    escaped.reserve(text.size() + 16);
    auto put = [&](char c) {
      if (c == ' ' && v.escape_whitespaces) escaped += "\xE2\x96\x81";
      else escaped += c;
    };
    if (prefix_space) put(' ');
    for (char c : text) put(c);
    spm_encode(v, escaped, out);
    return;
  }
  std::string normalized;
  std::vector<std::string_view> words;
  pre_->split(text, normalized, words);
  for (std::string_view w : words) bpe_->encode_word(w, out);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<TokenId> out;
  const std::vector<Fragment> frags = specials_->partition(text, parse_special);
  if (add_special && v.add_bos) out.push_back(v.bos);
  // SPM: a fragment that starts the text or follows a special token gets the leading space.
  bool prev_special = true;
  for (const Fragment& f : frags) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    encode_raw(f.text, v.kind == VocabKind::Spm && v.add_space_prefix && prev_special, out);
    prev_special = false;
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::compute_piece(TokenId id) const {
  const Vocab& v = *vocab_;
  const TokenData& t = v.tokens[size_t(id)];
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    if (v.kind == VocabKind::Spm || v.escape_whitespaces) {
      std::string r;
      for (size_t i = 0; i < t.text.size(); ++i) {
        if (t.text.compare(i, 3, "\xE2\x96\x81") == 0) r += ' ', i += 2;
        else r += t.text[i];
      }
      return r;
    }
    // Byte-level BPE: map each alphabet character back to its byte; llama.cpp spells a
    // character outside the alphabet as "[UNK_BYTE_0x<hex>" followed by the whole token and "]".
    std::string r;
    for (size_t pos = 0; pos < t.text.size();) {
      const uint32_t cpt = utf8_decode_lenient(t.text, pos);
      std::string ch;
      utf8_append(ch, cpt);
      const int b = unicode_to_byte(ch);
      if (b >= 0) {
        r += char(b);
      } else {
        r += "[UNK_BYTE_0x";
        for (unsigned char c : ch) r += fmt::format("{:02x}", c);
        r += t.text + "]";
      }
    }
    return r;
  }
  if (t.attr & kAttrByte) return std::string(1, char(v.token_byte(id)));
  return {};
}

const std::string& Tokenizer::token_to_piece(TokenId id, bool special) const {
  static const std::string empty;
  if (!vocab_->valid(id)) loom::fail("tokenizer: token id {} out of range (vocabulary has {})", id, vocab_->size());
  if (!special && (vocab_->attr(id) & (kAttrUnknown | kAttrControl))) return empty;
  return pieces_[size_t(id)];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool remove_special, bool unparse_special) const {
  const Vocab& v = *vocab_;
  bool remove_space = v.add_space_prefix;
  if (remove_special && v.add_bos && !ids.empty() && ids.front() == v.bos) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && v.add_eos && !ids.empty() && ids.back() == v.eos) ids = ids.first(ids.size() - 1);
  std::string text;
  for (TokenId id : ids) {
    const std::string& p = token_to_piece(id, unparse_special);
    // lstrip = 1 on the first piece only: drop one leading space (the SPM prefix space).
    size_t skip = (remove_space && !p.empty() && p[0] == ' ') ? 1 : 0;
    text.append(p, skip, std::string::npos);
    remove_space = false;
  }
  if (!v.clean_spaces || text.empty()) return text;

  // clean_up_tokenization_spaces, transcribed pass for pass from llama_detokenize (the passes
  // rewrite the buffer in place and later reads see earlier writes, so keep the shape).
  std::string& s = text;
  int total = int(s.size());
  {
    const int total1 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total1; ++i) {
      const char x = s[size_t(i)];
      if (s[size_t(i - 1)] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
      s[size_t(total++)] = x;
    }
  }
  {
    const int total2 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total2; ++i) {
      const char x = s[size_t(i)];
      if (x == '\'' && i + 1 < total2 && s[size_t(i - 1)] == ' ' && s[size_t(i + 1)] == ' ') {
        total--;
        s[size_t(++i)] = '\0';
      }
      s[size_t(total++)] = x;
    }
  }
  {
    const int total3 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total3; ++i) {
      const char x = s[size_t(i)];
      if (s[size_t(i - 1)] == ' ' && x == '\'' && i + 1 < total3) {
        const char x1 = s[size_t(i + 1)];
        if (x1 == 's' || x1 == 'm') {
          total--;
        } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
          const char x2 = s[size_t(i + 2)];
          if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
        }
      }
      s[size_t(total++)] = x;
    }
  }
  s.resize(size_t(total));
  return s;
}

}  // namespace loom::text
