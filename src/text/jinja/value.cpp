#include "text/jinja/value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "text/jinja/unicode.h"

namespace loom::text::jinja {

TemplateError::TemplateError(Pos p, const std::string& what)
    : loom::Error(fmt::format("template {}:{}: {}", p.line, p.col, what)), pos(p) {}

RaisedError::RaisedError(Pos p, const std::string& msg)
    : TemplateError(p, "raise_exception: " + msg), message(msg) {}

void throw_at(Pos pos, const std::string& what) { throw TemplateError(pos, what); }

Value Value::list_of(List items, bool is_tuple) {
  Value v;
  v.type = Type::List;
  v.tuple = is_tuple;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::dict_of(Dict d) {
  Value v;
  v.type = Type::Dict;
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::namespace_of(Dict d) {
  Value v = dict_of(std::move(d));
  v.type = Type::Namespace;
  return v;
}
Value Value::function(std::string name, NativeFn f) {
  Value v;
  v.type = Type::Function;
  v.fn = std::make_shared<Function>(Function{std::move(name), std::move(f)});
  return v;
}

bool Value::truthy() const {
  switch (type) {
    case Type::Undefined: case Type::None: return false;
    case Type::Bool: return b;
    case Type::Int: return i != 0;
    case Type::Float: return f != 0;
    case Type::String: return !s.empty();
    case Type::List: return !list->empty();
    case Type::Dict: return dict->size() > 0;
    default: return true;
  }
}

// Python's float repr: the shortest digits that round-trip, in fixed notation when the
// decimal exponent is in [-4, 16), else d.ddde±XX.
std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t k = 0; k < e; ++k) if (sci[k] != '.') digits += sci[k];
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) out += "0." + std::string(size_t(-exp - 1), '0') + digits;
    else if (size_t(exp) + 1 >= digits.size()) out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    else out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += exp < 0 ? "e-" : "e+";
  int ax = std::abs(exp);
  if (ax < 10) out += "0";
  out += std::to_string(ax);
  return out;
}

std::string py_repr_string(const std::string& s) {
  bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t cp : utf8_decode(s)) {
    if (cp == '\\') out += "\\\\";
    else if (cp == uint32_t(q)) { out += '\\'; out += q; }
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0xa0) || cp == 0xad)
      out += fmt::format("\\x{:02x}", cp);
    else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x200b && cp <= 0x200f) || cp == 0xfeff)
      out += fmt::format("\\u{:04x}", cp);
    else utf8_append(out, cp);
  }
  out += q;
  return out;
}

static std::string repr_items(const Value& v) {
  std::string out;
  if (v.type == Type::List) {
    out = v.tuple ? "(" : "[";
    for (size_t k = 0; k < v.list->size(); ++k) {
      if (k) out += ", ";
      out += (*v.list)[k].repr();
    }
    if (v.tuple && v.list->size() == 1) out += ",";
    out += v.tuple ? ")" : "]";
  } else {
    out = v.type == Type::Namespace ? "<Namespace {" : "{";
    bool first = true;
    for (auto& [k, x] : v.dict->items) {
      if (!first) out += ", ";
      first = false;
      out += k.repr() + ": " + x.repr();
    }
    out += v.type == Type::Namespace ? "}>" : "}";
  }
  return out;
}

std::string Value::str() const {
  switch (type) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return b ? "True" : "False";
    case Type::Int: return std::to_string(i);
    case Type::Float: return format_float(f);
    case Type::String: return s;
    case Type::List: case Type::Dict: case Type::Namespace: return repr_items(*this);
    case Type::Function: return "<function " + fn->name + ">";
  }
  return "";
}

std::string Value::repr() const {
  if (type == Type::String) return py_repr_string(s);
  if (type == Type::Undefined) return "Undefined";
  return str();
}

std::string Value::type_name() const {
  switch (type) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return tuple ? "tuple" : "list";
    case Type::Dict: return "dict";
    case Type::Function: return "function";
    case Type::Namespace: return "Namespace";
  }
  return "?";
}

const Value* Dict::find(const Value& key) const {
  for (auto& kv : items)
    if (equals(kv.first, key)) return &kv.second;
  return nullptr;
}
const Value* Dict::find(const std::string& key) const {
  for (auto& kv : items)
    if (kv.first.type == Type::String && kv.first.s == key) return &kv.second;
  return nullptr;
}
void Dict::set(const Value& key, Value v) {
  for (auto& kv : items)
    if (equals(kv.first, key)) { kv.second = std::move(v); return; }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t index, const std::string& name) const {
  if (index < args.size()) return &args[index];
  for (auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}
Value CallArgs::get_or(size_t index, const std::string& name, Value def) const {
  const Value* v = get(index, name);
  return v ? *v : def;
}
void CallArgs::check(const std::string& fn, size_t max_pos, std::initializer_list<const char*> names) const {
  if (args.size() > max_pos)
    throw_at(pos, fmt::format("{}() takes at most {} positional argument(s), {} given", fn, max_pos, args.size()));
  for (auto& [k, v] : kwargs) {
    bool known = false;
    for (const char* n : names) known |= k == n;
    if (!known) throw_at(pos, fmt::format("{}() got an unexpected keyword argument '{}'", fn, k));
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type == Type::Float || b.type == Type::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::Undefined: case Type::None: return true;
    case Type::String: return a.s == b.s;
    case Type::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Type::Dict:
      if (a.dict->size() != b.dict->size()) return false;
      for (auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    case Type::Namespace: case Type::Function: return a.dict == b.dict && a.fn == b.fn;
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b, Pos pos) {
  if (a.is_number() && b.is_number()) {
    if (a.type == Type::Float || b.type == Type::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.type == Type::String && b.type == Type::String) return a.s < b.s;  // UTF-8 order = code point order
  if (a.type == Type::List && b.type == Type::List) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      const Value &x = (*a.list)[k], &y = (*b.list)[k];
      if (!equals(x, y)) return less_than(x, y, pos);
    }
    return a.list->size() < b.list->size();
  }
  throw_at(pos, fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace loom::text::jinja
