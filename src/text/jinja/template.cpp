#include "text/jinja/template.h"

#include <fmt/format.h>

#include "text/jinja/evaluator.h"
#include "text/jinja/parser.h"

namespace loom::text::jinja {

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

static Value g_range(CallArgs& a) {
  if (!a.kwargs.empty()) throw_at(a.pos, "range() takes no keyword arguments");
  for (const Value& v : a.args)
    if (v.type != Type::Int && v.type != Type::Bool) throw_at(a.pos, "range() needs integers, not " + v.type_name());
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1) stop = a.args[0].as_int();
  else if (a.args.size() == 2 || a.args.size() == 3) {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  } else {
    throw_at(a.pos, "range() takes 1 to 3 arguments");
  }
  if (step == 0) throw_at(a.pos, "range() arg 3 must not be zero");
  List out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (out.size() >= 100000) throw_at(a.pos, "range too big; the sandbox allows 100000 items");  // jinja2 MAX_RANGE
    out.push_back(Value::integer(k));
  }
  return Value::list_of(std::move(out));
}

static Dict kwargs_dict(CallArgs& a, const char* fn) {
  Dict d;
  if (a.args.size() > 1) throw_at(a.pos, std::string(fn) + "() takes at most one positional argument");
  if (a.args.size() == 1) {
    if (!a.args[0].is_dict()) throw_at(a.pos, std::string(fn) + "() positional argument must be a mapping");
    d = *a.args[0].dict;
  }
  for (auto& [k, v] : a.kwargs) d.set(Value::string(k), v);
  return d;
}

std::map<std::string, Value> standard_globals(Clock clock) {
  std::map<std::string, Value> g;
  g["range"] = Value::function("range", g_range);
  g["dict"] = Value::function("dict", [](CallArgs& a) { return Value::dict_of(kwargs_dict(a, "dict")); });
  g["namespace"] = Value::function("namespace", [](CallArgs& a) { return Value::namespace_of(kwargs_dict(a, "namespace")); });
  g["raise_exception"] = Value::function("raise_exception", [](CallArgs& a) -> Value {
    throw RaisedError(a.pos, a.args.empty() ? std::string() : a.args[0].str());
  });
  g["strftime_now"] = Value::function("strftime_now", [clock](CallArgs& a) {
    if (a.args.size() != 1 || !a.args[0].is_string()) throw_at(a.pos, "strftime_now() takes one format string");
    std::tm tm = clock();
    char buf[512];
    size_t n = std::strftime(buf, sizeof buf, a.args[0].s.c_str(), &tm);
    if (n == 0 && !a.args[0].s.empty()) throw_at(a.pos, "strftime_now(): format produced nothing or too much");
    return Value::string(std::string(buf, n));
  });
  return g;
}

Template::Template(std::string_view source, LexOptions opts) : body_(parse(source, opts)) {}

std::string Template::render(const std::map<std::string, Value>& context,
                             const std::map<std::string, Value>& globals) const {
  Renderer r(globals);
  Scope top;
  for (auto& [k, v] : context) top.vars[k] = v;
  return r.render(body_, top);
}

std::string Template::render(const std::map<std::string, Value>& context) const {
  static const auto globals = standard_globals();
  return render(context, globals);
}

}  // namespace loom::text::jinja
