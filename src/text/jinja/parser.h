// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and
// operator precedence (filters and tests bind tighter than arithmetic; `a if c else b`
// lowest). Constructs outside the subset chat templates use fail with their name and
// line:column instead of being misread.
#pragma once
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace loom::text::jinja {

Body parse(std::string_view source, const LexOptions& opts = {});

}  // namespace loom::text::jinja
