// A constraint on one generation: compiled once from its source (GBNF, JSON Schema, the any-
// object mode or a regex) into a shared grammar, then followed per request by a Constraint:
// mask() gives the token ids allowed next over the model's vocabulary, accept() advances on
// the sampled one. The runtime's sampler applies the mask before its chain (sampler.h); the
// engine ends the request when the grammar is finished.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/constrain/grammar.h"
#include "text/constrain/matcher.h"
#include "text/constrain/token_trie.h"

namespace loom::text::constrain {

enum class SourceKind { gbnf, json_schema, json_object, regex };

struct CompiledGrammar {
  std::shared_ptr<const Grammar> grammar;
  std::string gbnf;                     // the text it was parsed from (for `loom grammar --print`)
  std::optional<size_t> max_bytes;      // when finite: the longest accepted string
  double compile_seconds = 0;
};

// Compiles `text` as `kind` (json_object ignores it). Throws loom::Error naming what is wrong
// or unsupported; bounded in time and memory for hostile input.
CompiledGrammar compile(SourceKind kind, const std::string& text);
SourceKind parse_source_kind(const std::string& name);  // gbnf | json-schema | json-object | regex

class Constraint {
 public:
  Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenTrie> trie);

  // Bit id set when token id may come next (end-of-generation tokens exactly when the output
  // so far is complete). Cached per matcher state: JSON revisits the same states often.
  const std::vector<uint64_t>& mask();
  bool allowed(int32_t token);
  // Tokens the request may still generate, this one included (< 0: no limit): from here on
  // only tokens after which the output can still be completed in time are allowed.
  void set_budget(int32_t tokens_left);
  // Advances on a sampled token; throws loom::Error when the grammar rejects it.
  // End-of-generation tokens are accepted when the grammar accepts and change nothing.
  void accept(int32_t token);
  bool accepting() const { return m_.accepting(); }
  bool finished() const { return m_.finished(); }  // complete, and nothing may follow

  double mask_seconds() const { return mask_seconds_; }  // total time in mask()
  int64_t masks() const { return masks_; }
  int64_t cache_hits() const { return hits_; }

 private:
  Matcher m_;
  std::shared_ptr<const TokenTrie> trie_;
  WalkScratch scratch_;
  struct CachedMask {
    std::vector<uint64_t> mask;
    uint32_t max_need = 0;  // valid for any budget >= max_need + 2
  };
  std::unordered_map<std::string, CachedMask> cache_;
  std::vector<uint64_t> uncached_;  // a mask the budget cut: good for this step only
  const std::vector<uint64_t>* current_ = nullptr;  // mask of the present state, once computed
  double mask_seconds_ = 0;
  int64_t masks_ = 0, hits_ = 0;
};

}  // namespace loom::text::constrain
