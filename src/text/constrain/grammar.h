// The one grammar form every constraint compiles to: a context-free grammar over BYTES.
// GBNF text (gbnf.h) is the front door; JSON Schema (json_schema.h) and regular expressions
// (regex.h) are translated to GBNF text first, so there is one parser and one matcher.
// Code points are lowered to UTF-8 byte sequences at parse time (utf8_ranges.h), which is
// what lets the matcher walk any tokenizer's token texts byte by byte.
//
// Layout: every alternative of every rule is a run of Elements in `elems`, closed by an End
// element; a position is an index into `elems`. Repetition operators have already been
// expanded into helper rules (right recursion, as llama.cpp does), so the matcher only knows
// byte sets and rule references.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom::text::constrain {

struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
    return *this;
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { End, Bytes, Rule };
  Kind kind = End;
  uint32_t index = 0;  // Bytes: into Grammar::sets; Rule: a rule id
};

// Bounds that keep a hostile grammar (or schema) from taking unbounded memory or time.
struct GrammarLimits {
  size_t max_elements = 4u << 20;
  size_t max_rules = 1u << 18;
};

struct Grammar {
  std::vector<std::string> rule_names;           // by rule id
  std::vector<std::vector<uint32_t>> rule_alts;  // per rule: the start position of each alternative
  std::vector<Element> elems;
  std::vector<ByteSet> sets;
  uint32_t root = 0;
  // Per position: the fewest bytes that finish its alternative from there (every rule is
  // productive after finish(), so each is finite): what a shortest completion costs.
  std::vector<uint32_t> min_rest;

  // The most bytes any accepted string has, when the language is finite (no cycle through
  // rule references); used to bound generation by a finite schema.
  std::optional<size_t> max_bytes() const;
  size_t n_rules() const { return rule_names.size(); }
};

// Rules as nested lists while a front end adds them; finish() checks and flattens.
class GrammarBuilder {
 public:
  using Sequence = std::vector<Element>;
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}
  // The id of the rule called `name`, created (undefined) on first use.
  uint32_t symbol(const std::string& name);
  // A new helper rule named after `base` (base-1, base-2, ...), defined by the caller.
  uint32_t fresh(const std::string& base);
  void define(uint32_t rule, std::vector<Sequence> alternatives);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  Element bytes(const ByteSet& s);
  // Appends to `seq` what matches one code point of the ranges (inclusive; surrogates never
  // match): a byte set when all are ASCII, else a reference to a helper rule of UTF-8 byte
  // sequences (shared between equal range lists).
  void code_points(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, Sequence& seq);
  void literal_code_point(uint32_t cp, Sequence& seq);
  void charge(size_t n_elements);  // counts elements against the limit; throws past it

  // Checks every referenced rule is defined, drops alternatives that can never finish (they
  // reference a rule that derives no finite string), so every state the matcher reaches can
  // still complete, and rejects left recursion (the matcher expands leftmost references
  // eagerly, as llama.cpp's does, and would not terminate). Throws loom::Error naming the rule.
  Grammar finish(const std::string& root);

 private:
  GrammarLimits limits_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<bool> defined_;
  std::vector<ByteSet> sets_;
  std::vector<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t>> cp_rules_;
  size_t n_elements_ = 0;
};

// Unicode scalar values as a sorted list of disjoint inclusive ranges.
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
CodePointRanges normalize(CodePointRanges r);             // sorts and merges
CodePointRanges complement(const CodePointRanges& r);     // within [0, 0x10FFFF]
// The UTF-8 encodings of the code points in [lo, hi] (surrogates excluded) as sequences of
// byte ranges, each sequence one encoded length.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace loom::text::constrain
