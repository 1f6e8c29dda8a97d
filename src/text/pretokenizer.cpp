#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"
#include "text/utf8.h"

namespace loom::text {

namespace {

// llama.cpp's whitespace set (unicode_set_whitespace: the Unicode White_Space property).
// PCRE2's \s under UCP leaves out U+0085, so every \s / \S is spelled with this class.
#define LOOM_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define S "[" LOOM_WS "]"
#define NS "[^" LOOM_WS "]"

// The GPT-2 expression: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S).
// llama.cpp runs a hand-written matcher for it; its only departure from the regex (a lone
// unmatched whitespace becomes its own piece) coincides with the kept-gap rule.
const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" LOOM_WS "\\p{L}\\p{N}]+|" S "+(?!" NS ")";

// Llama 3 (also hand-written in llama.cpp, equivalent to this regex).
const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^" LOOM_WS "\\p{L}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+";

// Qwen2: as Llama 3 but single digits (llama.cpp runs it through std::regex, same semantics).
const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^" LOOM_WS "\\p{L}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+";

// DeepSeek V3 (llama.cpp evaluates these with std::regex on a category-collapsed text; its
// observable splits match Unicode \p{P}/\p{S}, '~' included, as checked against llama.cpp).
const char* kDeepseek3Cjk = "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
const char* kDeepseek3Main =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+";

std::vector<std::string> patterns_for(PreType t) {
  switch (t) {
    case PreType::Gpt2: return {kGpt2};
    case PreType::Llama3: return {kLlama3};
    case PreType::Qwen2: return {kQwen2};
    case PreType::Smollm: return {"\\p{N}", kGpt2};
    case PreType::Deepseek3: return {"\\p{N}{1,3}", kDeepseek3Cjk, kDeepseek3Main};
    case PreType::Default:
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  return {};
}

#undef S
#undef NS

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreType type) : patterns_(patterns_for(type)) {
  for (const std::string& p : patterns_) {
    int err = 0;
    PCRE2_SIZE off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      loom::fail("pre-tokenizer: cannot compile '{}' at {}: {}", p, off, reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text, std::string& normalized,
                         std::vector<std::string_view>& words) const {
  normalized = utf8_normalize_lenient(text);
  // PCRE2 needs valid UTF-8, but llama.cpp's decoder lets surrogates (ED A0..BF xx) through.
  // They are neither letters, numbers nor spaces, like a private-use character of the same
  // encoded length (U+E000 = EE 80 80), so the regexes see that stand-in instead.
  std::string probe_storage;
  std::string_view probe = normalized;
  for (size_t i = 0; i + 2 < normalized.size(); ++i) {
    if (uint8_t(normalized[i]) == 0xED && uint8_t(normalized[i + 1]) >= 0xA0) {
      if (probe_storage.empty()) probe_storage = normalized;
      probe_storage[i] = char(0xEE), probe_storage[i + 1] = char(0x80), probe_storage[i + 2] = char(0x80);
      probe = probe_storage;
    }
  }

  // Pieces as [begin, end) byte ranges, refined by each expression in turn.
  std::vector<std::pair<size_t, size_t>> pieces{{0, normalized.size()}}, next;
  if (normalized.empty()) pieces.clear();
  for (const auto& c : compiled_) {
    next.clear();
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c->code, nullptr);
    for (auto [b, e] : pieces) {
      // Each piece is its own subject: lookaheads must not see past it (as in llama.cpp).
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(probe.data() + b);
      const size_t len = e - b;
      size_t start = 0, prev_end = 0;
      while (start < len) {
        int rc = pcre2_match(c->code, subject, len, start, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          loom::fail("pre-tokenizer: regex match failed: {}", reinterpret_cast<char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // none of the supported expressions match empty; step past defensively
          start = ms + utf8_seq_len(uint8_t(probe[b + ms]));
          continue;
        }
        if (ms > prev_end) next.emplace_back(b + prev_end, b + ms);
        next.emplace_back(b + ms, b + me);
        prev_end = start = me;
      }
      if (prev_end < len) next.emplace_back(b + prev_end, e);
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  words.clear();
  words.reserve(pieces.size());
  for (auto [b, e] : pieces) words.emplace_back(normalized.data() + b, e - b);
}

}  // namespace loom::text
