// A tokenizer vocabulary read from GGUF metadata (tokenizer.ggml.*), with the same defaults,
// overrides and attribute fix-ups llama.cpp applies in llama_vocab::impl::load, so that the
// tokenizers built on it agree with llama.cpp token for token.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/piece_index.h"

namespace gguf { class File; }

namespace loom::text {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// llama_token_attr bit values (the public llama.h ABI), so attributes compare 1:1.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  kAttrSingleWord = 1u << 9,
};

enum class VocabKind { Spm, Bpe };

// Pre-tokenizer families (llama.cpp's LLAMA_VOCAB_PRE_TYPE_* that Loom supports).
enum class PreType { Default, Gpt2, Llama3, Qwen2, Smollm, Deepseek3 };

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

struct Vocab {
  static Vocab from_gguf(const gguf::File& file);
  Vocab() = default;
  Vocab(Vocab&&) = default;  // the piece index points into `tokens`, whose buffer moves along
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabKind kind = VocabKind::Spm;
  std::string model;     // tokenizer.ggml.model
  std::string pre_name;  // tokenizer.ggml.pre
  PreType pre = PreType::Default;

  std::vector<TokenData> tokens;
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, in rank order

  TokenId bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken,
          sep = kNoToken, pad = kNoToken, mask = kNoToken;
  TokenId fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken,
          fim_rep = kNoToken, fim_sep = kNoToken;
  std::set<TokenId> eog;  // tokens that end generation

  bool add_bos = false, add_eos = false, add_sep = false;
  bool add_space_prefix = false;
  bool ignore_merges = false;       // BPE: a whole pre-token in the vocab skips merging
  bool clean_spaces = false;        // detokenize: clean_up_tokenization_spaces
  bool escape_whitespaces = true;   // SPM: spaces become U+2581

  // Control, user-defined and unknown tokens, longest text first, in exactly the order
  // llama.cpp's cache_special_tokens has (it decides which of two overlapping specials wins).
  std::vector<TokenId> special_tokens;

  size_t size() const { return tokens.size(); }
  bool valid(TokenId id) const { return id >= 0 && size_t(id) < tokens.size(); }
  uint32_t attr(TokenId id) const { return tokens[size_t(id)].attr; }
  TokenId find(std::string_view text) const { return index_.find(text); }  // text_to_token
  // SPM byte fallback: <0xXX>, else the single byte as a piece; throws when neither exists.
  TokenId byte_token(uint8_t b) const;
  uint8_t token_byte(TokenId id) const;  // inverse for byte-attributed tokens
  bool is_eog(TokenId id) const { return eog.count(id) != 0; }

 private:
  void index_tokens();
  void apply_attribute_fixups(const gguf::File& file);
  PieceIndex index_;
};

}  // namespace loom::text
