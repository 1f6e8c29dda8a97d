#include "text/constrain/grammar.h"

#include <algorithm>
#include <functional>

#include "common/error.h"

namespace loom::text::constrain {

// ---- code point ranges and UTF-8 ----------------------------------------------------------

CodePointRanges normalize(CodePointRanges r) {
  std::sort(r.begin(), r.end());
  CodePointRanges out;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > 0x10FFFF) continue;
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.push_back({lo, hi});
  }
  return out;
}

CodePointRanges complement(const CodePointRanges& r) {
  CodePointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : normalize(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

namespace {
using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] until each piece has one encoded length and differs only in a suffix of
// whole continuation bytes, so byte k of every member lies in [enc(lo)[k], enc(hi)[k]]
// (the construction of RE2 and Rust's regex-syntax).
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      split_utf8(lo, edge, out);
      split_utf8(edge + 1, hi, out);
      return;
    }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteSeq seq;
  for (size_t k = 0; k < n; ++k) seq.push_back({uint8_t(a[k]), uint8_t(b[k])});
  out.push_back(std::move(seq));
}
}  // namespace

std::vector<ByteSeq> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<ByteSeq> out;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo <= 0xD7FF) split_utf8(lo, std::min<uint32_t>(hi, 0xD7FF), out);
  if (hi >= 0xE000) split_utf8(std::max<uint32_t>(lo, 0xE000), hi, out);
  return out;
}

// ---- builder --------------------------------------------------------------------------------

uint32_t GrammarBuilder::symbol(const std::string& name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (names_.size() >= limits_.max_rules) loom::fail("grammar has more than {} rules", limits_.max_rules);
  ids_[name] = uint32_t(names_.size());
  names_.push_back(name);
  rules_.emplace_back();
  defined_.push_back(false);
  return uint32_t(names_.size() - 1);
}

uint32_t GrammarBuilder::fresh(const std::string& base) {
  if (names_.size() >= limits_.max_rules) loom::fail("grammar has more than {} rules", limits_.max_rules);
  std::string name = base + "-" + std::to_string(names_.size());
  while (ids_.count(name)) name += "_";
  ids_[name] = uint32_t(names_.size());
  names_.push_back(name);
  rules_.emplace_back();
  defined_.push_back(false);
  return uint32_t(names_.size() - 1);
}

void GrammarBuilder::charge(size_t n) {
  n_elements_ += n;
  if (n_elements_ > limits_.max_elements)
    loom::fail("grammar grows past {} elements (repetition counts or enumerations too large)", limits_.max_elements);
}

void GrammarBuilder::define(uint32_t rule, std::vector<Sequence> alternatives) {
  size_t n = 0;
  for (const auto& a : alternatives) n += a.size() + 1;
  charge(n);
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
}

Element GrammarBuilder::bytes(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i)
    if (sets_[i] == s) return {Element::Bytes, uint32_t(i)};
  sets_.push_back(s);
  return {Element::Bytes, uint32_t(sets_.size() - 1)};
}

void GrammarBuilder::literal_code_point(uint32_t cp, Sequence& seq) {
  std::string enc;
  append_utf8(enc, cp);
  for (unsigned char c : enc) {
    ByteSet s;
    s.add(c);
    seq.push_back(bytes(s));
  }
}

void GrammarBuilder::code_points(const CodePointRanges& ranges_in, Sequence& seq) {
  const CodePointRanges ranges = normalize(ranges_in);
  if (ranges.empty()) loom::fail("a character class matches no character");
  if (ranges.back().second < 0x80) {
    ByteSet s;
    for (auto [lo, hi] : ranges) s.add_range(uint8_t(lo), uint8_t(hi));
    seq.push_back(bytes(s));
    return;
  }
  for (const auto& [r, id] : cp_rules_)
    if (r == ranges) {
      seq.push_back({Element::Rule, id});
      return;
    }
  std::vector<Sequence> alts;
  ByteSet ascii;
  bool any_ascii = false;
  for (auto [lo, hi] : ranges)
    for (const auto& bs : utf8_sequences(lo, hi)) {
      if (bs.size() == 1) {  // ASCII pieces share one alternative
        ascii.add_range(bs[0].first, bs[0].second);
        any_ascii = true;
        continue;
      }
      Sequence s;
      for (auto [a, b] : bs) {
        ByteSet set;
        set.add_range(a, b);
        s.push_back(bytes(set));
      }
      alts.push_back(std::move(s));
    }
  if (any_ascii) alts.insert(alts.begin(), Sequence{bytes(ascii)});
  const uint32_t id = fresh("char");
  define(id, std::move(alts));
  cp_rules_.push_back({ranges, id});
  seq.push_back({Element::Rule, id});
}

