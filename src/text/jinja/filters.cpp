// Filters on single values: strings, numbers, defaults, JSON. The sequence filters
// (map, select, sort, join, …) are in filters_seq.cpp.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>

#include "text/jinja/evaluator.h"
#include "text/jinja/json.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {

void register_sequence_filters(std::unordered_map<std::string, FilterFn>& t);

namespace {

// Filters that go through soft_str keep a Markup a Markup.
Value keep_markup(const Value& from, Value out) {
  out.markup = from.is_string() && from.markup;
  return out;
}

Value f_safe(Renderer&, const Value& v, CallArgs&) { return Value::markup_string(v.str()); }
Value f_string(Renderer&, const Value& v, CallArgs&) { return keep_markup(v, Value::string(v.str())); }
Value f_lower(Renderer&, const Value& v, CallArgs&) { return keep_markup(v, Value::string(str_lower(v.str()))); }
Value f_upper(Renderer&, const Value& v, CallArgs&) { return keep_markup(v, Value::string(str_upper(v.str()))); }

Value f_capitalize(Renderer&, const Value& v, CallArgs&) {
  auto cps = utf8_decode(v.str());
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) utf8_append(out, k == 0 ? to_upper_cp(cps[k]) : to_lower_cp(cps[k]));
  return keep_markup(v, Value::string(std::move(out)));
}

