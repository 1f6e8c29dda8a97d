#include "text/bpe.h"

#include <algorithm>
#include <queue>

#include "text/utf8.h"

namespace loom::text {

namespace {
constexpr uint64_t kEmptyKey = ~uint64_t(0);
inline uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
inline uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}
constexpr size_t kCacheLimit = 1 << 18;
}  // namespace

int32_t BpeModel::intern(const std::string& s) {
  if (TokenId id = vocab_.find(s); id != kNoToken) return id;
  auto [it, fresh] = extra_index_.emplace(s, int32_t(vocab_.size() + extra_.size()));
  if (fresh) extra_.push_back(s);
  return it->second;
}

BpeModel::BpeModel(const Vocab& vocab) : vocab_(vocab) {
  size_t cap = 16;
  while (cap < vocab.merges.size() * 2) cap <<= 1;
  merge_keys_.assign(cap, kEmptyKey);
  merge_vals_.resize(cap);
  merge_mask_ = cap - 1;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const auto& [a, b] = vocab.merges[rank];
    if (a.empty() || b.empty()) continue;  // a malformed merge line never matches a symbol
    const int32_t ia = intern(a), ib = intern(b), iab = intern(a + b);
    const uint64_t key = pair_key(ia, ib);
    size_t i = mix(key) & merge_mask_;
    while (merge_keys_[i] != kEmptyKey && merge_keys_[i] != key) i = (i + 1) & merge_mask_;
    if (merge_keys_[i] == key) continue;  // first (lowest) rank wins, like bpe_ranks.emplace
    merge_keys_[i] = key;
    merge_vals_[i] = {int32_t(rank), iab};
  }
  byte_symbol_.resize(256);
  single_byte_token_.resize(256);
  for (int c = 0; c < 256; ++c) {
    const std::string& ch = byte_to_unicode(uint8_t(c));
    TokenId id = vocab.find(ch);
    if (id == kNoToken) {
      auto it = extra_index_.find(ch);
      id = it == extra_index_.end() ? kNoToken : it->second;
    }
    byte_symbol_[size_t(c)] = id;
    const char raw = char(c);
    single_byte_token_[size_t(c)] = vocab.find(std::string_view(&raw, 1));
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  if (a < 0 || b < 0) return nullptr;
  const uint64_t key = pair_key(a, b);
  size_t i = mix(key) & merge_mask_;
  while (merge_keys_[i] != kEmptyKey) {
    if (merge_keys_[i] == key) return &merge_vals_[i];
    i = (i + 1) & merge_mask_;
  }
  return nullptr;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  if (vocab_.ignore_merges) {
    std::string encoded;
    for (unsigned char c : word) encoded += byte_to_unicode(c);
    if (TokenId id = vocab_.find(encoded); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  struct Symbol {
    int prev, next;
    int32_t id;  // interned id, -1 when the byte's character is unknown
    uint32_t start, n;
  };
  struct Bigram {
    int32_t rank;
    int left, right;
    uint32_t size;
    int32_t result;
  };
  // Lowest rank first; ties → leftmost (llm_bigram_bpe::comparator).
  struct Greater {
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
  };
  std::vector<Symbol> sym(word.size());
  for (size_t i = 0; i < word.size(); ++i)
    sym[i] = {int(i) - 1, i + 1 == word.size() ? -1 : int(i) + 1, byte_symbol_[uint8_t(word[i])], uint32_t(i), 1};
  std::priority_queue<Bigram, std::vector<Bigram>, Greater> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Merge* m = find_merge(sym[size_t(l)].id, sym[size_t(r)].id);
    if (!m) return;
    queue.push({m->rank, l, r, sym[size_t(l)].n + sym[size_t(r)].n, m->result});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(bg.left)];
    Symbol& r = sym[size_t(bg.right)];
    // A symbol only grows by absorbing its right neighbour, so an unchanged pair is exactly
    // one whose sides are both alive and still add up to the recorded size.
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
    l.n += r.n;
    l.id = bg.result;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (int i = 0; i != -1; i = sym[size_t(i)].next) {
    const Symbol& s = sym[size_t(i)];
    if (s.id >= 0 && size_t(s.id) < vocab_.size()) {
      out.push_back(s.id);
      continue;
    }
    // Not a token: llama.cpp looks up each byte of the *encoded* text as a one-byte piece and
    // silently drops those that are not (the usual case for non-ASCII alphabet characters).
    for (uint32_t k = 0; k < s.n; ++k)
      for (unsigned char e : byte_to_unicode(uint8_t(word[s.start + k])))
        if (TokenId id = single_byte_token_[e]; id != kNoToken) out.push_back(id);
  }
}

}  // namespace loom::text
