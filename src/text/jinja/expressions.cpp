// Expressions: names, literals, attribute/item access with jinja2's fallbacks, slicing,
// calls, operators with Python semantics.
#include <fmt/format.h>

#include <cmath>

#include "text/jinja/evaluator.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {

static std::string object_desc(const Value& v) {
  return v.type == Type::Dict ? "dict object" : v.type_name() + " object";
}

void Renderer::undefined_error(const Value& v, Pos pos) {
  throw_at(pos, v.s.empty() ? std::string("value is undefined") : v.s);
}

Value Renderer::get_attr(const Value& obj, const std::string& name, Pos pos) {
  switch (obj.type) {
    case Type::Undefined: undefined_error(obj, pos);
    case Type::Namespace: {
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined("'Namespace' object has no attribute '" + name + "'");
    }
    case Type::Dict: {
      Value m = find_method(obj, name, pos);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict->find(name);
      if (v) return *v;
      break;
    }
    case Type::String: case Type::List: {
      Value m = find_method(obj, name, pos);
      if (!m.is_undefined()) return m;
      break;
    }
    default: break;
  }
  return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + name + "'");
}

static bool index_of(const Value& key, int64_t size, int64_t* out) {
  if (key.type != Type::Int && key.type != Type::Bool) return false;
  int64_t k = key.as_int();
  if (k < 0) k += size;
  if (k < 0 || k >= size) return false;
  *out = k;
  return true;
}

Value Renderer::get_item(const Value& obj, const Value& key, Pos pos) {
  switch (obj.type) {
    case Type::Undefined: undefined_error(obj, pos);
    case Type::Dict: {
      const Value* v = obj.dict->find(key);
      if (v) return *v;
      break;
    }
    case Type::List: {
      int64_t k;
      if (index_of(key, int64_t(obj.list->size()), &k)) return (*obj.list)[size_t(k)];
      break;
    }
    case Type::String: {
      auto cps = utf8_decode(obj.s);
      int64_t k;
      if (index_of(key, int64_t(cps.size()), &k)) return Value::string(utf8_encode(cps, size_t(k), size_t(k) + 1));
      break;
    }
    default: break;
  }
  if (key.type == Type::String) return get_attr(obj, key.s, pos);
  return Value::undefined("'" + object_desc(obj) + "' has no attribute " + key.repr());
}

Value Renderer::attribute_path(const Value& obj, const std::string& path, Pos pos) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part), pos);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Python slice semantics for start/stop/step, clamped to the sequence.
static std::vector<size_t> slice_indices(int64_t n, const Value* a, const Value* b, const Value* c, Pos pos) {
  int64_t step = c && !c->is_none() ? c->as_int() : 1;
  if (step == 0) throw_at(pos, "slice step cannot be zero");
  auto norm = [&](const Value* v, int64_t def, bool is_start) {
    if (!v || v->is_none()) return def;
    int64_t x = v->as_int();
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t start = norm(a, step > 0 ? 0 : n - 1, true);
  int64_t stop = norm(b, step > 0 ? n : -1, false);
  std::vector<size_t> idx;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) idx.push_back(size_t(k));
  return idx;
}

CallArgs Renderer::eval_args(const Expr& e, Scope& scope) {
  CallArgs a;
  a.pos = e.pos;
  for (const ExprPtr& x : e.args) a.args.push_back(eval(*x, scope));
  for (auto& [k, x] : e.kwargs) a.kwargs.emplace_back(k, eval(*x, scope));
  return a;
}

Value Renderer::call(const Value& callee, CallArgs& args, Pos pos) {
  if (callee.type == Type::Undefined) undefined_error(callee, pos);
  if (callee.type != Type::Function) throw_at(pos, "'" + callee.type_name() + "' object is not callable");
  args.pos = pos;
  return callee.fn->call(args);
}

Value Renderer::apply_filter(const std::string& name, const Value& subject, CallArgs& args, Pos pos) {
  auto& table = filter_table();
  auto it = table.find(name);
  if (it == table.end()) throw_at(pos, "unsupported filter '" + name + "'");
  args.pos = pos;
  return it->second(*this, subject, args);
}

bool Renderer::apply_test(const std::string& name, const Value& subject, CallArgs& args, Pos pos) {
  auto& table = test_table();
  auto it = table.find(name);
  if (it == table.end()) throw_at(pos, "unsupported test '" + name + "'");
  args.pos = pos;
  return it->second(*this, subject, args);
}