// jinja2's title splits before runs of whitespace, '-', '(', '{', '[' and '<' and
// capitalises each piece: not the same as Python's str.title().
Value f_title(Renderer&, const Value& v, CallArgs&) {
  auto is_sep = [](uint32_t c) { return is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  auto cps = utf8_decode(v.str());
  std::string out;
  bool at_start = true;
  for (uint32_t c : cps) {
    if (is_sep(c)) {
      utf8_append(out, c);
      at_start = true;
    } else {
      utf8_append(out, at_start ? to_upper_cp(c) : to_lower_cp(c));
      at_start = false;
    }
  }
  return Value::string(std::move(out));
}

Value f_trim(Renderer& r, const Value& v, CallArgs& a) {
  a.check("trim", 1, {"chars"});
  Value s = keep_markup(v, Value::string(v.str()));
  CallArgs m{{}, {}, a.pos};
  if (const Value* c = a.get(0, "chars")) m.args.push_back(*c);
  return r.call(find_method(s, "strip", a.pos), m, a.pos);
}

Value f_replace(Renderer& r, const Value& v, CallArgs& a) {
  a.check("replace", 3, {"old", "new", "count"});
  Value s = Value::string(v.str());
  CallArgs m{{a.get_or(0, "old", Value()), a.get_or(1, "new", Value())}, {}, a.pos};
  Value count = a.get_or(2, "count", Value::none());
  if (!count.is_none()) m.args.push_back(count);
  for (Value& x : m.args) x = Value::string(x.str());
  return r.call(find_method(s, "replace", a.pos), m, a.pos);
}

Value f_default(Renderer&, const Value& v, CallArgs& a) {
  a.check("default", 2, {"default_value", "boolean"});
  Value def = a.get_or(0, "default_value", Value::string(""));
  bool boolean = a.get_or(1, "boolean", Value::boolean(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return def;
  return v;
}

Value f_length(Renderer&, const Value& v, CallArgs& a) {
  switch (v.type) {
    case Type::Undefined: return Value::integer(0);
    case Type::String: return Value::integer(int64_t(utf8_length(v.s)));
    case Type::List: return Value::integer(int64_t(v.list->size()));
    case Type::Dict: return Value::integer(int64_t(v.dict->size()));
    default: throw_at(a.pos, "object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_abs(Renderer&, const Value& v, CallArgs& a) {
  if (v.type == Type::Float) return Value::number(std::fabs(v.f));
  if (v.type == Type::Int || v.type == Type::Bool) return Value::integer(std::llabs(v.as_int()));
  throw_at(a.pos, "bad operand type for abs(): '" + v.type_name() + "'");
}

// Python int() of a string: optional sign, digits with single underscores, surrounding space.
bool parse_py_int(const std::string& s, int64_t base, int64_t* out) {
  size_t b = 0, e = s.size();
  while (b < e && is_py_space(uint8_t(s[b]))) ++b;
  while (e > b && is_py_space(uint8_t(s[e - 1]))) --e;
  std::string t;
  for (size_t k = b; k < e; ++k) {
    if (s[k] == '_') {
      if (k == b || k + 1 == e || s[k + 1] == '_') return false;
      continue;
    }
    t += s[k];
  }
  if (t.empty() || base != 10) return false;
  size_t k = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (k == t.size()) return false;
  for (size_t m = k; m < t.size(); ++m)
    if (t[m] < '0' || t[m] > '9') return false;
  errno = 0;
  *out = std::strtoll(t.c_str(), nullptr, 10);
  return errno != ERANGE;
}

bool parse_py_float(const std::string& s, double* out) {
  size_t b = 0, e = s.size();
  while (b < e && is_py_space(uint8_t(s[b]))) ++b;
  while (e > b && is_py_space(uint8_t(s[e - 1]))) --e;
  std::string t = s.substr(b, e - b);
  if (t.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

Value f_int(Renderer&, const Value& v, CallArgs& a) {
  a.check("int", 2, {"default", "base"});
  Value def = a.get_or(0, "default", Value::integer(0));
  int64_t base = a.get_or(1, "base", Value::integer(10)).as_int();
  switch (v.type) {
    case Type::Int: case Type::Bool: return Value::integer(v.as_int());
    case Type::Float:
      if (std::isfinite(v.f)) return Value::integer(int64_t(v.f));
      return def;
    case Type::String: {
      int64_t i;
      if (parse_py_int(v.s, base, &i)) return Value::integer(i);
      double d;
      if (parse_py_float(v.s, &d) && std::isfinite(d)) return Value::integer(int64_t(d));
      return def;
    }
    default: return def;
  }
}

Value f_float(Renderer&, const Value& v, CallArgs& a) {
  a.check("float", 1, {"default"});
  Value def = a.get_or(0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_py_float(v.s, &d)) return Value::number(d);
  return def;
}

Value f_round(Renderer&, const Value& v, CallArgs& a) {
  a.check("round", 2, {"precision", "method"});
  int64_t prec = a.get_or(0, "precision", Value::integer(0)).as_int();
  std::string method = a.get_or(1, "method", Value::string("common")).str();
  if (!v.is_number()) throw_at(a.pos, "round needs a number, not " + v.type_name());
  double scale = std::pow(10.0, double(prec));
  double x = v.as_double() * scale;
  if (method == "common") {
    // Python's round(): halves to even; an int with precision >= 0 stays an int.
    if (v.type != Type::Float && prec >= 0) return Value::integer(v.as_int());
    return Value::number(std::nearbyint(x) / scale);
  }
  if (method == "ceil") return Value::number(std::ceil(x) / scale);
  if (method == "floor") return Value::number(std::floor(x) / scale);
  throw_at(a.pos, "method must be common, ceil or floor");
}

// jinja2's indent: every line after the first (and the first if first=True) gets the
// prefix; blank lines only if blank=True.
Value f_indent(Renderer&, const Value& v, CallArgs& a) {
  a.check("indent", 3, {"width", "first", "blank"});
  Value w = a.get_or(0, "width", Value::integer(4));
  std::string ind = w.is_string() ? w.s : std::string(size_t(std::max<int64_t>(0, w.as_int())), ' ');
  bool first = a.get_or(1, "first", Value::boolean(false)).truthy();
  bool blank = a.get_or(2, "blank", Value::boolean(false)).truthy();
  std::string s = v.str() + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n' || s[k] == '\r' || s[k] == '\v' || s[k] == '\f' || (s[k] >= 0x1c && s[k] <= 0x1e)) {
      lines.push_back(s.substr(start, k - start));
      if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
      start = k + 1;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  std::string rv;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k == 0) { rv = lines[0]; continue; }
    rv += "\n";
    if (blank || !lines[k].empty()) rv += ind;
    rv += lines[k];
  }
  if (first) rv = ind + rv;
  return Value::string(std::move(rv));
}

Value f_wordcount(Renderer&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (uint32_t c : utf8_decode(v.str())) {
    bool w = is_alpha_cp(c) || (c >= '0' && c <= '9') || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

// escape leaves a Markup alone; forceescape escapes it again.
Value f_escape(Renderer&, const Value& v, CallArgs&) {
  if (v.is_string() && v.markup) return v;
  return Value::markup_string(html_escape(v.str()));
}
Value f_forceescape(Renderer&, const Value& v, CallArgs&) { return Value::markup_string(html_escape(v.str())); }

// HF's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Renderer&, const Value& v, CallArgs& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  st.ensure_ascii = a.get_or(0, "ensure_ascii", Value::boolean(false)).truthy();
  Value ind = a.get_or(1, "indent", Value::none());
  if (ind.is_string()) st.indent = ind.s;
  else if (ind.type == Type::Int) st.indent = std::string(size_t(std::max<int64_t>(0, ind.i)), ' ');
  else if (!ind.is_none()) throw_at(a.pos, "tojson indent must be an int or a string");
  Value sep = a.get_or(2, "separators", Value::none());
  if (sep.is_list() && sep.list->size() == 2) st.separators = std::make_pair((*sep.list)[0].str(), (*sep.list)[1].str());
  else if (!sep.is_none()) throw_at(a.pos, "tojson separators must be a pair of strings");
  st.sort_keys = a.get_or(3, "sort_keys", Value::boolean(false)).truthy();
  return Value::string(to_json(v, st, a.pos));
}

Value f_attr(Renderer& r, const Value& v, CallArgs& a) {
  if (a.args.size() != 1 || !a.args[0].is_string()) throw_at(a.pos, "attr needs one attribute name");
  return r.get_attr(v, a.args[0].s, a.pos);
}

// printf-style "%s" formatting for the format filter: %s, %d, %i, %r and %%.
Value f_format(Renderer&, const Value& v, CallArgs& a) {
  std::string f = v.str(), out;
  size_t next = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    if (f[k] != '%') { out += f[k]; continue; }
    if (++k >= f.size()) throw_at(a.pos, "format: incomplete format");
    char c = f[k];
    if (c == '%') { out += '%'; continue; }
    if (c != 's' && c != 'd' && c != 'i' && c != 'r') throw_at(a.pos, std::string("unsupported: format conversion %") + c);
    if (next >= a.args.size()) throw_at(a.pos, "format: not enough arguments for format string");
    const Value& x = a.args[next++];
    if (c == 's') out += x.str();
    else if (c == 'r') out += x.repr();
    else if (x.is_number()) out += std::to_string(x.type == Type::Float ? int64_t(x.f) : x.as_int());
    else throw_at(a.pos, "format: %d format: a real number is required, not " + x.type_name());
  }
  return Value::string(std::move(out));
}

}  // namespace

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const std::unordered_map<std::string, FilterFn> t = [] {
    std::unordered_map<std::string, FilterFn> m = {
        {"safe", f_safe}, {"string", f_string}, {"lower", f_lower}, {"upper", f_upper},
        {"capitalize", f_capitalize}, {"title", f_title}, {"trim", f_trim}, {"replace", f_replace},
        {"default", f_default}, {"d", f_default}, {"length", f_length}, {"count", f_length},
        {"abs", f_abs}, {"int", f_int}, {"float", f_float}, {"round", f_round}, {"indent", f_indent},
        {"wordcount", f_wordcount}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_forceescape},
        {"tojson", f_tojson}, {"attr", f_attr}, {"format", f_format},
    };
    register_sequence_filters(m);
    return m;
  }();
  return t;
}

}  // namespace loom::text::jinja
