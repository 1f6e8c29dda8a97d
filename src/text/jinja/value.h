// The value model of the Jinja interpreter: the Python objects chat templates touch (None,
// bool, int, float, str, list/tuple, dict with insertion order), plus jinja2's Undefined,
// callables (globals, bound methods, macros) and namespace(). Lists and dicts are shared by
// reference as in Python; only namespaces are ever mutated (the sandbox forbids the rest).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace loom::text::jinja {

// A position in the template source, 1-based.
struct Pos {
  int line = 0;
  int col = 0;
};

// Every template failure: syntax, type, undefined access, unsupported feature. The message
// starts with "line:col" so the template author can find it.
class TemplateError : public loom::Error {
 public:
  TemplateError(Pos pos, const std::string& what);
  Pos pos;
};

// raise_exception("…") in a template: the message is the template's own.
class RaisedError : public TemplateError {
 public:
  RaisedError(Pos pos, const std::string& message);
  std::string message;
};

[[noreturn]] void throw_at(Pos pos, const std::string& what);

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function, Namespace };

struct Value;
struct Dict;
struct CallArgs;
using List = std::vector<Value>;
using NativeFn = std::function<Value(CallArgs&)>;

struct Function {
  std::string name;
  NativeFn call;
};

struct Value {
  Type type = Type::Undefined;
  bool tuple = false;  // a List printed as (a, b): Python tuples from items() and (a, b) literals
  // A String that is a markupsafe.Markup (from |safe, |escape): `+` with it HTML-escapes the
  // plain str on the other side, and its strip/lower/upper/trim keep it Markup. Printing,
  // `~`, |join, |replace and |tojson see only the text, as jinja2 without autoescape does.
  bool markup = false;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String; for Undefined the name that was looked up (for error messages)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // Dict and Namespace
  std::shared_ptr<Function> fn;

  Value() = default;
  static Value undefined(std::string hint = "") { Value v; v.s = std::move(hint); return v; }
  static Value none() { Value v; v.type = Type::None; return v; }
  static Value boolean(bool x) { Value v; v.type = Type::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.type = Type::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.type = Type::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.type = Type::String; v.s = std::move(x); return v; }
  static Value markup_string(std::string x) { Value v = string(std::move(x)); v.markup = true; return v; }
  static Value list_of(List items, bool is_tuple = false);
  static Value dict_of(Dict d);
  static Value namespace_of(Dict d);
  static Value function(std::string name, NativeFn f);

  bool is_undefined() const { return type == Type::Undefined; }
  bool is_none() const { return type == Type::None; }
  bool is_string() const { return type == Type::String; }
  bool is_list() const { return type == Type::List; }
  bool is_dict() const { return type == Type::Dict; }
  bool is_number() const { return type == Type::Int || type == Type::Float || type == Type::Bool; }
  double as_double() const { return type == Type::Float ? f : type == Type::Bool ? double(b) : double(i); }
  int64_t as_int() const { return type == Type::Bool ? int64_t(b) : i; }

  bool truthy() const;
  // Python str(): what {{ x }} prints. Undefined prints as "".
  std::string str() const;
  // Python repr(): how items print inside a printed list or dict.
  std::string repr() const;
  std::string type_name() const;  // Python's name for the type, used in error messages
};

// A dict keeps insertion order, like Python's. Keys are Values (strings in practice);
// chat-template dicts are small, so lookup is a linear scan.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value v);
  size_t size() const { return items.size(); }
};

// Arguments of a call: positional, then keyword. `pos` is where the call is, for errors.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  Pos pos;
  // Parameter `index`/`name` of a Python signature: positional slot, else keyword, else def.
  const Value* get(size_t index, const std::string& name) const;
  Value get_or(size_t index, const std::string& name, Value def) const;
  // Rejects arguments beyond a signature of `max_pos` positional parameters named `names`.
  void check(const std::string& fn, size_t max_pos, std::initializer_list<const char*> names) const;
};

// Python ==, <, and formatting helpers shared by the filters and the evaluator.
bool equals(const Value& a, const Value& b);
// Python ordering for sort, min, max and <; throws TemplateError for unorderable types.
bool less_than(const Value& a, const Value& b, Pos pos);
std::string format_float(double d);       // Python repr(float)
std::string py_repr_string(const std::string& s);
std::string html_escape(const std::string& s);  // markupsafe.escape: & < > " '

}  // namespace loom::text::jinja