List Renderer::iterate(const Value& v, Pos pos) {
  switch (v.type) {
    case Type::Undefined: return {};
    case Type::List: return *v.list;
    case Type::Dict: {
      List keys;
      for (auto& kv : v.dict->items) keys.push_back(kv.first);
      return keys;
    }
    case Type::String: {
      List chars;
      auto cps = utf8_decode(v.s);
      for (size_t k = 0; k < cps.size(); ++k) chars.push_back(Value::string(utf8_encode(cps, k, k + 1)));
      return chars;
    }
    default: throw_at(pos, "'" + v.type_name() + "' object is not iterable");
  }
}

bool Renderer::contains(const Value& container, const Value& item, Pos pos) {
  switch (container.type) {
    case Type::Undefined: return false;
    case Type::String:
      if (item.type != Type::String)
        throw_at(pos, "'in <string>' requires string as left operand, not " + item.type_name());
      return container.s.find(item.s) != std::string::npos;
    case Type::List:
      for (const Value& x : *container.list)
        if (equals(x, item)) return true;
      return false;
    case Type::Dict: return container.dict->find(item) != nullptr;
    default: throw_at(pos, "argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value Renderer::eval(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: {
      if (const Value* v = scope.lookup(e.name)) return *v;
      auto it = globals_.find(e.name);
      if (it != globals_.end()) return it->second;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::ListLit: case ExprKind::TupleLit: {
      List items;
      for (const ExprPtr& x : e.args) items.push_back(eval(*x, scope));
      return Value::list_of(std::move(items), e.kind == ExprKind::TupleLit);
    }
    case ExprKind::DictLit: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) d.set(eval(*e.args[k], scope), eval(*e.args[k + 1], scope));
      return Value::dict_of(std::move(d));
    }
    case ExprKind::GetAttr: return get_attr(eval(*e.a, scope), e.name, e.pos);
    case ExprKind::GetItem: return get_item(eval(*e.a, scope), eval(*e.b, scope), e.pos);
    case ExprKind::Slice: {
      Value obj = eval(*e.a, scope);
      Value parts[3];
      const Value* p[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < 3; ++k)
        if (e.args[k]) {
          parts[k] = eval(*e.args[k], scope);
          if (!parts[k].is_none() && parts[k].type != Type::Int && parts[k].type != Type::Bool)
            throw_at(e.pos, "slice indices must be integers or None");
          p[k] = &parts[k];
        }
      if (obj.type == Type::Undefined) undefined_error(obj, e.pos);
      if (obj.type == Type::List) {
        List out;
        for (size_t k : slice_indices(int64_t(obj.list->size()), p[0], p[1], p[2], e.pos)) out.push_back((*obj.list)[k]);
        return Value::list_of(std::move(out), obj.tuple);
      }
      if (obj.type == Type::String) {
        auto cps = utf8_decode(obj.s);
        std::string out;
        for (size_t k : slice_indices(int64_t(cps.size()), p[0], p[1], p[2], e.pos)) utf8_append(out, cps[k]);
        Value sliced = Value::string(std::move(out));
        sliced.markup = obj.markup;
        return sliced;
      }
      return Value::undefined("'" + object_desc(obj) + "' is not sliceable");
    }
    case ExprKind::Call: {
      Value callee = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return call(callee, args, e.pos);
    }
    case ExprKind::Filter: {
      Value subject = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return apply_filter(e.name, subject, args, e.pos);
    }
    case ExprKind::Test: {
      Value subject = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return Value::boolean(apply_test(e.name, subject, args, e.pos) != e.negated);
    }
    case ExprKind::Neg: case ExprKind::Plus: {
      Value v = eval(*e.a, scope);
      if (v.is_undefined()) undefined_error(v, e.pos);
      if (!v.is_number()) throw_at(e.pos, "bad operand type for unary " + std::string(e.kind == ExprKind::Neg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == ExprKind::Plus) return v.type == Type::Bool ? Value::integer(v.as_int()) : v;
      return v.type == Type::Float ? Value::number(-v.f) : Value::integer(-v.as_int());
    }
    case ExprKind::Not: return Value::boolean(!eval(*e.a, scope).truthy());
    case ExprKind::And: {
      Value a = eval(*e.a, scope);
      return a.truthy() ? eval(*e.b, scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, scope);
      return a.truthy() ? a : eval(*e.b, scope);
    }
    case ExprKind::Cond:
      if (eval(*e.b, scope).truthy()) return eval(*e.a, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    case ExprKind::Concat: {
      std::string s;
      for (const ExprPtr& x : e.args) s += eval(*x, scope).str();
      return Value::string(std::move(s));
    }
    case ExprKind::Binary: return binary(e, eval(*e.a, scope), eval(*e.b, scope));
    case ExprKind::Compare: {
      Value left = eval(*e.args[0], scope);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1], scope);
        const std::string& op = e.ops[k];
        bool r;
        if (op == "==") r = equals(left, right);
        else if (op == "!=") r = !equals(left, right);
        else if (op == "in") r = contains(right, left, e.pos);
        else if (op == "not in") r = !contains(right, left, e.pos);
        else {
          if (left.is_undefined()) undefined_error(left, e.pos);
          if (right.is_undefined()) undefined_error(right, e.pos);
          if (op == "<") r = less_than(left, right, e.pos);
          else if (op == ">") r = less_than(right, left, e.pos);
          else if (op == "<=") r = !less_than(right, left, e.pos);
          else r = !less_than(left, right, e.pos);
        }
        if (!r) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
  }
  throw_at(e.pos, "unknown expression");
}

