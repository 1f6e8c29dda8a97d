#include "text/constrain/token_trie.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>

#include "text/tokenizer.h"

namespace loom::text::constrain {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog)
    : vocab_(pieces.size()), eog_(std::move(eog)), pieces_(pieces) {
  // Sorting the ids by text lays the trie out depth-first: each node's children, and each
  // subtree's tokens, come out contiguous.
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (!pieces[i].empty()) ids.push_back(int32_t(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return pieces[size_t(a)] < pieces[size_t(b)]; });
  // Build as nested maps first (simple), then flatten breadth-first so children are adjacent.
  struct Build {
    std::map<uint8_t, size_t> kids;
    std::vector<int32_t> toks;
  };
  std::vector<Build> b(1);
  for (int32_t id : ids) {
    size_t n = 0;
    for (unsigned char c : pieces[size_t(id)]) {
      auto it = b[n].kids.find(c);
      if (it == b[n].kids.end()) {
        b.emplace_back();
        it = b[n].kids.emplace(c, b.size() - 1).first;
      }
      n = it->second;
    }
    max_depth_ = std::max(max_depth_, pieces[size_t(id)].size());
    b[n].toks.push_back(id);
  }
  std::vector<size_t> order{0};
  nodes_.resize(1);
  for (size_t q = 0; q < order.size(); ++q) {
    const size_t src = order[q];
    Node& dst = nodes_[q];
    dst.first_token = uint32_t(token_ids_.size());
    dst.n_tokens = uint32_t(b[src].toks.size());
    token_ids_.insert(token_ids_.end(), b[src].toks.begin(), b[src].toks.end());
    dst.first_child = uint32_t(nodes_.size());
    dst.n_children = uint32_t(b[src].kids.size());
    for (auto [byte, kid] : b[src].kids) {  // (dst is not used past here: push_back moves nodes_)
      order.push_back(kid);
      Node n;
      n.byte = byte;
      nodes_.push_back(n);
    }
  }
  index_subtrees();
}

void TokenTrie::index_subtrees() {
  const size_t n = nodes_.size();
  below_.assign(n, ByteSet{});
  sub_begin_.assign(n, 0);
  sub_end_.assign(n, 0);
  // Children come after their parent (breadth-first), so a reverse pass sees kids first.
  for (size_t i = n; i-- > 0;) {
    const Node& nd = nodes_[i];
    for (uint32_t c = nd.first_child; c < nd.first_child + nd.n_children; ++c) {
      below_[i].add(nodes_[c].byte);
      below_[i] |= below_[c];
    }
  }
  // Depth-first token order: each subtree's tokens contiguous.
  std::vector<std::pair<uint32_t, bool>> todo{{0, false}};
  while (!todo.empty()) {
    auto [node, closing] = todo.back();
    todo.pop_back();
    if (closing) {
      sub_end_[node] = uint32_t(dfs_tokens_.size());
      continue;
    }
    const Node& nd = nodes_[node];
    sub_begin_[node] = uint32_t(dfs_tokens_.size());
    for (uint32_t k = 0; k < nd.n_tokens; ++k) dfs_tokens_.push_back(token_ids_[nd.first_token + k]);
    todo.push_back({node, true});
    for (uint32_t c = nd.first_child + nd.n_children; c-- > nd.first_child;) todo.push_back({c, false});
  }
}

std::shared_ptr<const TokenTrie> TokenTrie::of(const Tokenizer& tok) {
  static std::mutex mu;
  static std::map<const Tokenizer*, std::weak_ptr<const TokenTrie>> tries;
  std::lock_guard lock(mu);
  if (auto it = tries.find(&tok); it != tries.end())
    if (auto t = it->second.lock()) return t;
  const Vocab& v = tok.vocab();
  std::vector<std::string> pieces(v.size());
  for (size_t i = 0; i < v.size(); ++i) pieces[i] = tok.token_to_piece(TokenId(i), false);
  auto t = std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>(v.eog.begin(), v.eog.end()));
  tries[&tok] = t;
  return t;
}

void WalkScratch::clear() {
  states.clear();
  next.clear();
  loop.clear();
  loop_known.clear();
  min_rest.clear();
  ids.clear();
  keys.assign(1 << 14, 0);
  vals.assign(1 << 14, 0);
  n_trans = 0;
}

bool WalkScratch::fits(uint32_t id) {
  const bool finished = states[id].accepting && states[id].tops.empty();
  if (finished) return true;
  if (budget != UINT32_MAX && uint64_t(min_rest[id]) + 2 > budget) {
    cut = true;
    return false;
  }
  max_need = std::max(max_need, min_rest[id]);
  return true;
}

