#include "text/special_tokens.h"

#include <algorithm>

namespace loom::text {

namespace {
// C isspace() in the "C" locale, which is what llama.cpp's strip loops use on raw bytes.
bool ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) : vocab_(vocab) {
  nodes_.emplace_back();
  std::fill(std::begin(root_next_), std::end(root_next_), -1);
  for (size_t p = 0; p < vocab.special_tokens.size(); ++p) {
    const std::string& t = vocab.tokens[size_t(vocab.special_tokens[p])].text;
    int node = 0;
    for (unsigned char c : t) {
      int next = child(node, c);
      if (next < 0) {
        next = int(nodes_.size());
        nodes_.emplace_back();
        auto& ch = nodes_[size_t(node)].children;
        ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, 0)), {c, next});
        if (node == 0) root_next_[c] = next;
      }
      node = next;
    }
    if (nodes_[size_t(node)].priority < 0) nodes_[size_t(node)].priority = int(p);
  }
}

int SpecialTokenMatcher::child(int node, unsigned char c) const {
  if (node == 0 && !nodes_[0].children.empty()) return root_next_[c];
  const auto& ch = nodes_[size_t(node)].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, 0));
  return it != ch.end() && it->first == c ? it->second : -1;
}

std::vector<Fragment> SpecialTokenMatcher::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  if (text.empty()) return out;
  // All occurrences of all participating specials, as (priority, position).
  std::vector<std::pair<int, uint32_t>> occ;
  for (size_t i = 0; i < text.size(); ++i) {
    int node = root_next_[uint8_t(text[i])];
    for (size_t j = i + 1; node >= 0; ++j) {
      const int p = nodes_[size_t(node)].priority;
      if (p >= 0) {
        const uint32_t attr = vocab_.attr(vocab_.special_tokens[size_t(p)]);
        if (parse_special || !(attr & (kAttrControl | kAttrUnknown))) occ.emplace_back(p, uint32_t(i));
      }
      if (j >= text.size()) break;
      node = child(node, uint8_t(text[j]));
    }
  }
  if (occ.empty()) {
    out.push_back({kNoToken, text});
    return out;
  }
  std::sort(occ.begin(), occ.end());

  // Walk tokens in priority order; a byte once claimed (by a token or by stripping) is no
  // longer raw text, and a match must lie wholly inside one raw stretch.
  std::vector<uint8_t> claimed(text.size(), 0);  // 0 raw, 1 stripped, 2 token start, 3 token body
  std::vector<TokenId> token_at(text.size(), kNoToken);
  size_t k = 0;
  while (k < occ.size()) {
    const int p = occ[k].first;
    const TokenId id = vocab_.special_tokens[size_t(p)];
    const uint32_t attr = vocab_.attr(id);
    const size_t len = vocab_.tokens[size_t(id)].text.size();
    size_t last_end = 0;
    for (; k < occ.size() && occ[k].first == p; ++k) {
      const size_t pos = occ[k].second;
      if (pos < last_end) continue;
      bool raw = true;
      for (size_t q = pos; q < pos + len && raw; ++q) raw = claimed[q] == 0;
      if (!raw) continue;
      claimed[pos] = 2;
      for (size_t q = pos + 1; q < pos + len; ++q) claimed[q] = 3;
      token_at[pos] = id;
      last_end = pos + len;
      if (attr & kAttrLstrip)
        for (size_t q = pos; q > 0 && claimed[q - 1] == 0 && ascii_space(uint8_t(text[q - 1])); --q) claimed[q - 1] = 1;
      if (attr & kAttrRstrip) {
        size_t q = pos + len;
        for (; q < text.size() && claimed[q] == 0 && ascii_space(uint8_t(text[q])); ++q) claimed[q] = 1;
        last_end = q;
      }
    }
  }
  for (size_t i = 0; i < text.size();) {
    if (claimed[i] == 0) {
      size_t j = i;
      while (j < text.size() && claimed[j] == 0) ++j;
      out.push_back({kNoToken, text.substr(i, j - i)});
      i = j;
    } else if (claimed[i] == 2) {
      out.push_back({token_at[i], {}});
      i += vocab_.tokens[size_t(token_at[i])].text.size();
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace loom::text
