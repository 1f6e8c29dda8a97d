// BPE pre-tokenization: the regex cascade llama.cpp runs before merging (unicode_regex_split).
// Each expression splits every piece produced by the previous one into its matches and the
// gaps between them (gaps are kept as pieces). Expressions run through PCRE2 in UTF + UCP mode;
// where llama.cpp's own splitting deviates from textbook regex semantics, the expressions are
// written so PCRE2 reproduces llama.cpp (see pretokenizer.cpp).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace loom::text {

class PreTokenizer {
 public:
  explicit PreTokenizer(PreType type);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Splits `text` (raw bytes, possibly invalid UTF-8) into words. Words are slices of
  // `normalized`, which receives the text as llama.cpp re-encodes it (invalid bytes → U+FFFD).
  void split(std::string_view text, std::string& normalized, std::vector<std::string_view>& words) const;

  // The PCRE2 expressions in cascade order (for tests and `loom tokenize --explain`).
  const std::vector<std::string>& expressions() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace loom::text
