// GPT-2 style byte-level BPE (llama.cpp's llm_tokenizer_bpe_session): each pre-token is mapped
// byte by byte into the printable byte alphabet, then adjacent symbols are merged by merge
// rank, lowest first. Merges are resolved on interned ids (pair → rank, result) rather than
// strings, and finished words are cached, which is where the speed over llama.cpp comes from.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/vocab.h"

namespace loom::text {

class BpeModel {
 public:
  explicit BpeModel(const Vocab& vocab);

  // Appends the tokens of one pre-token (bytes as llama.cpp re-encoded them).
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // interned id of the concatenation
  };
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;
  int32_t intern(const std::string& s);
  const Merge* find_merge(int32_t a, int32_t b) const;

  const Vocab& vocab_;
  // Interned symbol strings: ids below vocab.size() are the vocabulary's own; above are
  // strings that appear only in merges (llama.cpp would spell those as bytes at the end).
  std::vector<std::string> extra_;
  std::unordered_map<std::string, int32_t> extra_index_;
  std::vector<int32_t> byte_symbol_;         // byte → interned id of its alphabet character (-1: none)
  std::vector<int32_t> single_byte_token_;   // raw byte → token whose text is that one byte (-1: none)
  // Open-addressed (a, b) → Merge table.
  std::vector<uint64_t> merge_keys_;
  std::vector<Merge> merge_vals_;
  uint64_t merge_mask_ = 0;

  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace loom::text
