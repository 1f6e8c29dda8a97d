#include "text/constrain/regex.h"

#include <fmt/format.h>

#include "common/error.h"
#include "text/constrain/grammar.h"

namespace loom::text::constrain {

namespace {

constexpr uint32_t kMaxCount = 1000;
constexpr int kMaxDepth = 64;

// A code point as a GBNF character (inside a class or a literal).
std::string gbnf_char(uint32_t cp) {
  if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\' && cp != '[' && cp != ']' && cp != '-' && cp != '^')
    return std::string(1, char(cp));
  if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

std::string gbnf_class(const CodePointRanges& r) {
  std::string out = "[";
  for (auto [lo, hi] : r) {
    out += gbnf_char(lo);
    if (hi != lo) out += "-" + gbnf_char(hi);
  }
  return out + "]";
}

class RegexParser {
 public:
  RegexParser(std::string_view re, RegexTarget t) : s_(re), target_(t) {}

  std::string parse() {
    if (!s_.empty() && s_.front() == '^') s_.remove_prefix(1);
    if (!s_.empty() && s_.back() == '$' && (s_.size() < 2 || s_[s_.size() - 2] != '\\')) s_.remove_suffix(1);
    std::string e = alternation(0);
    if (pos_ < s_.size()) error(fmt::format("unexpected '{}'", s_[pos_]));
    return e.empty() ? "\"\"" : e;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    loom::fail("regular expression, offset {}: {}", pos_, what);
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    loom::fail("regular expression, offset {}: {} is not supported", pos_, what);
  }
  bool more() const { return pos_ < s_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  std::string alternation(int depth) {
    if (depth > kMaxDepth) error(fmt::format("groups nest deeper than {}", kMaxDepth));
    std::string out = sequence(depth);
    bool alt = false;
    while (peek() == '|') {
      ++pos_;
      std::string next = sequence(depth);
      out = (out.empty() ? "\"\"" : out) + " | " + (next.empty() ? "\"\"" : next);
      alt = true;
    }
    return alt ? "(" + out + ")" : out;
  }

  std::string sequence(int depth) {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      std::string a = atom(depth);
      a += quantifier();
      if (!out.empty()) out += " ";
      out += a;
    }
    return out;
  }

  bool read_count(uint32_t& v) {
    const size_t start = pos_;
    uint64_t x = 0;
    while (peek() >= '0' && peek() <= '9') {
      x = x * 10 + uint64_t(peek() - '0');
      if (x > kMaxCount) error(fmt::format("repetition count above {}", kMaxCount));
      ++pos_;
    }
    v = uint32_t(x);
    return pos_ > start;
  }

  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{') {
      const size_t save = pos_;
      ++pos_;
      uint32_t lo = 0, hi = 0;
      const bool has_lo = read_count(lo);
      if (peek() == ',') {
        ++pos_;
        const bool has_hi = read_count(hi);
        if (peek() != '}' || (!has_lo && !has_hi)) {  // not a quantifier: Python reads '{' literally
          pos_ = save;
          return "";
        }
        ++pos_;
        if (has_hi && hi < lo) error("repetition {m,n} with n < m");
        q = has_hi ? fmt::format("{{{},{}}}", lo, hi) : fmt::format("{{{},}}", lo);
      } else {
        if (peek() != '}' || !has_lo) {
          pos_ = save;
          return "";
        }
        ++pos_;
        q = fmt::format("{{{}}}", lo);
      }
    } else {
      return "";
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings
    else if (peek() == '+') unsupported("a possessive quantifier");
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
      if (!(peek() == '{' && !(peek(1) >= '0' && peek(1) <= '9'))) error("a quantifier follows a quantifier");
    return q;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char c = peek();
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error(fmt::format("expected {} hex digits", n));
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    return v;
  }

  uint32_t utf8_char() {
    const auto c = uint8_t(peek());
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > s_.size()) error("invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (uint8_t(s_[pos_ + size_t(i)]) & 0x3F);
    pos_ += size_t(len);
    return cp;
  }

  // After a backslash: a class shorthand (into `set`, true) or one code point (into cp).
  bool escape(CodePointRanges& set, uint32_t& cp, bool& ascii_only) {
    const char e = peek();
    ++pos_;
    static const CodePointRanges digit{{'0', '9'}}, word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
        space{{'\t', '\r'}, {' ', ' '}};
    auto negate_ascii = [&](const CodePointRanges& r) {  // within ASCII: see regex.h
      ascii_only = true;
      CodePointRanges c = complement(r), out;
      for (auto [lo, hi] : c)
        if (lo < 0x80) out.push_back({lo, std::min<uint32_t>(hi, 0x7F)});
      return out;
    };
    switch (e) {
      case 'd': set = digit; return true;
      case 'w': set = word; return true;
      case 's': set = space; return true;
      case 'D': set = negate_ascii(digit); return true;
      case 'W': set = negate_ascii(word); return true;
      case 'S': set = negate_ascii(space); return true;
      case 'n': cp = '\n'; return false;
      case 't': cp = '\t'; return false;
      case 'r': cp = '\r'; return false;
      case 'f': cp = '\f'; return false;
      case 'v': cp = '\v'; return false;
      case '0': cp = 0; return false;
      case 'x': cp = hex(2); return false;
      case 'u': cp = hex(4); return false;
      case 'b': case 'B': --pos_; unsupported("a word boundary (\\b, \\B)");
      case 'A': case 'Z': case 'z': --pos_; unsupported("an anchor escape (\\A, \\Z)");
      case 'p': case 'P': --pos_; unsupported("a Unicode property (\\p, \\P)");
      case 'k': --pos_; unsupported("a named backreference (\\k)");
      case '\0': error("a pattern cannot end with a backslash");
      default:
        if (e >= '1' && e <= '9') {
          --pos_;
          unsupported("a backreference");
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          --pos_;
          unsupported(fmt::format("the escape '\\{}'", e));
        }
        --pos_;
        cp = utf8_char();
        return false;
    }
  }

  // One character set as a GBNF element, restricted for a JSON string (see RegexTarget).
  std::string set_element(const CodePointRanges& in) {
    const CodePointRanges r = normalize(in);
    if (target_ == RegexTarget::raw) {
      if (r.empty()) error("a character class matches nothing");
      return gbnf_class(r);
    }
    auto has = [&](uint32_t c) {
      for (auto [lo, hi] : r)
        if (c >= lo && c <= hi) return true;
      return false;
    };
    CodePointRanges safe = normalize(r), unsafe{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    CodePointRanges allowed;
    for (auto [lo, hi] : safe)  // safe minus unsafe
      for (auto [clo, chi] : complement(unsafe)) {
        const uint32_t a = std::max(lo, clo), b = std::min(hi, chi);
        if (a <= b) allowed.push_back({a, b});
      }
    std::vector<std::string> alts;
    if (!allowed.empty()) alts.push_back(gbnf_class(normalize(allowed)));
    for (auto [c, esc] : {std::pair<uint32_t, const char*>{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""},
                          {'\n', "\"\\\\n\""}, {'\t', "\"\\\\t\""}, {'\r', "\"\\\\r\""}})
      if (has(c)) alts.push_back(esc);
    if (alts.empty()) error("a character class matches no character a JSON string can hold");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  std::string literal(uint32_t cp) {
    if (target_ == RegexTarget::json_string && (cp < 0x20 || cp == '"' || cp == '\\')) {
      switch (cp) {
        case '"': return "\"\\\\\\\"\"";
        case '\\': return "\"\\\\\\\\\"";
        case '\n': return "\"\\\\n\"";
        case '\t': return "\"\\\\t\"";
        case '\r': return "\"\\\\r\"";
        default: return fmt::format("\"\\\\u{:04x}\"", cp);
      }
    }
    return "\"" + gbnf_char(cp) + "\"";
  }

  std::string atom(int depth) {
    const char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == 'P' && peek(2) == '<') {
            pos_ += 3;
            while (more() && peek() != '>') ++pos_;
            ++pos_;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            pos_ += 2;
            while (more() && peek() != '>') ++pos_;
            ++pos_;
          } else if (peek(1) == '=' || peek(1) == '!' || (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!'))) {
            unsupported("lookaround ((?=, (?!, (?<=, (?<!)");
          } else if (peek(1) == 'P' && peek(2) == '=') {
            unsupported("a named backreference");
          } else {
            unsupported("an inline flag or group extension '(?'");
          }
        }
        std::string inner = alternation(depth + 1);
        if (peek() != ')') error("missing ')'");
        ++pos_;
        return "(" + (inner.empty() ? std::string("\"\"") : inner) + ")";
      }
      case '[': return char_class();
      case '.': {
        ++pos_;
        // Line terminators excluded: Python's `.` skips \n, ECMAScript's also \r, U+2028, U+2029;
        // the intersection keeps what is generated valid under both.
        return set_element(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      }
      case '\\': {
        ++pos_;
        CodePointRanges set;
        uint32_t cp = 0;
        bool ascii = false;
        return escape(set, cp, ascii) ? set_element(set) : literal(cp);
      }
      case '^': case '$': unsupported("an anchor inside the pattern");
      case '*': case '+': case '?': error(fmt::format("'{}' follows nothing", c));
      case '{': {
        const size_t save = pos_;
        if (!quantifier().empty()) {
          pos_ = save;
          error("a repetition follows nothing");
        }
        ++pos_;
        return literal('{');
      }
      default: return literal(utf8_char());
    }
  }

  std::string char_class() {
    ++pos_;  // [
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointRanges r;
    bool ascii_only = false, first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++pos_;
        CodePointRanges set;
        if (escape(set, lo, ascii_only)) {
          r.insert(r.end(), set.begin(), set.end());
          if (negated) ascii_only = true;  // Python's \d \w \s are Unicode-wide
          continue;
        }
      } else if (peek() == '[' && peek(1) == ':') {
        unsupported("a POSIX class ([:alpha:])");
      } else {
        lo = utf8_char();
      }
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          CodePointRanges set;
          bool dummy = false;
          if (escape(set, hi, dummy)) error("a class shorthand cannot end a range");
        } else {
          hi = utf8_char();
        }
        if (hi < lo) error("a character range is reversed");
      }
      r.push_back({lo, hi});
    }
    if (peek() != ']') error("missing ']'");
    ++pos_;
    CodePointRanges set = negated ? complement(r) : normalize(r);
    if (negated && ascii_only) {
      CodePointRanges a;
      for (auto [lo, hi] : set)
        if (lo < 0x80) a.push_back({lo, std::min<uint32_t>(hi, 0x7F)});
      set = a;
    }
    return set_element(set);
  }

  std::string_view s_;
  RegexTarget target_;
  size_t pos_ = 0;
};

}  // namespace

std::string regex_to_gbnf(std::string_view re, RegexTarget target) { return RegexParser(re, target).parse(); }

}  // namespace loom::text::constrain
