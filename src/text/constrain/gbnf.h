// GBNF, llama.cpp's grammar syntax, parsed into the byte grammar (grammar.h):
//   name ::= alternatives        rules; `root` is where matching starts
//   a b | c                      sequence, alternatives;  ( ... ) groups
//   "lit\n"  [a-z\x41^]  [^"]    literals, character classes (ranges, negation, escapes \x \u \U \t \r \n)
//   .                            any character
//   x*  x+  x?  x{m}  x{m,}  x{m,n}  repetition of the element before
//   # comment                    to the end of the line; a rule ends at a newline outside ( )
// Errors name the line and column. Token references (<...>, !) are refused by name.
#pragma once
#include <string_view>

#include "text/constrain/grammar.h"

namespace loom::text::constrain {

Grammar parse_gbnf(std::string_view text, const std::string& root = "root", GrammarLimits limits = {});

}  // namespace loom::text::constrain
