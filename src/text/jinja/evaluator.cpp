// Statements: output, if, for (with loop.*), set, macros, call and filter blocks.
#include "text/jinja/evaluator.h"

#include <fmt/format.h>

namespace loom::text::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

std::string Renderer::render(const Body& body, Scope& top) {
  std::string out;
  Flow f = exec(body, top, out);
  if (f != Flow::Normal) throw_at({1, 1}, "'break' or 'continue' outside a for loop");
  return out;
}

Renderer::Flow Renderer::exec(const Body& body, Scope& scope, std::string& out) {
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    switch (s.kind) {
      case StmtKind::Text: out += s.text; break;
      case StmtKind::Output: {
        out += eval(*s.expr, scope).str();
        break;
      }
      case StmtKind::If: {
        bool taken = false;
        for (auto& [cond, b] : s.branches) {
          if (eval(*cond, scope).truthy()) {
            taken = true;
            if (Flow f = exec(b, scope, out); f != Flow::Normal) return f;
            break;
          }
        }
        if (!taken)
          if (Flow f = exec(s.else_body, scope, out); f != Flow::Normal) return f;
        break;
      }
      case StmtKind::For:
        if (Flow f = exec_for(s, scope, out); f != Flow::Normal) return f;
        break;
      case StmtKind::Set: exec_set(s, scope); break;
      case StmtKind::SetBlock: {
        Scope inner{{}, &scope};
        std::string text;
        exec(s.body, inner, text);
        scope.vars[s.targets[0]] = apply_filters(s.filters, Value::string(std::move(text)), scope);
        break;
      }
      case StmtKind::Macro: scope.vars[s.name] = make_macro(s, scope); break;
      case StmtKind::CallBlock: {
        // The body becomes `caller()` inside the called macro.
        Stmt* body_stmt = const_cast<Stmt*>(&s);
        Scope* def_scope = &scope;
        Value caller = Value::function("caller", [this, body_stmt, def_scope](CallArgs& a) {
          Scope inner{{}, def_scope};
          for (size_t k = 0; k < body_stmt->params.size(); ++k) {
            const MacroParam& p = body_stmt->params[k];
            const Value* v = a.get(k, p.name);
            inner.vars[p.name] = v ? *v : p.def ? eval(*p.def, inner) : Value::undefined("'" + p.name + "' is undefined");
          }
          std::string text;
          exec(body_stmt->body, inner, text);
          return Value::string(std::move(text));
        });
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.a, scope);
        CallArgs args = eval_args(call_expr, scope);
        args.kwargs.emplace_back("caller", caller);
        out += call(callee, args, call_expr.pos).str();
        break;
      }
      case StmtKind::FilterBlock: {
        Scope inner{{}, &scope};
        std::string text;
        exec(s.body, inner, text);
        out += apply_filters(s.filters, Value::string(std::move(text)), scope).str();
        break;
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
  }
  return Flow::Normal;
}

Value Renderer::apply_filters(const std::vector<ExprPtr>& filters, Value v, Scope& scope) {
  for (const ExprPtr& f : filters) {
    CallArgs args = eval_args(*f, scope);
    v = apply_filter(f->name, v, args, f->pos);
  }
  return v;
}

static void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v, Pos pos) {
  if (targets.size() == 1) {
    scope.vars[targets[0]] = v;
    return;
  }
  if (v.type != Type::List)
    throw_at(pos, fmt::format("cannot unpack a {} into {} names", v.type_name(), targets.size()));
  if (v.list->size() != targets.size())
    throw_at(pos, fmt::format("cannot unpack {} values into {} names", v.list->size(), targets.size()));
  for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = (*v.list)[k];
}

Renderer::Flow Renderer::exec_for(const Stmt& s, Scope& scope, std::string& out) {
  Value seq = eval(*s.expr, scope);
  List all = iterate(seq, s.expr->pos);
  List items;
  if (s.cond) {
    for (const Value& x : all) {
      Scope probe{{}, &scope};
      bind_targets(probe, s.targets, x, s.pos);
      if (eval(*s.cond, probe).truthy()) items.push_back(x);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) {
    Scope inner{{}, &scope};
    return exec(s.else_body, inner, out);
  }
  const int64_t n = int64_t(items.size());
  for (int64_t k = 0; k < n; ++k) {
    Scope inner{{}, &scope};
    bind_targets(inner, s.targets, items[k], s.pos);
    Dict loop;
    auto put = [&](const char* name, Value v) { loop.items.emplace_back(Value::string(name), std::move(v)); };
    put("index", Value::integer(k + 1));
    put("index0", Value::integer(k));
    put("revindex", Value::integer(n - k));
    put("revindex0", Value::integer(n - k - 1));
    put("first", Value::boolean(k == 0));
    put("last", Value::boolean(k == n - 1));
    put("length", Value::integer(n));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem", k > 0 ? items[k - 1] : Value::undefined("there is no previous item"));
    put("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("there is no next item"));
    put("cycle", Value::function("loop.cycle", [k](CallArgs& a) {
          if (a.args.empty()) throw_at(a.pos, "no items for cycling given");
          return a.args[size_t(k) % a.args.size()];
        }));
    Value lv = Value::namespace_of(std::move(loop));
    inner.vars["loop"] = lv;
    Flow f = exec(s.body, inner, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Renderer::exec_set(const Stmt& s, Scope& scope) {
  Value v = eval(*s.expr, scope);
  if (!s.attr.empty()) {
    const Value* ns = scope.lookup(s.targets[0]);
    if (!ns || ns->type != Type::Namespace)
      throw_at(s.pos, "cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "': not a namespace");
    ns->dict->set(Value::string(s.attr), std::move(v));
    return;
  }
  bind_targets(scope, s.targets, v, s.pos);
}

Value Renderer::make_macro(const Stmt& s, Scope& scope) {
  const Stmt* m = &s;
  Scope* def_scope = &scope;
  return Value::function(s.name, [this, m, def_scope](CallArgs& a) {
    if (a.args.size() > m->params.size())
      throw_at(a.pos, fmt::format("macro '{}' takes not more than {} argument(s)", m->name, m->params.size()));
    if (++depth_ > 200) throw_at(a.pos, "macro recursion too deep");
    Scope inner{{}, def_scope};
    for (auto& [k, v] : a.kwargs) {
      bool known = k == "caller";
      for (auto& p : m->params) known |= p.name == k;
      if (!known) throw_at(a.pos, fmt::format("macro '{}' got an unexpected keyword argument '{}'", m->name, k));
      if (k == "caller") inner.vars["caller"] = v;
    }
    for (size_t k = 0; k < m->params.size(); ++k) {
      const MacroParam& p = m->params[k];
      const Value* v = a.get(k, p.name);
      inner.vars[p.name] = v ? *v : p.def ? eval(*p.def, inner) : Value::undefined("'" + p.name + "' is undefined");
    }
    std::string text;
    exec(m->body, inner, text);
    --depth_;
    return Value::string(std::move(text));
  });
}

}  // namespace loom::text::jinja
