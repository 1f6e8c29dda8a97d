// A pushdown matcher over the byte grammar (grammar.h) that follows every parse at once, as
// llama.cpp's grammar sampler does: the state is a set of stacks, each a chain of positions
// whose top is a byte set still to be read and whose lower entries are where to return when
// a rule ends. Stacks are hash-consed nodes (position, parent) in an arena, so stacks share
// their tails, advancing one creates only its new top, and two equal stacks are one node id:
// a state is a sorted list of node ids, cheap to compare and to use as a cache key.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "text/constrain/grammar.h"

namespace loom::text::constrain {

struct MatchState {
  std::vector<uint32_t> tops;  // node ids, sorted, unique; each node's position is a byte set
  bool accepting = false;      // the input so far is a complete string of the grammar
  bool dead() const { return tops.empty() && !accepting; }
  bool operator==(const MatchState&) const = default;
};

class Matcher {
 public:
  // A state with more than max_stacks stacks is an error (a grammar too ambiguous to follow
  // in bounded time), not a slowdown.
  explicit Matcher(std::shared_ptr<const Grammar> g, size_t max_stacks = 2048);

  const MatchState& state() const { return state_; }
  // Reads `bytes`; false (and the state unchanged) when the grammar rejects them.
  bool advance(std::string_view bytes);
  bool accepting() const { return state_.accepting; }
  // Accepting and nothing more may follow: generation is over.
  bool finished() const { return state_.accepting && state_.tops.empty(); }
  void reset();

  // The pieces the token walk needs.
  void step(const MatchState& from, uint8_t byte, MatchState& to);
  ByteSet next_bytes(const MatchState& s) const;  // bytes some stack of s can read
  // The fewest bytes that complete the input from state s (0 when it accepts).
  uint32_t min_to_finish(const MatchState& s);
  const Grammar& grammar() const { return *g_; }
  // Node count; when the arena is large, compact() re-interns the current state alone
  // (node ids change: caches keyed by them must be dropped).
  size_t arena_size() const { return nodes_.size(); }
  void compact();

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;  // -1: the bottom
  };
  uint32_t intern(uint32_t pos, int32_t parent);
  void expand(uint32_t pos, int32_t parent, MatchState& out);
  void initial(MatchState& out);
  bool first_visit(uint64_t key);
  void new_generation();

  std::shared_ptr<const Grammar> g_;
  size_t max_stacks_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> chain_;  // per node: min_rest of its whole chain (UINT32_MAX: not yet)
  // Open-addressing map (pos, parent) -> node id, and the set of (pos, parent) pairs expanded
  // during one step (a nullable item repeated n times would otherwise expand 2^n ways).
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  std::vector<uint64_t> seen_;
  std::vector<uint32_t> seen_gen_;
  uint32_t gen_ = 0;
  size_t seen_count_ = 0;
  MatchState state_;
  MatchState scratch_;
};

}  // namespace loom::text::constrain
