// Jinja tests (`x is defined`, `n is divisibleby 3`, `selectattr('type', 'equalto', 'f')`),
// with Python's type rules: bool counts as a number, Undefined is iterable.
#include "text/jinja/evaluator.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

const Value& arg0(CallArgs& a, const char* test) {
  if (a.args.empty()) throw_at(a.pos, std::string("test '") + test + "' needs an argument");
  return a.args[0];
}

bool int_like(const Value& v) { return v.type == Type::Int || v.type == Type::Bool; }

bool t_defined(Renderer&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Bool; }
bool t_true(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Bool && v.b; }
bool t_false(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Bool && !v.b; }
bool t_integer(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Int; }
bool t_float(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Float; }
bool t_number(Renderer&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Renderer&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Renderer&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(Renderer&, const Value& v, CallArgs&) { return v.type == Type::Function; }
bool t_iterable(Renderer&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Renderer&, const Value& v, CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); }
bool t_lower(Renderer&, const Value& v, CallArgs&) { return v.is_string() && str_lower(v.s) == v.s; }
bool t_upper(Renderer&, const Value& v, CallArgs&) { return v.is_string() && str_upper(v.s) == v.s; }
bool t_escaped(Renderer&, const Value& v, CallArgs&) { return v.is_string() && v.markup; }

bool t_odd(Renderer&, const Value& v, CallArgs& a) {
  if (!int_like(v)) throw_at(a.pos, "test 'odd' needs an integer, not " + v.type_name());
  return v.as_int() % 2 != 0;
}
bool t_even(Renderer&, const Value& v, CallArgs& a) {
  if (!int_like(v)) throw_at(a.pos, "test 'even' needs an integer, not " + v.type_name());
  return v.as_int() % 2 == 0;
}
bool t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
  const Value& n = arg0(a, "divisibleby");
  if (!int_like(v) || !int_like(n)) throw_at(a.pos, "test 'divisibleby' needs integers");
  if (n.as_int() == 0) throw_at(a.pos, "integer modulo by zero");
  int64_t r = v.as_int() % n.as_int();
  return r == 0;
}
bool t_eq(Renderer&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "eq")); }
bool t_ne(Renderer&, const Value& v, CallArgs& a) { return !equals(v, arg0(a, "ne")); }
bool t_lt(Renderer&, const Value& v, CallArgs& a) { return less_than(v, arg0(a, "lt"), a.pos); }
bool t_gt(Renderer&, const Value& v, CallArgs& a) { return less_than(arg0(a, "gt"), v, a.pos); }
bool t_le(Renderer&, const Value& v, CallArgs& a) { return !less_than(arg0(a, "le"), v, a.pos); }
bool t_ge(Renderer&, const Value& v, CallArgs& a) { return !less_than(v, arg0(a, "ge"), a.pos); }
bool t_in(Renderer& r, const Value& v, CallArgs& a) { return r.contains(arg0(a, "in"), v, a.pos); }
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
  const Value& o = arg0(a, "sameas");
  if (v.type != o.type) return false;
  switch (v.type) {
    case Type::None: case Type::Undefined: return true;
    case Type::Bool: return v.b == o.b;
    case Type::List: return v.list == o.list;
    case Type::Dict: case Type::Namespace: return v.dict == o.dict;
    default: return equals(v, o);  // small ints and interned strings are identical in CPython
  }
}
bool t_filter(Renderer&, const Value& v, CallArgs&) { return v.is_string() && filter_table().count(v.s); }
bool t_test(Renderer&, const Value& v, CallArgs&) { return v.is_string() && test_table().count(v.s); }

}  // namespace

const std::unordered_map<std::string, TestFn>& test_table() {
  static const std::unordered_map<std::string, TestFn> t = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float},
      {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"callable", t_callable},
      {"iterable", t_iterable}, {"sequence", t_sequence}, {"lower", t_lower}, {"upper", t_upper},
      {"escaped", t_escaped}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne},
      {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt},
      {"le", t_le}, {"<=", t_le}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in}, {"sameas", t_sameas},
      {"filter", t_filter}, {"test", t_test},
  };
  return t;
}

}  // namespace loom::text::jinja