static int64_t checked(bool overflow, int64_t v, Pos pos) {
  if (overflow) throw_at(pos, "integer overflow (Loom's integers are 64-bit)");
  return v;
}

Value Renderer::binary(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  if (a.is_undefined()) undefined_error(a, e.pos);
  if (b.is_undefined()) undefined_error(b, e.pos);
  auto bad = [&]() -> Value {
    throw_at(e.pos, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
  };
  bool ints = (a.type == Type::Int || a.type == Type::Bool) && (b.type == Type::Int || b.type == Type::Bool);
  bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r;
      bool over = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(over, r, e.pos));
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      if (!a.markup && !b.markup) return Value::string(a.s + b.s);
      // Markup.__add__ / __radd__: the plain side is escaped, the sum is Markup.
      return Value::markup_string((a.markup ? a.s : html_escape(a.s)) + (b.markup ? b.s : html_escape(b.s)));
    }
    if (a.is_list() && b.is_list()) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::list_of(std::move(l), a.tuple);
    }
    return bad();
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      bool over = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(over, r, e.pos));
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    return bad();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      bool over = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
      return Value::integer(checked(over, r, e.pos));
    }
    if (nums) return Value::number(a.as_double() * b.as_double());
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const Value* cnt = seq == &a ? &b : &a;
    if (!seq || (cnt->type != Type::Int && cnt->type != Type::Bool)) return bad();
    int64_t n = std::max<int64_t>(0, cnt->as_int());
    if (n * int64_t(seq->is_string() ? seq->s.size() : seq->list->size()) > (1 << 24))
      throw_at(e.pos, "repetition result too large");
    if (seq->is_string()) {
      std::string s;
      for (int64_t k = 0; k < n; ++k) s += seq->s;
      Value out = Value::string(std::move(s));
      out.markup = seq->markup;
      return out;
    }
    List l;
    for (int64_t k = 0; k < n; ++k) l.insert(l.end(), seq->list->begin(), seq->list->end());
    return Value::list_of(std::move(l), seq->tuple);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (a.is_string() && op == "%") throw_at(e.pos, "unsupported: printf-style '%' string formatting");
    if (!nums) return bad();
    if (b.as_double() == 0) throw_at(e.pos, op == "%" ? "integer modulo by zero" : "division by zero");
    if (op == "/") return Value::number(a.as_double() / b.as_double());
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) { --q; r += y; }
      return op == "//" ? Value::integer(q) : Value::integer(r);
    }
    double x = a.as_double(), y = b.as_double();
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    if (op == "%") return Value::number(r);
    return Value::number(std::floor(x / y));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int(), n = b.as_int();
      if (base == 0 || base == 1) return Value::integer(n == 0 ? 1 : base);
      if (base == -1) return Value::integer(n % 2 ? -1 : 1);
      if (n > 64) checked(true, 0, e.pos);
      for (int64_t k = 0; k < n; ++k)
        if (__builtin_mul_overflow(r, base, &r)) checked(true, 0, e.pos);
      return Value::integer(r);
    }
    if (nums) return Value::number(std::pow(a.as_double(), b.as_double()));
    return bad();
  }
  return bad();
}

}  // namespace loom::text::jinja
