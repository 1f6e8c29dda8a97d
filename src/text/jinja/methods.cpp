// Python methods of str, dict and list that chat templates call (message.content.strip(),
// tools.items(), s.split('</think>')[-1] …). Mutating methods are refused, as jinja2's
// ImmutableSandboxedEnvironment refuses them.
#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/evaluator.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

const std::string& want_str(const Value& v, const char* what, Pos pos) {
  if (v.type != Type::String) throw_at(pos, fmt::format("{} must be str, not {}", what, v.type_name()));
  return v.s;
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = utf8_decode(s);
  std::vector<uint32_t> set;
  bool ws = !chars || chars->is_none();
  if (!ws) set = utf8_decode(chars->s);
  auto strip_me = [&](uint32_t c) { return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_me(cps[b])) ++b;
  if (right) while (e > b && strip_me(cps[e - 1])) --e;
  return utf8_encode(cps, b, e);
}

List split(const std::string& s, const Value* sep, int64_t maxsplit, Pos pos) {
  List out;
  if (!sep || sep->is_none()) {
    auto cps = utf8_decode(s);
    size_t k = 0, n = cps.size();
    while (true) {
      while (k < n && is_py_space(cps[k])) ++k;
      if (k >= n) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        size_t e = n;
        while (e > k && is_py_space(cps[e - 1])) --e;
        out.push_back(Value::string(utf8_encode(cps, k, e)));
        break;
      }
      size_t start = k;
      while (k < n && !is_py_space(cps[k])) ++k;
      out.push_back(Value::string(utf8_encode(cps, start, k)));
    }
    return out;
  }
  const std::string& d = want_str(*sep, "separator", pos);
  if (d.empty()) throw_at(pos, "empty separator");
  size_t start = 0;
  while (true) {
    size_t at = (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) ? std::string::npos : s.find(d, start);
    if (at == std::string::npos) {
      out.push_back(Value::string(s.substr(start)));
      return out;
    }
    out.push_back(Value::string(s.substr(start, at - start)));
    start = at + d.size();
  }
}

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (uint32_t c : utf8_decode(s)) {
    bool cased = is_cased_upper(c) || is_cased_lower(c);
    utf8_append(out, cased ? (prev_cased ? to_lower_cp(c) : to_upper_cp(c)) : c);
    prev_cased = cased;
  }
  return out;
}

// str.format with {} / {0} / {name} fields and no format specs.
std::string py_format(const std::string& fmtstr, CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmtstr.size(); ++k) {
    char c = fmtstr[k];
    if (c == '{' && k + 1 < fmtstr.size() && fmtstr[k + 1] == '{') { out += '{'; ++k; continue; }
    if (c == '}' && k + 1 < fmtstr.size() && fmtstr[k + 1] == '}') { out += '}'; ++k; continue; }
    if (c != '{') { out += c; continue; }
    size_t e = fmtstr.find('}', k);
    if (e == std::string::npos) throw_at(a.pos, "str.format: single '{' encountered");
    std::string field = fmtstr.substr(k + 1, e - k - 1);
    if (field.find_first_of(":!") != std::string::npos) throw_at(a.pos, "unsupported: format specs in str.format");
    const Value* v = nullptr;
    if (field.empty()) v = auto_index < a.args.size() ? &a.args[auto_index++] : nullptr;
    else if (field.find_first_not_of("0123456789") == std::string::npos) {
      size_t i = std::stoul(field);
      v = i < a.args.size() ? &a.args[i] : nullptr;
    } else {
      for (auto& [n, x] : a.kwargs)
        if (n == field) v = &x;
    }
    if (!v) throw_at(a.pos, "str.format: no argument for field '{" + field + "}'");
    out += v->str();
    k = e;
  }
  return out;
}

