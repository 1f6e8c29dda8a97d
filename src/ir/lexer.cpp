#include "ir/lexer.h"

#include <charconv>
#include <cmath>

#include "common/error.h"

namespace ir::text {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view file) : src_(src), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col();
      if (pos_ >= src_.size()) {
        out.push_back(t);
        return out;
      }
      lex_one(t);
      out.push_back(std::move(t));
    }
  }

 private:
  int col() const { return int(pos_ - line_start_) + 1; }
  char peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }

  [[noreturn]] void fail_at(int line, int col, const std::string& msg) const {
    loom::fail("{}:{}:{}: {}", file_, line, col, msg);
  }

  void skip_space() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '/' && peek(1) == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  void lex_one(Token& t) {
    const char c = src_[pos_];
    if (c == '%' || c == '@') {
      ++pos_;
      const size_t b = pos_;
      while (pos_ < src_.size() && (is_name_char(src_[pos_]) || (c == '@' && (src_[pos_] == '*' || src_[pos_] == '?'))))
        ++pos_;
      if (pos_ == b) fail_at(t.line, t.col, fmt::format("expected a name after '{}', found {}", c, found_here()));
      t.kind = c == '%' ? Tok::value : Tok::symbol;
      t.text = std::string(src_.substr(b, pos_ - b));
    } else if (is_ident_start(c)) {
      const size_t b = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      t.kind = Tok::ident;
      t.text = std::string(src_.substr(b, pos_ - b));
    } else if (is_digit(c) || (c == '-' && is_digit(peek(1)))) {
      lex_number(t);
    } else if (c == '"') {
      lex_string(t);
    } else if (c == '<') {
      ++pos_;
      const size_t b = pos_;
      while (pos_ < src_.size() && src_[pos_] != '>' && src_[pos_] != '\n') ++pos_;
      if (pos_ >= src_.size() || src_[pos_] != '>') fail_at(t.line, t.col, "unterminated type: '<' without '>'");
      t.kind = Tok::angle;
      t.text = std::string(src_.substr(b, pos_ - b));
      ++pos_;
    } else if (c == '-' && peek(1) == '>') {
      pos_ += 2;
      t.kind = Tok::arrow;
      t.text = "->";
    } else if (std::string_view("{}()[],=:").find(c) != std::string_view::npos) {
      ++pos_;
      t.kind = Tok::punct;
      t.text = std::string(1, c);
    } else {
      fail_at(t.line, t.col, fmt::format("unexpected character {}", printable(c)));
    }
  }

  std::string found_here() const { return pos_ < src_.size() ? printable(src_[pos_]) : "end of file"; }

  // -?digits[.digits][e[+-]digits]; a '.' or exponent makes it a float.
  void lex_number(Token& t) {
    const size_t b = pos_;
    if (peek() == '-') ++pos_;
    while (is_digit(peek())) ++pos_;
    bool is_float = false;
    if (peek() == '.') {
      is_float = true;
      ++pos_;
      if (!is_digit(peek())) fail_at(t.line, t.col, "bad number: expected digits after '.'");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail_at(t.line, t.col, "bad number: expected digits in the exponent");
      while (is_digit(peek())) ++pos_;
    }
    const std::string_view s = src_.substr(b, pos_ - b);
    if (is_name_char(peek()))
      fail_at(t.line, t.col, fmt::format("bad number '{}{}'", s, peek()));
    t.text = std::string(s);
    const char* first = s.data();
    const char* last = s.data() + s.size();
    if (is_float) {
      t.kind = Tok::floating;
      auto r = std::from_chars(first, last, t.f);
      if (r.ec != std::errc() || r.ptr != last || !std::isfinite(t.f))
        fail_at(t.line, t.col, fmt::format("bad number '{}': out of range for a 64-bit float", s));
    } else {
      t.kind = Tok::integer;
      auto r = std::from_chars(first, last, t.i);
      if (r.ec != std::errc() || r.ptr != last)
        fail_at(t.line, t.col, fmt::format("bad number '{}': out of range for a 64-bit integer", s));
    }
  }

  int hex(char c) const {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Escapes: \" \\ \n \t \r \xHH. Raw control characters (a newline included) are refused so
  // that a missing quote is reported on its own line.
  void lex_string(Token& t) {
    ++pos_;
    t.kind = Tok::string;
    for (;;) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') fail_at(t.line, t.col, "unterminated string");
      const char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        return;
      }
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fail_at(line_, col(), fmt::format("{} in a string; write it as \\xHH", printable(c)));
      if (c != '\\') {
        t.text += c;
        ++pos_;
        continue;
      }
      const int ecol = col();
      const char e = peek(1);
      pos_ += 2;
      switch (e) {
        case '"': t.text += '"'; break;
        case '\\': t.text += '\\'; break;
        case 'n': t.text += '\n'; break;
        case 't': t.text += '\t'; break;
        case 'r': t.text += '\r'; break;
        case 'x': {
          const int h = hex(peek()), l = hex(peek(1));
          if (h < 0 || l < 0) fail_at(line_, ecol, "bad escape: \\x needs two hex digits");
          t.text += char(h * 16 + l);
          pos_ += 2;
          break;
        }
        default:
          if (e == '\n' || e == '\0') fail_at(t.line, t.col, "unterminated string");
          fail_at(line_, ecol, fmt::format("bad escape '\\{}' in a string", e));
      }
    }
  }

  std::string_view src_, file_;
  size_t pos_ = 0, line_start_ = 0;
  int line_ = 1;
};

}  // namespace

std::string describe(const Token& t) {
  auto clip = [](const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; };
  switch (t.kind) {
    case Tok::ident: return fmt::format("identifier '{}'", clip(t.text));
    case Tok::value: return fmt::format("'%{}'", clip(t.text));
    case Tok::symbol: return fmt::format("'@{}'", clip(t.text));
    case Tok::integer: case Tok::floating: return fmt::format("number {}", clip(t.text));
    case Tok::string: return fmt::format("string \"{}\"", clip(t.text));
    case Tok::angle: return fmt::format("'<{}>'", clip(t.text));
    case Tok::punct: case Tok::arrow: return fmt::format("'{}'", t.text);
    case Tok::eof: return "end of file";
  }
  return "?";
}

std::vector<Token> lex(std::string_view src, std::string_view filename) { return Lexer(src, filename).run(); }

}  // namespace ir::text
