// The vocabulary as a byte trie of its token texts (what each token adds to the output), built
// once per vocabulary and shared by every constraint on it. allowed_tokens() walks it from a
// matcher state, pruning every subtree whose prefix the grammar rejects, so the cost follows
// the tokens that can still be valid rather than the vocabulary size; bytes of one token may
// cross any number of grammar terminals.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/constrain/matcher.h"

namespace loom::text { class Tokenizer; }

namespace loom::text::constrain {

// What one caller keeps between walks: the matcher states walks have met, by id, with the
// bytes each can read, the bytes that lead back to it (a loop: the inside of a JSON string),
// and the transitions (state, byte) -> state already computed. Consecutive masks meet mostly
// the same states (a bounded string's k-th and k+1-th characters), so a walk is mostly lookups.
struct WalkScratch {
  std::vector<MatchState> states;
  std::vector<ByteSet> next, loop;
  std::vector<uint8_t> loop_known;
  std::vector<uint32_t> min_rest;  // per state: fewest bytes to finish
  // Tokens left to the request (UINT32_MAX: no limit): a token is allowed only when what it
  // leaves can still be finished in time (a byte a token, then the end token), so a reply cut
  // by max_tokens is still complete. The walk reports the largest need among allowed tokens
  // and whether the budget removed any.
  uint32_t budget = UINT32_MAX;
  uint32_t max_need = 0;
  bool cut = false;
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<uint64_t> keys;  // open addressing: (id << 8 | byte) + 1, 0 empty
  std::vector<uint32_t> vals;
  size_t n_trans = 0;
  void clear();
  uint32_t intern(const MatchState& s, Matcher& m);
  bool fits(uint32_t id);  // a token ending in state id may be allowed under the budget
  uint32_t step(Matcher& m, uint32_t id, uint8_t byte);
  const ByteSet& loop_bytes(Matcher& m, uint32_t id);
};

class TokenTrie {
 public:
  // pieces[id]: the bytes token id stands for (empty: never allowed under a constraint, as
  // control tokens); eog: tokens allowed exactly when the grammar can accept.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog);
  // The trie of a tokenizer's vocabulary (token_to_piece without special text), built on first
  // use and shared while any constraint holds it.
  static std::shared_ptr<const TokenTrie> of(const Tokenizer& tok);

  size_t vocab_size() const { return vocab_; }
  const std::vector<int32_t>& eog() const { return eog_; }
  size_t n_nodes() const { return nodes_.size(); }
  const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }

  // Sets bit id of `mask` (vocab_size bits, cleared first) for every token the matcher's
  // current state can read whole, and the end-of-generation tokens when it accepts.
  // `scratch` is the caller's, so one trie serves many threads. A subtree whose every byte
  // loops the state back to itself (most tokens inside a JSON string) is allowed whole,
  // without walking it.
  void allowed_tokens(Matcher& m, std::vector<uint64_t>& mask, WalkScratch& scratch) const;

 private:
  struct Node {
    uint32_t first_child = 0, n_children = 0;  // children are contiguous, sorted by byte
    uint32_t first_token = 0, n_tokens = 0;    // tokens whose text ends here
    uint8_t byte = 0;                          // the edge into this node
  };
  void walk(Matcher& m, uint32_t node, uint32_t state, std::vector<uint64_t>& mask, WalkScratch& w) const;
  void index_subtrees();

  size_t vocab_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  // Per node: the bytes on edges below it, and its subtree's tokens as a range of dfs_tokens_.
  std::vector<ByteSet> below_;
  std::vector<uint32_t> sub_begin_, sub_end_;
  std::vector<int32_t> dfs_tokens_;
  std::vector<int32_t> eog_;
  std::vector<std::string> pieces_;
  size_t max_depth_ = 0;  // the longest token text
};

}  // namespace loom::text::constrain
