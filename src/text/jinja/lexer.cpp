#include "text/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// jinja2 splits on \r\n, \r and \n, rejoins with \n and drops a single trailing newline
// (keep_trailing_newline=False).
std::string normalise_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out += src[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& o) : src_(normalise_newlines(source)), opts_(o) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    while (p_ < src_.size()) {
      size_t t = next_tag(p_);
      if (t == std::string::npos) {
        emit_text(src_.substr(p_), p_);
        break;
      }
      char kind = src_[t + 1];
      char sign = (t + 2 < src_.size() && (src_[t + 2] == '-' || src_[t + 2] == '+')) ? src_[t + 2] : 0;
      std::string text = strip_before(src_.substr(p_, t - p_), sign, kind != '{');
      emit_text(text, p_);
      size_t q = t + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        comment(t, q);
      } else if (size_t after; kind == '%' && raw_begin(q, &after)) {
        raw(t, after);
      } else {
        push(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, kind == '%' ? "{%" : "{{", t);
        inside_tag(t, q, kind == '%');
      }
    }
    push(Tok::Eof, "", src_.size());
    return std::move(out_);
  }

 private:
  std::string src_;
  LexOptions opts_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t p_ = 0;
  bool line_starting_ = true;  // the previous token ended with a newline (lstrip_blocks needs it)

  Pos pos_at(size_t off) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    size_t line = size_t(it - line_starts_.begin());
    return {int(line), int(off - line_starts_[line - 1] + 1)};
  }
  [[noreturn]] void fail_at(size_t off, const std::string& what) const { throw_at(pos_at(off), what); }

  void push(Tok kind, std::string text, size_t off) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = pos_at(off);
    out_.push_back(std::move(t));
  }
  void emit_text(const std::string& text, size_t off) {
    if (!text.empty()) push(Tok::Text, text, off);
  }

  size_t next_tag(size_t from) const {
    for (size_t k = from; k + 1 < src_.size(); ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return std::string::npos;
  }

  // `{%-` strips all whitespace before the tag; otherwise lstrip_blocks removes the spaces
  // and tabs between the line start and a block or comment tag that begins its line.
  std::string strip_before(std::string text, char sign, bool is_block) const {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_ws(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && opts_.lstrip_blocks && is_block) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        bool only_ws = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k) only_ws &= is_ws(text[k]);
        if (only_ws) text.resize(l_pos);
      }
    }
    return text;
  }

  // After a block or comment end: `-` eats all following whitespace, `+` nothing, plain
  // eats one newline when trim_blocks is on.
  void after_block_end(size_t end, char sign) {
    p_ = end;
    if (sign == '-') {
      while (p_ < src_.size() && is_ws(src_[p_])) ++p_;
    } else if (sign != '+' && opts_.trim_blocks && p_ < src_.size() && src_[p_] == '\n') {
      ++p_;
    }
    line_starting_ = p_ > 0 && src_[p_ - 1] == '\n';
  }

  void comment(size_t start, size_t q) {
    size_t e = src_.find("#}", q);
    if (e == std::string::npos) fail_at(start, "unterminated comment: missing '#}'");
    char sign = (e > q && (src_[e - 1] == '-' || src_[e - 1] == '+')) ? src_[e - 1] : 0;
    after_block_end(e + 2, sign);
  }

  bool raw_begin(size_t q, size_t* after) const {
    size_t k = q;
    while (k < src_.size() && is_ws(src_[k])) ++k;
    if (src_.compare(k, 3, "raw") != 0) return false;
    k += 3;
    while (k < src_.size() && is_ws(src_[k])) ++k;
    if (src_.compare(k, 3, "-%}") == 0) {
      k += 3;
      while (k < src_.size() && is_ws(src_[k])) ++k;
    } else if (src_.compare(k, 2, "%}") == 0) {
      k += 2;
    } else {
      return false;
    }
    *after = k;
    return true;
  }

  void raw(size_t start, size_t body) {
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (size_t k = body; k + 1 < src_.size(); ++k) {
      if (src_[k] != '{' || src_[k + 1] != '%') continue;
      size_t m = k + 2;
      char sign = (m < src_.size() && (src_[m] == '-' || src_[m] == '+')) ? src_[m++] : 0;
      while (m < src_.size() && is_ws(src_[m])) ++m;
      if (src_.compare(m, 6, "endraw") != 0) continue;
      m += 6;
      while (m < src_.size() && is_ws(src_[m])) ++m;
      char end_sign = 0;
      if (m < src_.size() && (src_[m] == '-' || src_[m] == '+')) end_sign = src_[m++];
      if (src_.compare(m, 2, "%}") != 0) continue;
      emit_text(strip_before(src_.substr(body, k - body), sign, true), body);
      after_block_end(m + 2, end_sign);
      return;
    }
    fail_at(start, "unterminated raw block: missing '{% endraw %}'");
  }

  void inside_tag(size_t start, size_t k, bool block) {
    std::vector<char> balance;
    while (true) {
      while (k < src_.size() && is_ws(src_[k])) ++k;
      if (k >= src_.size()) fail_at(start, block ? "unterminated block tag: missing '%}'" : "unterminated expression: missing '}}'");
      if (balance.empty()) {
        const char* end = block ? "%}" : "}}";
        if (src_.compare(k, 2, end) == 0) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, end, k);
          if (block) after_block_end(k + 2, 0);
          else { p_ = k + 2; line_starting_ = false; }
          return;
        }
        if ((src_[k] == '-' || (block && src_[k] == '+')) && src_.compare(k + 1, 2, end) == 0) {
          push(block ? Tok::BlockEnd : Tok::VarEnd, end, k);
          if (block) {
            after_block_end(k + 3, src_[k]);
          } else {
            p_ = k + 3;
            if (src_[k] == '-')
              while (p_ < src_.size() && is_ws(src_[p_])) ++p_;
            line_starting_ = src_[p_ - 1] == '\n';
          }
          return;
        }
      }
      k = token(k, balance);
    }
  }

  size_t token(size_t k, std::vector<char>& balance) {
    char c = src_[k];
    if (is_name_start(c)) {
      size_t e = k;
      while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
      push(Tok::Name, src_.substr(k, e - k), k);
      return e;
    }
    if (is_digit(c)) return number(k);
    if (c == '\'' || c == '"') return string_literal(k);
    static const char* two[] = {"**", "//", "==", "!=", ">=", "<="};
    for (const char* op : two)
      if (src_.compare(k, 2, op) == 0) {
        push(Tok::Op, op, k);
        return k + 2;
      }
    if (std::string_view("+-/*%~[](){}|,.:;=<>").find(c) == std::string_view::npos)
      fail_at(k, fmt::format("unexpected character '{}'", c));
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) fail_at(k, fmt::format("unexpected '{}'", c));
      balance.pop_back();
    }
    push(Tok::Op, std::string(1, c), k);
    return k + 1;
  }

  size_t digits(size_t k) const {  // \d+(_\d+)*
    while (k < src_.size() && (is_digit(src_[k]) || (src_[k] == '_' && k + 1 < src_.size() && is_digit(src_[k + 1])))) ++k;
    return k;
  }

  size_t number(size_t k) {
    size_t e = digits(k);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t m = e + 1;
      if (m < src_.size() && (src_[m] == '+' || src_[m] == '-')) ++m;
      if (m < src_.size() && is_digit(src_[m])) {
        e = digits(m);
        is_float = true;
      }
    }
    std::string text;
    for (size_t m = k; m < e; ++m)
      if (src_[m] != '_') text += src_[m];
    push(is_float ? Tok::Float : Tok::Int, text, k);
    if (is_float) out_.back().fval = std::strtod(text.c_str(), nullptr);
    else {
      errno = 0;
      out_.back().ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail_at(k, "integer literal out of the 64-bit range");
    }
    return e;
  }

  // Python string escapes, as jinja2 applies them (unicode-escape); unknown escapes stay.
  size_t string_literal(size_t k) {
    char q = src_[k];
    std::string val;
    size_t m = k + 1;
    auto hex = [&](size_t at, int n) -> uint32_t {
      if (at + n > src_.size()) fail_at(at, "truncated escape in string literal");
      uint32_t v = 0;
      for (int d = 0; d < n; ++d) {
        char h = src_[at + d];
        int x = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (x < 0) fail_at(at, "bad hex escape in string literal");
        v = v * 16 + uint32_t(x);
      }
      return v;
    };
    while (true) {
      if (m >= src_.size()) fail_at(k, "unterminated string literal");
      char c = src_[m];
      if (c == q) break;
      if (c != '\\') { val += c; ++m; continue; }
      if (m + 1 >= src_.size()) fail_at(k, "unterminated string literal");
      char e = src_[m + 1];
      m += 2;
      switch (e) {
        case '\n': break;
        case '\\': val += '\\'; break;
        case '\'': val += '\''; break;
        case '"': val += '"'; break;
        case 'a': val += '\a'; break;
        case 'b': val += '\b'; break;
        case 'f': val += '\f'; break;
        case 'n': val += '\n'; break;
        case 'r': val += '\r'; break;
        case 't': val += '\t'; break;
        case 'v': val += '\v'; break;
        case 'x': utf8_append(val, hex(m, 2)); m += 2; break;
        case 'u': utf8_append(val, hex(m, 4)); m += 4; break;
        case 'U': utf8_append(val, hex(m, 8)); m += 8; break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = uint32_t(e - '0');
            for (int d = 0; d < 2 && m < src_.size() && src_[m] >= '0' && src_[m] <= '7'; ++d) v = v * 8 + uint32_t(src_[m++] - '0');
            utf8_append(val, v);
          } else if (e == 'N') {
            fail_at(m - 2, "unsupported: \\N{...} escapes in string literals");
          } else {
            val += '\\';
            val += e;
          }
      }
    }
    push(Tok::String, val, k);
    return m + 1;
  }

};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opts) { return Lexer(source, opts).run(); }

}  // namespace loom::text::jinja
