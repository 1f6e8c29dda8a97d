// SentencePiece-style BPE over scored pieces (llama.cpp's llm_tokenizer_spm): start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the best-scoring piece
// in the vocabulary, and spell anything left that is not a piece as byte-fallback tokens.
#pragma once
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace loom::text {

// Appends the tokens of `text` (already space-escaped to U+2581 where the vocab wants it).
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

}  // namespace loom::text