uint32_t WalkScratch::intern(const MatchState& s, Matcher& m) {
  std::string key(reinterpret_cast<const char*>(s.tops.data()), s.tops.size() * sizeof(uint32_t));
  key += s.accepting ? '1' : '0';
  auto [it, fresh] = ids.emplace(std::move(key), uint32_t(states.size()));
  if (fresh) {
    states.push_back(s);
    next.push_back(m.next_bytes(s));
    loop.emplace_back();
    loop_known.push_back(0);
    min_rest.push_back(m.min_to_finish(s));
  }
  return it->second;
}

uint32_t WalkScratch::step(Matcher& m, uint32_t id, uint8_t byte) {
  if (keys.empty() || n_trans * 2 >= keys.size()) {  // grow (rehash)
    std::vector<uint64_t> ok = std::move(keys);
    std::vector<uint32_t> ov = std::move(vals);
    keys.assign(std::max<size_t>(ok.size() * 2, 1 << 14), 0);
    vals.assign(keys.size(), 0);
    for (size_t i = 0; i < ok.size(); ++i)
      if (ok[i]) {
        size_t h = size_t((ok[i] * 0x9E3779B97F4A7C15ull) >> 20) & (keys.size() - 1);
        while (keys[h]) h = (h + 1) & (keys.size() - 1);
        keys[h] = ok[i];
        vals[h] = ov[i];
      }
  }
  const uint64_t k = ((uint64_t(id) << 8) | byte) + 1;
  size_t h = size_t((k * 0x9E3779B97F4A7C15ull) >> 20) & (keys.size() - 1);
  while (keys[h]) {
    if (keys[h] == k) return vals[h];
    h = (h + 1) & (keys.size() - 1);
  }
  MatchState to;
  m.step(states[id], byte, to);
  const uint32_t t = intern(to, m);
  keys[h] = k;  // (intern does not touch the table: h is still the free slot)
  vals[h] = t;
  ++n_trans;
  return t;
}

const ByteSet& WalkScratch::loop_bytes(Matcher& m, uint32_t id) {
  if (!loop_known[id]) {
    ByteSet l;
    const ByteSet nb = next[id];
    for (int b = 0; b < 256; ++b)
      if (nb.has(uint8_t(b)) && step(m, id, uint8_t(b)) == id) l.add(uint8_t(b));
    loop[id] = l;
    loop_known[id] = 1;
  }
  return loop[id];
}

void TokenTrie::walk(Matcher& m, uint32_t node, uint32_t state, std::vector<uint64_t>& mask, WalkScratch& w) const {
  const ByteSet next = w.next[state];
  bool loop_checked = false;
  ByteSet loop;
  const Node& nd = nodes_[node];
  for (uint32_t c = nd.first_child; c < nd.first_child + nd.n_children; ++c) {
    const Node& kid = nodes_[c];
    if (!next.has(kid.byte)) continue;
    const uint32_t there = w.step(m, state, kid.byte);
    if (w.states[there].dead()) continue;
    if (there == state && kid.n_children > 0) {
      // The byte led back to the same state: if every byte below does too, the whole subtree
      // is allowed and ends in this state.
      if (!loop_checked) {
        loop = w.loop_bytes(m, state);
        loop_checked = true;
      }
      bool inside = true;
      for (int i = 0; i < 4; ++i) inside = inside && (below_[c].bits[i] & ~loop.bits[i]) == 0;
      if (inside) {
        if (!w.fits(there)) continue;  // the whole subtree ends in this same state
        for (uint32_t k = sub_begin_[c]; k < sub_end_[c]; ++k) {
          const auto id = uint32_t(dfs_tokens_[k]);
          mask[id >> 6] |= uint64_t(1) << (id & 63);
        }
        continue;
      }
    }
    if (kid.n_tokens > 0 && w.fits(there))
      for (uint32_t k = 0; k < kid.n_tokens; ++k) {
        const auto id = uint32_t(token_ids_[kid.first_token + k]);
        mask[id >> 6] |= uint64_t(1) << (id & 63);
      }
    if (kid.n_children > 0 && !w.states[there].tops.empty()) walk(m, c, there, mask, w);
  }
}

void TokenTrie::allowed_tokens(Matcher& m, std::vector<uint64_t>& mask, WalkScratch& w) const {
  mask.assign((vocab_ + 63) / 64, 0);
  if (w.keys.empty() || w.states.size() > (size_t(1) << 18)) w.clear();  // bounded memory
  w.max_need = 0;
  w.cut = false;
  walk(m, 0, w.intern(m.state(), m), mask, w);
  if (m.accepting())
    for (int32_t id : eog_)
      if (id >= 0 && size_t(id) < vocab_) mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
}

}  // namespace loom::text::constrain
