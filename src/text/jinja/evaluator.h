// Runs a parsed template. Scoping follows jinja2: a for-loop iteration and a macro call get
// their own frame (a `set` inside a loop is gone after the iteration, hence namespace());
// if-blocks do not. Attribute access falls back to item access and vice versa, missing
// things are Undefined (printing as ""), and only using an Undefined in a way that needs a
// value (attribute, call, arithmetic) raises.
#pragma once
#include <map>
#include <string>
#include <unordered_map>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
  const Value* lookup(const std::string& name) const;
};

class Renderer;
using FilterFn = Value (*)(Renderer&, const Value& subject, CallArgs& args);
using TestFn = bool (*)(Renderer&, const Value& subject, CallArgs& args);
const std::unordered_map<std::string, FilterFn>& filter_table();
const std::unordered_map<std::string, TestFn>& test_table();

// The bound method `obj.name` for the str/dict/list methods templates call, or Undefined.
Value find_method(const Value& obj, const std::string& name, Pos pos);

class Renderer {
 public:
  explicit Renderer(const std::map<std::string, Value>& globals) : globals_(globals) {}

  std::string render(const Body& body, Scope& top);

  // Services the filters, tests and methods share with the evaluator.
  Value eval(const Expr& e, Scope& scope);
  Value get_attr(const Value& obj, const std::string& name, Pos pos);
  Value get_item(const Value& obj, const Value& key, Pos pos);
  Value attribute_path(const Value& obj, const std::string& path, Pos pos);  // "a.b.0"
  Value call(const Value& callee, CallArgs& args, Pos pos);
  Value apply_filter(const std::string& name, const Value& subject, CallArgs& args, Pos pos);
  bool apply_test(const std::string& name, const Value& subject, CallArgs& args, Pos pos);
  List iterate(const Value& v, Pos pos);  // for-loops and list-consuming filters
  bool contains(const Value& container, const Value& item, Pos pos);
  // Raises the error an Undefined carries when it is used as a value.
  [[noreturn]] void undefined_error(const Value& v, Pos pos);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, Scope& scope, std::string& out);
  Flow exec_for(const Stmt& s, Scope& scope, std::string& out);
  void exec_set(const Stmt& s, Scope& scope);
  Value make_macro(const Stmt& s, Scope& scope);
  Value binary(const Expr& e, const Value& a, const Value& b);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, Scope& scope);
  CallArgs eval_args(const Expr& e, Scope& scope);

  const std::map<std::string, Value>& globals_;
  int depth_ = 0;  // macro/call recursion guard
};

}  // namespace loom::text::jinja
