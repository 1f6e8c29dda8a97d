#include "text/spm.h"

#include <algorithm>
#include <queue>

#include "text/utf8.h"

namespace loom::text {

namespace {
struct Symbol {
  int prev, next;
  uint32_t start, n;
};
struct Bigram {
  float score;
  int left, right;
  uint32_t size;
};
// Highest score first; on ties the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct Lower {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};
}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  // Characters by lead byte only, clipped at the end: malformed UTF-8 makes odd-sized
  // "characters", which then fall back to bytes, exactly as in llama.cpp.
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_seq_len(uint8_t(text[off])), text.size() - off);
    const int idx = int(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, uint32_t(off), uint32_t(len)});
    off += len;
  }
  std::vector<Bigram> storage;
  storage.reserve(sym.size() * 2);
  std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue(Lower{}, std::move(storage));
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = sym[size_t(l)].n + sym[size_t(r)].n;
    const TokenId id = vocab.find(text.substr(sym[size_t(l)].start, size));
    if (id == kNoToken) return;
    queue.push({vocab.tokens[size_t(id)].score, l, r, size});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[size_t(bg.left)];
    Symbol& r = sym[size_t(bg.right)];
    // Stale entries: a side was absorbed (n == 0) or grew (sizes no longer add up).
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }

  // Every merged symbol is a vocabulary piece by construction, so llama.cpp's resegment()
  // recursion over rev_merge never applies to a symbol that is not a piece: such a symbol is
  // one original character, and it is spelled as bytes.
  if (sym.empty()) return;
  for (int i = 0; i != -1; i = sym[size_t(i)].next) {
    const Symbol& s = sym[size_t(i)];
    const std::string_view piece = text.substr(s.start, s.n);
    const TokenId id = vocab.find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : piece) out.push_back(vocab.byte_token(c));
  }
}

}  // namespace loom::text
