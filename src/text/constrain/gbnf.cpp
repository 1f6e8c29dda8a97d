#include "text/constrain/gbnf.h"

#include <fmt/format.h>

#include "common/error.h"

namespace loom::text::constrain {

namespace {

constexpr uint32_t kMaxRepetition = 4096;
constexpr int kMaxNesting = 256;

class Parser {
 public:
  Parser(std::string_view src, GrammarBuilder& b) : s_(src), b_(b) {}

  void parse() {
    skip_space(true);
    while (pos_ < s_.size()) rule();
  }

 private:
  using Sequence = GrammarBuilder::Sequence;

  [[noreturn]] void error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    loom::fail("grammar, line {} column {}: {}", line, col, what);
  }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }
  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string name() {
    const size_t start = pos_;
    while (!at_end() && word_char(peek())) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  void rule() {
    const std::string n = name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") error(fmt::format("expected '::=' after rule name '{}'", n));
    pos_ += 3;
    skip_space(true);
    const uint32_t id = b_.symbol(n);
    if (b_.defined(id)) error(fmt::format("rule '{}' is defined twice", n));
    current_ = n;
    b_.define(id, alternatives(false, 0));
    if (peek() == '\r') pos_ += peek(1) == '\n' ? 2 : 1;
    else if (peek() == '\n') ++pos_;
    else if (!at_end()) error(fmt::format("expected the end of the line after rule '{}', found '{}'", n, peek()));
    skip_space(true);
  }

  std::vector<Sequence> alternatives(bool nested, int depth) {
    if (depth > kMaxNesting) error(fmt::format("groups nest deeper than {}", kMaxNesting));
    std::vector<Sequence> alts;
    alts.push_back(sequence(nested, depth));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(sequence(nested, depth));
    }
    return alts;
  }

  uint32_t code_point() {
    if (at_end()) error("unexpected end of grammar");
    if (peek() == '\\') {
      const char e = peek(1);
      pos_ += 2;
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': return uint8_t(e);
        default: pos_ -= 2; error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    // One UTF-8 encoded character of the grammar text.
    const auto c = uint8_t(peek());
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > s_.size()) error("invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      const auto d = uint8_t(s_[pos_ + i]);
      if ((d >> 6) != 2) error("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (d & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error(fmt::format("expected {} hex digits", n));
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    if (v > 0x10FFFF) error(fmt::format("code point {:#x} is beyond Unicode", v));
    return v;
  }

  uint32_t integer() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > kMaxRepetition) error(fmt::format("repetition count above {}", kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) error("expected a number");
    return uint32_t(v);
  }

  Sequence sequence(bool nested, int depth) {
    Sequence seq;
    size_t last_start = SIZE_MAX;  // where the last symbol (what a repetition applies to) starts
    for (;;) {
      const char c = peek();
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        while (peek() != '"') {
          if (at_end()) error("unterminated literal");
          b_.literal_code_point(code_point(), seq);
        }
        ++pos_;
        if (last_start == seq.size()) last_start = SIZE_MAX;  // "" matches the empty string
      } else if (c == '[') {
        ++pos_;
        const bool negated = peek() == '^';
        if (negated) ++pos_;
        CodePointRanges ranges;
        while (peek() != ']') {
          if (at_end()) error("unterminated character class");
          const uint32_t lo = code_point();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
            ++pos_;
            hi = code_point();
            if (hi < lo) error("character range is reversed");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        last_start = seq.size();
        const CodePointRanges set = negated ? complement(ranges) : normalize(ranges);
        if (set.empty()) error("character class matches nothing");
        b_.code_points(set, seq);
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        b_.code_points({{0, 0x10FFFF}}, seq);
      } else if (word_char(c)) {
        last_start = seq.size();
        seq.push_back({Element::Rule, b_.symbol(name())});
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        const uint32_t g = b_.fresh(current_);
        b_.define(g, alternatives(true, depth + 1));
        if (peek() != ')') error("expected ')'");
        ++pos_;
        last_start = seq.size();
        seq.push_back({Element::Rule, g});
      } else if (c == '*' || c == '+' || c == '?') {
        if (last_start == SIZE_MAX) error(fmt::format("'{}' follows nothing", c));
        ++pos_;
        repeat(seq, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : UINT32_MAX);
      } else if (c == '{') {
        if (last_start == SIZE_MAX) error("'{' follows nothing");
        ++pos_;
        skip_space(nested);
        uint32_t lo = 0, hi = UINT32_MAX;
        if (peek() != ',') lo = integer();
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          if (peek() != '}') hi = integer();
        } else {
          hi = lo;
        }
        skip_space(nested);
        if (peek() != '}') error("expected '}' to close a repetition");
        ++pos_;
        if (hi < lo) error("repetition {m,n} with n < m");
        repeat(seq, last_start, lo, hi);
      } else if (c == '<' || c == '!') {
        error("token references (<...>, !) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  // Replaces seq[start..] (one symbol) by `lo` copies followed by up to hi - lo optional ones
  // (hi == UINT32_MAX: any number), as right-recursive helper rules.
  void repeat(Sequence& seq, size_t start, uint32_t lo, uint32_t hi) {
    const Sequence item(seq.begin() + long(start), seq.end());
    seq.resize(start);
    b_.charge(item.size() * (size_t(lo) + (hi == UINT32_MAX ? 1 : hi - lo)));
    for (uint32_t i = 0; i < lo; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (hi == UINT32_MAX) {
      const uint32_t star = b_.fresh(current_);  // star ::= item star |
      Sequence body = item;
      body.push_back({Element::Rule, star});
      b_.define(star, {body, {}});
      seq.push_back({Element::Rule, star});
    } else if (hi > lo) {
      uint32_t tail = UINT32_MAX;  // opt_k ::= item opt_{k-1} |
      for (uint32_t k = 0; k < hi - lo; ++k) {
        const uint32_t opt = b_.fresh(current_);
        Sequence body = item;
        if (tail != UINT32_MAX) body.push_back({Element::Rule, tail});
        b_.define(opt, {body, {}});
        tail = opt;
      }
      seq.push_back({Element::Rule, tail});
    }
  }

  std::string_view s_;
  GrammarBuilder& b_;
  size_t pos_ = 0;
  std::string current_ = "root";
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& root, GrammarLimits limits) {
  GrammarBuilder b(limits);
  Parser(text, b).parse();
  return b.finish(root);
}

}  // namespace loom::text::constrain
