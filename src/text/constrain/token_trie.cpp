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

void TokenTrie::walk(Matcher& m, uint32_t node, size_t depth, std::vector<uint64_t>& mask,
                     std::vector<MatchState>& st) const {
  const ByteSet next = m.next_bytes(st[depth]);
  const Node& nd = nodes_[node];
  for (uint32_t c = nd.first_child; c < nd.first_child + nd.n_children; ++c) {
    const Node& kid = nodes_[c];
    if (!next.has(kid.byte)) continue;
    MatchState& there = st[depth + 1];
    m.step(st[depth], kid.byte, there);
    if (there.dead()) continue;
    for (uint32_t k = 0; k < kid.n_tokens; ++k) {
      const auto id = uint32_t(token_ids_[kid.first_token + k]);
      mask[id >> 6] |= uint64_t(1) << (id & 63);
    }
    if (kid.n_children > 0 && !there.tops.empty()) walk(m, c, depth + 1, mask, st);
  }
}

void TokenTrie::allowed_tokens(Matcher& m, std::vector<uint64_t>& mask, std::vector<MatchState>& st) const {
  mask.assign((vocab_ + 63) / 64, 0);
  if (st.size() < max_depth_ + 2) st.resize(max_depth_ + 2);
  st[0] = m.state();
  walk(m, 0, 0, mask, st);
  if (m.accepting())
    for (int32_t id : eog_)
      if (id >= 0 && size_t(id) < vocab_) mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
}

}  // namespace loom::text::constrain
