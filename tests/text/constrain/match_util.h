// What the constrain tests share: whole-string matching against a compiled grammar.
#pragma once
#include <memory>
#include <string>

#include "text/constrain/constraint.h"
#include "text/constrain/gbnf.h"
#include "text/constrain/matcher.h"

namespace loom::text::constrain::testing {

// true when `s` is a complete string of the grammar.
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.advance(s) && m.accepting();
}
// true when `s` can still be extended into a string of the grammar (or is one).
inline bool viable(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.advance(s);
}
inline std::shared_ptr<const Grammar> gbnf(const std::string& text) {
  return std::make_shared<const Grammar>(parse_gbnf(text));
}
inline std::shared_ptr<const Grammar> compiled(SourceKind k, const std::string& text) { return compile(k, text).grammar; }

}  // namespace loom::text::constrain::testing
