#include "text/constrain/matcher.h"

#include <algorithm>

#include "common/error.h"

namespace loom::text::constrain {

namespace {
constexpr uint64_t kEmpty = ~uint64_t(0);
inline uint64_t key_of(uint32_t pos, int32_t parent) { return (uint64_t(pos) << 32) | uint32_t(parent + 1); }
inline size_t slot_of(uint64_t k, size_t mask) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20) & mask; }
}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g, size_t max_stacks) : g_(std::move(g)), max_stacks_(max_stacks) {
  keys_.assign(1 << 12, kEmpty);
  vals_.assign(1 << 12, 0);
  seen_.assign(1 << 10, kEmpty);
  seen_gen_.assign(1 << 10, 0);
  reset();
}

void Matcher::reset() {
  nodes_.clear();
  chain_.clear();
  std::fill(keys_.begin(), keys_.end(), kEmpty);
  initial(state_);
}

void Matcher::initial(MatchState& out) {
  out.tops.clear();
  out.accepting = false;
  new_generation();
  for (uint32_t start : g_->rule_alts[g_->root]) expand(start, -1, out);
  std::sort(out.tops.begin(), out.tops.end());
  out.tops.erase(std::unique(out.tops.begin(), out.tops.end()), out.tops.end());
}

uint32_t Matcher::intern(uint32_t pos, int32_t parent) {
  if (nodes_.size() * 2 >= keys_.size()) {  // grow to keep the load under 1/2
    std::vector<uint64_t> old = std::move(keys_);
    std::vector<uint32_t> oldv = std::move(vals_);
    keys_.assign(old.size() * 2, kEmpty);
    vals_.assign(old.size() * 2, 0);
    const size_t m = keys_.size() - 1;
    for (size_t i = 0; i < old.size(); ++i)
      if (old[i] != kEmpty) {
        size_t s = slot_of(old[i], m);
        while (keys_[s] != kEmpty) s = (s + 1) & m;
        keys_[s] = old[i];
        vals_[s] = oldv[i];
      }
  }
  const uint64_t k = key_of(pos, parent);
  const size_t m = keys_.size() - 1;
  size_t s = slot_of(k, m);
  while (keys_[s] != kEmpty) {
    if (keys_[s] == k) return vals_[s];
    s = (s + 1) & m;
  }
  keys_[s] = k;
  vals_[s] = uint32_t(nodes_.size());
  nodes_.push_back({pos, parent});
  return vals_[s];
}

// Pushes onto `out` every stack reachable from (pos, parent) without reading a byte: rule
// references expand into their alternatives, ends of alternatives return to the parent.
void Matcher::expand(uint32_t pos, int32_t parent, MatchState& out) {
  const auto& elems = g_->elems;
  for (;;) {
    const Element e = elems[pos];
    if (e.kind == Element::End) {
      if (parent < 0) {
        out.accepting = true;
        return;
      }
      pos = nodes_[size_t(parent)].pos;
      parent = nodes_[size_t(parent)].parent;
      continue;
    }
    // Each (pos, parent) is expanded once per step: the same pair always gives the same stacks.
    if (!first_visit(key_of(pos, parent))) return;
    if (e.kind == Element::Bytes) {
      out.tops.push_back(intern(pos, parent));
      if (out.tops.size() > max_stacks_)
        loom::fail("grammar too ambiguous: more than {} parses alive at once", max_stacks_);
      return;
    }
    // A reference: return to pos + 1, unless the alternative ends there (then straight to the
    // parent: right recursion does not grow the stack).
    const int32_t ret = elems[pos + 1].kind == Element::End ? parent : int32_t(intern(pos + 1, parent));
    const auto& alts = g_->rule_alts[e.index];
    for (size_t i = 0; i + 1 < alts.size(); ++i) expand(alts[i], ret, out);
    if (alts.empty()) return;
    pos = alts.back();
    parent = ret;
  }
}