Grammar GrammarBuilder::finish(const std::string& root_name) {
  uint32_t root = UINT32_MAX;
  if (auto it = ids_.find(root_name); it != ids_.end()) root = it->second;
  if (root == UINT32_MAX || !defined_[root]) loom::fail("grammar has no rule '{}'", root_name);
  const size_t n = names_.size();
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (const auto& e : alt)
        if (e.kind == Element::Rule && !defined_[e.index])
          loom::fail("rule '{}' refers to undefined rule '{}'", names_[r], names_[e.index]);

  // Productive rules (derive some finite string): a fixpoint.
  std::vector<bool> productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const auto& alt : rules_[r]) {
        if (std::all_of(alt.begin(), alt.end(),
                        [&](const Element& e) { return e.kind != Element::Rule || productive[e.index]; })) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root])
    loom::fail("grammar accepts no finite string: rule '{}' can never end (recursion without a base case?)",
               names_[root]);
  for (size_t r = 0; r < n; ++r)
    std::erase_if(rules_[r], [&](const Sequence& alt) {
      return std::any_of(alt.begin(), alt.end(),
                         [&](const Element& e) { return e.kind == Element::Rule && !productive[e.index]; });
    });

  // Nullable rules, then left recursion: an edge r -> s when s can be the first thing r reads.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r])
        if (std::all_of(alt.begin(), alt.end(),
                        [&](const Element& e) { return e.kind == Element::Rule && nullable[e.index]; })) {
          nullable[r] = changed = true;
          break;
        }
    }
  }
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r])
      for (const auto& e : alt) {
        if (e.kind != Element::Rule) break;
        first[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    path.push_back({uint32_t(start), 0});
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i < first[r].size()) {
        const uint32_t s = first[r][i++];
        if (color[s] == 1) loom::fail("grammar is left-recursive through rule '{}'", names_[s]);
        if (color[s] == 0) {
          color[s] = 1;
          path.push_back({s, 0});
        }
      } else {
        color[r] = 2;
        path.pop_back();
      }
    }
  }

  Grammar g;
  g.rule_names = names_;
  g.sets = sets_;
  g.root = root;
  g.rule_alts.resize(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r]) {
      g.rule_alts[r].push_back(uint32_t(g.elems.size()));
      g.elems.insert(g.elems.end(), alt.begin(), alt.end());
      g.elems.push_back({Element::End, 0});
    }
  // Shortest string of each rule (a fixpoint from "unknown"), then per position to its End.
  constexpr uint32_t kInf = UINT32_MAX / 4;
  std::vector<uint32_t> shortest(n, kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      for (uint32_t start : g.rule_alts[r]) {
        uint64_t len = 0;
        for (uint32_t p = start; g.elems[p].kind != Element::End; ++p)
          len += g.elems[p].kind == Element::Bytes ? 1 : shortest[g.elems[p].index];
        if (len < shortest[r]) {
          shortest[r] = uint32_t(len);
          changed = true;
        }
      }
  }
  g.min_rest.assign(g.elems.size(), 0);
  for (size_t p = g.elems.size(); p-- > 0;) {
    const Element& e = g.elems[p];
    if (e.kind == Element::End) continue;
    const uint64_t rest = uint64_t(e.kind == Element::Bytes ? 1 : shortest[e.index]) + g.min_rest[p + 1];
    g.min_rest[p] = uint32_t(std::min<uint64_t>(rest, kInf));
  }
  return g;
}

// ---- bounds ---------------------------------------------------------------------------------

std::optional<size_t> Grammar::max_bytes() const {
  const size_t n = rule_names.size();
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 in progress, 2 done
  std::vector<size_t> best(n, 0);
  bool cyclic = false;
  // Depth is bounded by the rule count; grammars from the front ends nest shallowly.
  std::function<size_t(uint32_t)> visit = [&](uint32_t r) -> size_t {
    if (state[r] == 2) return best[r];
    if (state[r] == 1) {
      cyclic = true;
      return 0;
    }
    state[r] = 1;
    size_t m = 0;
    for (uint32_t start : rule_alts[r]) {
      size_t len = 0;
      for (uint32_t p = start; elems[p].kind != Element::End && !cyclic; ++p)
        len += elems[p].kind == Element::Bytes ? 1 : visit(elems[p].index);
      m = std::max(m, len);
      if (cyclic) return 0;
    }
    state[r] = 2;
    return best[r] = m;
  };
  const size_t m = visit(root);
  if (cyclic) return std::nullopt;
  return m;
}

}  // namespace loom::text::constrain
