// Regular expressions (Python `re` / ECMAScript syntax, the common subset) translated to a GBNF
// expression, so a regex constraint and a JSON Schema `pattern` run on the same matcher.
// The whole string must match (a leading ^ and trailing $ are accepted and implied): for a
// schema pattern, whose meaning is "somewhere in the string", a full match is a stricter,
// still valid, choice.
//
// Supported: literals, escapes (\n \t \r \f \v \xHH \uHHHH, escaped metacharacters), classes
// with ranges and negation, \d \w \s and their negations (the negations ASCII-only, so that
// every string generated matches under Unicode rules too), `.`, groups ((...), (?:...),
// (?P<name>...), (?<name>...)), alternation, * + ? {m} {m,} {m,n} (lazy forms mean the same
// set of strings). Refused by name: backreferences, lookaround, word boundaries, anchors in
// the middle, inline flags, Unicode properties, possessive quantifiers.
#pragma once
#include <string>
#include <string_view>

namespace loom::text::constrain {

enum class RegexTarget {
  raw,          // the string itself
  json_string,  // the inside of a JSON string literal: " and \ escaped, control characters
                // escaped (\n \t \r) or left out, everything else raw
};

// The GBNF expression (a rule's right-hand side) matching what `re` matches. Throws
// loom::Error naming the unsupported feature or the syntax error and its offset.
std::string regex_to_gbnf(std::string_view re, RegexTarget target = RegexTarget::raw);

}  // namespace loom::text::constrain