bool Matcher::first_visit(uint64_t k) {
  if (++seen_count_ * 2 > seen_.size()) {
    // Full: a larger table, and this step's marks start over (re-expanding a pair only adds
    // duplicates, which the final sort removes).
    if (seen_.size() >= (size_t(1) << 22)) loom::fail("grammar too ambiguous: more than {} expansions in one step", seen_.size() / 2);
    seen_.assign(seen_.size() * 2, kEmpty);
    seen_gen_.assign(seen_gen_.size() * 2, 0);
    new_generation();
  }
  const size_t m = seen_.size() - 1;
  size_t s = slot_of(k, m);
  while (seen_gen_[s] == gen_) {
    if (seen_[s] == k) return false;
    s = (s + 1) & m;
  }
  seen_[s] = k;
  seen_gen_[s] = gen_;
  return true;
}

void Matcher::new_generation() {
  seen_count_ = 0;
  if (++gen_ == 0) {  // wrapped: old marks could look current
    std::fill(seen_gen_.begin(), seen_gen_.end(), 0);
    gen_ = 1;
  }
}

void Matcher::step(const MatchState& from, uint8_t byte, MatchState& to) {
  to.tops.clear();
  to.accepting = false;
  new_generation();
  const auto& elems = g_->elems;
  for (uint32_t t : from.tops) {
    const Node n = nodes_[t];
    if (g_->sets[elems[n.pos].index].has(byte)) expand(n.pos + 1, n.parent, to);
  }
  if (to.tops.size() > 1) {
    std::sort(to.tops.begin(), to.tops.end());
    to.tops.erase(std::unique(to.tops.begin(), to.tops.end()), to.tops.end());
  }
}

ByteSet Matcher::next_bytes(const MatchState& s) const {
  ByteSet b;
  for (uint32_t t : s.tops) b |= g_->sets[g_->elems[nodes_[t].pos].index];
  return b;
}

uint32_t Matcher::min_to_finish(const MatchState& s) {
  if (s.accepting) return 0;
  if (chain_.size() < nodes_.size()) chain_.resize(nodes_.size(), UINT32_MAX);
  // Iteratively: a parent chain can be as deep as the input is nested.
  auto chain = [&](int32_t id) {
    std::vector<int32_t> up;
    for (int32_t n = id; n >= 0 && chain_[size_t(n)] == UINT32_MAX; n = nodes_[size_t(n)].parent) up.push_back(n);
    for (size_t i = up.size(); i-- > 0;) {
      const Node& nd = nodes_[size_t(up[i])];
      const uint64_t below = nd.parent < 0 ? 0 : chain_[size_t(nd.parent)];
      chain_[size_t(up[i])] = uint32_t(std::min<uint64_t>(g_->min_rest[nd.pos] + below, UINT32_MAX / 2));
    }
    return id < 0 ? 0u : chain_[size_t(id)];
  };
  uint32_t best = UINT32_MAX;
  for (uint32_t t : s.tops) best = std::min(best, chain(int32_t(t)));
  return best;
}

bool Matcher::advance(std::string_view bytes) {
  MatchState cur = state_;
  for (unsigned char c : bytes) {
    step(cur, c, scratch_);
    if (scratch_.dead()) return false;
    std::swap(cur, scratch_);
  }
  state_ = std::move(cur);
  return true;
}

void Matcher::compact() {
  // Re-intern the current stacks bottom-up into a fresh arena.
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  chain_.clear();
  std::fill(keys_.begin(), keys_.end(), kEmpty);
  std::vector<int32_t> remap(old.size(), -2);
  auto copy = [&](auto& self, int32_t id) -> int32_t {
    if (id < 0) return -1;
    if (remap[size_t(id)] != -2) return remap[size_t(id)];
    const int32_t parent = self(self, old[size_t(id)].parent);
    return remap[size_t(id)] = int32_t(intern(old[size_t(id)].pos, parent));
  };
  for (auto& t : state_.tops) t = uint32_t(copy(copy, int32_t(t)));
  std::sort(state_.tops.begin(), state_.tops.end());
}

}  // namespace loom::text::constrain
