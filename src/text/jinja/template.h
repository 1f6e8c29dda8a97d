// A compiled Jinja template: parse once, render many times with different contexts.
// Rendering is byte-identical to jinja2 in Hugging Face's configuration (trim_blocks,
// lstrip_blocks, loopcontrols) for the subset chat templates use; anything outside that
// subset is a TemplateError naming the construct and its line:column.
#pragma once
#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

// The wall clock strftime_now() reads; tests pin it.
using Clock = std::function<std::tm()>;
std::tm local_now();

// jinja2's built-in globals (range, dict, namespace) plus HF's raise_exception and
// strftime_now.
std::map<std::string, Value> standard_globals(Clock clock = local_now);

class Template {
 public:
  explicit Template(std::string_view source, LexOptions opts = {});
  Template(Template&&) noexcept = default;
  Template& operator=(Template&&) noexcept = default;

  // Renders with `context` as the template's variables over `globals`.
  std::string render(const std::map<std::string, Value>& context,
                     const std::map<std::string, Value>& globals) const;
  std::string render(const std::map<std::string, Value>& context) const;

 private:
  Body body_;
};

}  // namespace loom::text::jinja
