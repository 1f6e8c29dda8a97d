// Tokens of the `.loom` text form (docs/loom-language.md, "Lexical structure").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ir::text {

enum class Tok {
  ident,     // module, func, matmul, gguf.sha256, T, true
  value,     // %name        (text without the sigil)
  symbol,    // @name / @glob (text without the sigil)
  integer,   // 42, -3
  floating,  // 1e-05, 0.5, -2.0
  string,    // "..."        (text is the decoded contents)
  angle,     // <49152x576xq8_0> (text is what is between the brackets)
  punct,     // one of { } ( ) [ ] , = :
  arrow,     // ->
  eof,
};

struct Token {
  Tok kind = Tok::eof;
  std::string text;
  int line = 1, col = 1;
  int64_t i = 0;   // Tok::integer
  double f = 0.0;  // Tok::floating
  bool is(char c) const { return kind == Tok::punct && text.size() == 1 && text[0] == c; }
  bool is_ident(std::string_view s) const { return kind == Tok::ident && text == s; }
};

// How a token reads in an error message: `'{'`, `identifier 'foo'`, `%x`, `end of file`.
std::string describe(const Token& t);

// Splits the whole input; throws loom::Error "file:line:col: ..." at the first bad character,
// unterminated string or type, or number out of range.
std::vector<Token> lex(std::string_view src, std::string_view filename);

// Characters allowed in names after % and @ (globs add * and ?), and in bare identifiers.
bool is_name_char(char c);
bool is_ident_start(char c);

}  // namespace ir::text