bool starts_or_ends(const std::string& s, const Value& arg, bool starts, Pos pos) {
  auto one = [&](const Value& p) {
    const std::string& x = want_str(p, starts ? "startswith arg" : "endswith arg", pos);
    if (x.size() > s.size()) return false;
    return starts ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.type == Type::List) {
    for (const Value& p : *arg.list)
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

int64_t count_sub(const std::string& s, const std::string& sub) {
  if (sub.empty()) return int64_t(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

int64_t cp_index(const std::string& s, size_t byte_at) {
  return byte_at == std::string::npos ? -1 : int64_t(utf8_length(std::string_view(s).substr(0, byte_at)));
}

Value string_method(const std::string& s, const std::string& name, CallArgs& a) {
  Pos pos = a.pos;
  auto arg = [&](size_t k, const char* n) { return a.get(k, n); };
  if (name == "strip") return Value::string(strip_chars(s, arg(0, "chars"), true, true));
  if (name == "lstrip") return Value::string(strip_chars(s, arg(0, "chars"), true, false));
  if (name == "rstrip") return Value::string(strip_chars(s, arg(0, "chars"), false, true));
  if (name == "split") return Value::list_of(split(s, arg(0, "sep"), a.get_or(1, "maxsplit", Value::integer(-1)).as_int(), pos));
  if (name == "rsplit") {
    const Value* maxs = arg(1, "maxsplit");
    if (maxs && maxs->as_int() >= 0) throw_at(pos, "unsupported: rsplit with maxsplit");
    return Value::list_of(split(s, arg(0, "sep"), -1, pos));
  }
  if (name == "splitlines") {
    List out;
    size_t start = 0;
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] == '\n' || s[k] == '\r') {
        out.push_back(Value::string(s.substr(start, k - start)));
        if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
        start = k + 1;
      }
    if (start < s.size()) out.push_back(Value::string(s.substr(start)));
    return Value::list_of(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    if (a.args.size() != 1) throw_at(pos, name + "() takes exactly one argument here");
    return Value::boolean(starts_or_ends(s, a.args[0], name == "startswith", pos));
  }
  if (name == "upper") return Value::string(str_upper(s));
  if (name == "lower") return Value::string(str_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") {
    auto cps = utf8_decode(s);
    std::string out;
    for (size_t k = 0; k < cps.size(); ++k) utf8_append(out, k == 0 ? to_upper_cp(cps[k]) : to_lower_cp(cps[k]));
    return Value::string(std::move(out));
  }
  if (name == "replace") {
    std::string from = want_str(a.get_or(0, "old", Value()), "replace() old", pos);
    std::string to = want_str(a.get_or(1, "new", Value()), "replace() new", pos);
    int64_t count = a.get_or(2, "count", Value::integer(-1)).as_int();
    std::string out;
    if (from.empty()) throw_at(pos, "unsupported: replace() with an empty pattern");
    size_t start = 0;
    for (int64_t n = 0; count < 0 || n < count; ++n) {
      size_t at = s.find(from, start);
      if (at == std::string::npos) break;
      out += s.substr(start, at - start) + to;
      start = at + from.size();
    }
    return Value::string(out + s.substr(start));
  }
  if (name == "find" || name == "index" || name == "rfind" || name == "rindex") {
    std::string sub = want_str(a.get_or(0, "sub", Value()), (name + "() argument").c_str(), pos);
    size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos && (name == "index" || name == "rindex")) throw_at(pos, "substring not found");
    return Value::integer(cp_index(s, at));
  }
  if (name == "count") return Value::integer(count_sub(s, want_str(a.get_or(0, "sub", Value()), "count() argument", pos)));
  if (name == "join") {
    std::string out;
    List items;
    if (a.args.size() != 1) throw_at(pos, "join() takes exactly one argument");
    const Value& it = a.args[0];
    if (it.type != Type::List && it.type != Type::String && it.type != Type::Dict)
      throw_at(pos, "can only join an iterable");
    size_t k = 0;
    auto add = [&](const Value& x) {
      if (k++) out += s;
      out += want_str(x, "sequence item", pos);
    };
    if (it.type == Type::List) for (const Value& x : *it.list) add(x);
    else if (it.type == Type::Dict) for (auto& kv : it.dict->items) add(kv.first);
    else for (uint32_t c : utf8_decode(it.s)) { std::string ch; utf8_append(ch, c); add(Value::string(ch)); }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(py_format(s, a));
  auto all_of = [&](auto pred) {
    auto cps = utf8_decode(s);
    return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), pred));
  };
  if (name == "isdigit") return all_of([](uint32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isspace") return all_of(is_py_space);
  if (name == "isalpha") return all_of(is_alpha_cp);
  if (name == "isalnum") return all_of([](uint32_t c) { return is_alpha_cp(c) || (c >= '0' && c <= '9'); });
  if (name == "isupper" || name == "islower") {
    bool any = false, ok = true;
    for (uint32_t c : utf8_decode(s)) {
      if (is_cased_upper(c)) { any = true; ok &= name == "isupper"; }
      else if (is_cased_lower(c)) { any = true; ok &= name == "islower"; }
    }
    return Value::boolean(any && ok);
  }
  throw_at(pos, "unsupported string method '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& a) {
  const Dict& d = *self.dict;
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::list_of({k, v}, true));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::list_of(std::move(out));
  }
  if (name == "get") {
    if (a.args.empty()) throw_at(a.pos, "get() takes at least 1 argument");
    const Value* v = d.find(a.args[0]);
    return v ? *v : a.args.size() > 1 ? a.args[1] : Value::none();
  }
  throw_at(a.pos, "unsupported dict method '" + name + "'");
}

Value list_method(const Value& self, const std::string& name, CallArgs& a) {
  if (a.args.size() != 1) throw_at(a.pos, name + "() takes exactly one argument");
  const List& l = *self.list;
  if (name == "count") return Value::integer(std::count_if(l.begin(), l.end(), [&](const Value& x) { return equals(x, a.args[0]); }));
  for (size_t k = 0; k < l.size(); ++k)
    if (equals(l[k], a.args[0])) return Value::integer(int64_t(k));
  throw_at(a.pos, a.args[0].repr() + " is not in list");
}

bool one_of(const std::string& n, std::initializer_list<const char*> names) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

// Markup's own methods: the case and strip ones escape their string arguments and return
// Markup; the ones returning lists of Markup or formatting are not modelled, so they fail
// loudly. The rest (find, startswith, ...) are plain str methods.
Value markup_aware_method(const Value& self, const std::string& name, CallArgs& a) {
  if (!self.markup) return string_method(self.s, name, a);
  if (one_of(name, {"split", "rsplit", "splitlines", "replace", "join", "format"}))
    throw_at(a.pos, "unsupported: str." + name + "() on a Markup (|safe or |escape) string");
  if (!one_of(name, {"strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize"}))
    return string_method(self.s, name, a);
  for (Value& v : a.args)
    if (v.is_string() && !v.markup) v = Value::markup_string(html_escape(v.s));
  for (auto& kv : a.kwargs)
    if (kv.second.is_string() && !kv.second.markup) kv.second = Value::markup_string(html_escape(kv.second.s));
  Value out = string_method(self.s, name, a);
  out.markup = true;
  return out;
}

}  // namespace

Value find_method(const Value& obj, const std::string& name, Pos pos) {
  Value self = obj;
  std::string label = obj.type_name() + "." + name;
  if (obj.type == Type::String &&
      one_of(name, {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper",
                    "lower", "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join",
                    "format", "isdigit", "isspace", "isalpha", "isalnum", "isupper", "islower"}))
    return Value::function(label, [self, name](CallArgs& a) { return markup_aware_method(self, name, a); });
  if (obj.type == Type::Dict && one_of(name, {"items", "keys", "values", "get"}))
    return Value::function(label, [self, name](CallArgs& a) { return dict_method(self, name, a); });
  if (obj.type == Type::List && one_of(name, {"index", "count"}))
    return Value::function(label, [self, name](CallArgs& a) { return list_method(self, name, a); });
  bool mutating = (obj.type == Type::Dict && one_of(name, {"pop", "popitem", "update", "setdefault", "clear"})) ||
                  (obj.type == Type::List && one_of(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}));
  if (mutating)
    return Value::function(label, [label](CallArgs& a) -> Value {
      throw_at(a.pos, "access to attribute '" + label + "' is unsafe (the template sandbox forbids mutation)");
    });
  (void)pos;
  return Value::undefined();
}

}  // namespace loom::text::jinja
