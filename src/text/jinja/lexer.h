// Splits a template into text and tag tokens the way jinja2's lexer does in Hugging Face's
// configuration (trim_blocks and lstrip_blocks on): newlines normalised to \n, one trailing
// newline dropped, `{%-`/`-%}` whitespace control, `{%+`/`+%}` opt-outs, comments removed,
// raw blocks passed through as text.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace loom::text::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok kind = Tok::Eof;
  std::string text;  // Text content, name, operator, or the unescaped string literal
  int64_t ival = 0;
  double fval = 0;
  Pos pos;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

std::vector<Token> tokenize(std::string_view source, const LexOptions& opts = {});

}  // namespace loom::text::jinja
