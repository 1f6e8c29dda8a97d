// The text ⇄ token interface the rest of Loom uses. encode() is llama_tokenize(vocab, text,
// add_special, parse_special); token_to_piece() is llama_token_to_piece(..., lstrip = 0,
// special); decode() is llama_detokenize(..., remove_special, unparse_special).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/vocab.h"

namespace gguf { class File; }

namespace loom::text {

class PreTokenizer;
class BpeModel;
class SpecialTokenMatcher;

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  static Tokenizer from_gguf(const gguf::File& file) { return Tokenizer(Vocab::from_gguf(file)); }
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  const Vocab& vocab() const { return *vocab_; }

  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes a token stands for. Control/unknown tokens give "" unless `special`.
  const std::string& token_to_piece(TokenId id, bool special) const;

  std::string decode(std::span<const TokenId> ids, bool remove_special, bool unparse_special) const;

 private:
  void encode_raw(std::string_view text, bool prefix_space, std::vector<TokenId>& out) const;
  std::string compute_piece(TokenId id) const;

  std::unique_ptr<Vocab> vocab_;  // stable address: the models below keep references into it
  std::unique_ptr<SpecialTokenMatcher> specials_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  std::vector<std::string> pieces_;  // token_to_piece(id, special = true)
};

}  // namespace loom::text
