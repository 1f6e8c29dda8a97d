#include "text/jinja/parser.h"

#include <fmt/format.h>

#include <initializer_list>

namespace loom::text::jinja {
namespace {

ExprPtr make(ExprKind k, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->pos = pos;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_template() {
    std::string stopped;
    Body body = parse_body({}, &stopped);
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  Token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) { if (is_op(op)) { ++i_; return true; } return false; }
  bool skip_name(const char* n) { if (is_name(n)) { ++i_; return true; } return false; }
  [[noreturn]] void fail(const std::string& what) const { throw_at(cur().pos, what); }

  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Tok::Eof: return "end of template";
      case Tok::BlockEnd: return "'%}'";
      case Tok::VarEnd: return "'}}'";
      case Tok::String: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', found {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) fail("expected a name, found " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != Tok::BlockEnd) fail("expected '%}', found " + describe(cur()));
    ++i_;
  }

  // Parses text and tags until a block tag whose keyword is in `ends` (left after the
  // keyword, which is returned in *stopped) or the end of the template.
  Body parse_body(std::initializer_list<const char*> ends, std::string* stopped) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == Tok::Eof) {
        if (ends.size()) {
          std::string want;
          for (const char* e : ends) want += (want.empty() ? "" : " or ") + std::string("'") + e + "'";
          fail("unexpected end of template; expected " + want);
        }
        return body;
      }
      if (t.kind == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.kind == Tok::VarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->pos = t.pos;
        s->expr = parse_tuple(true);
        if (cur().kind != Tok::VarEnd) fail("expected '}}', found " + describe(cur()));
        ++i_;
        body.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        ++i_;
        if (cur().kind != Tok::Name) fail("expected a statement name after '{%'");
        for (const char* e : ends)
          if (cur().text == e) {
            *stopped = next().text;
            return body;
          }
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr stmt(StmtKind k, Pos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->pos = pos;
    return s;
  }

  StmtPtr parse_statement() {
    Token kw = next();
    const std::string& k = kw.text;
    if (k == "if") return parse_if(kw.pos);
    if (k == "for") return parse_for(kw.pos);
    if (k == "set") return parse_set(kw.pos);
    if (k == "macro") return parse_macro(kw.pos);
    if (k == "call") return parse_call_block(kw.pos);
    if (k == "filter") {
      auto s = stmt(StmtKind::FilterBlock, kw.pos);
      parse_filter_chain(s->filters);
      expect_block_end();
      std::string stop;
      s->body = parse_body({"endfilter"}, &stop);
      expect_block_end();
      return s;
    }
    if (k == "break" || k == "continue") {
      expect_block_end();
      return stmt(k == "break" ? StmtKind::Break : StmtKind::Continue, kw.pos);
    }
    if (k == "generation") {
      // HF's AssistantTracker extension: marks assistant text for masks; renders its body as is.
      expect_block_end();
      auto s = stmt(StmtKind::If, kw.pos);
      std::string stop;
      auto lit = make(ExprKind::Literal, kw.pos);
      lit->value = Value::boolean(true);
      s->branches.emplace_back(std::move(lit), parse_body({"endgeneration"}, &stop));
      expect_block_end();
      return s;
    }
    throw_at(kw.pos, "unsupported statement '{% " + k + " %}'");
  }

  StmtPtr parse_if(Pos pos) {
    auto s = stmt(StmtKind::If, pos);
    while (true) {
      ExprPtr cond = parse_tuple(true);
      expect_block_end();
      std::string stop;
      Body b = parse_body({"elif", "else", "endif"}, &stop);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (stop == "elif") continue;
      if (stop == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, &stop);
      }
      expect_block_end();
      return s;
    }
  }

  void parse_targets(std::vector<std::string>& out) {
    bool paren = skip_op("(");
    do {
      out.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
  }

  StmtPtr parse_for(Pos pos) {
    auto s = stmt(StmtKind::For, pos);
    parse_targets(s->targets);
    if (!skip_name("in")) fail("expected 'in' in for loop, found " + describe(cur()));
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("unsupported: recursive for loops");
    expect_block_end();
    std::string stop;
    s->body = parse_body({"else", "endfor"}, &stop);
    if (stop == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, &stop);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(Pos pos) {
    auto s = stmt(StmtKind::Set, pos);
    std::string first = expect_name();
    s->targets.push_back(first);
    if (skip_op(".")) {
      s->attr = expect_name();
    } else {
      while (skip_op(",")) s->targets.push_back(expect_name());
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) fail("expected '=' in set");
    s->kind = StmtKind::SetBlock;
    if (is_op("|")) parse_filter_chain(s->filters);
    expect_block_end();
    std::string stop;
    s->body = parse_body({"endset"}, &stop);
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.def = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
  }

  StmtPtr parse_macro(Pos pos) {
    auto s = stmt(StmtKind::Macro, pos);
    s->name = expect_name();
    parse_params(s->params);
    expect_block_end();
    std::string stop;
    s->body = parse_body({"endmacro"}, &stop);
    if (cur().kind == Tok::Name) ++i_;
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block(Pos pos) {
    auto s = stmt(StmtKind::CallBlock, pos);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) throw_at(s->expr->pos, "expected a call in '{% call %}'");
    expect_block_end();
    std::string stop;
    s->body = parse_body({"endcall"}, &stop);
    expect_block_end();
    return s;
  }

  // `| f(args) | g` as Filter nodes whose subject (a) is filled in at run time.
  void parse_filter_chain(std::vector<ExprPtr>& out) {
    if (!skip_op("|") && !out.empty()) return;
    do {
      out.push_back(parse_filter(nullptr));
    } while (skip_op("|"));
  }

  // ---- expressions ----

  ExprPtr parse_tuple(bool with_condexpr) {
    Pos pos = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(ExprKind::TupleLit, pos);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == Tok::BlockEnd || cur().kind == Tok::VarEnd || is_op(")") || is_op("=")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      Pos pos = next().pos;
      auto c = make(ExprKind::Cond, pos);
      c->b = parse_or();
      if (skip_name("else")) c->c = parse_condexpr();
      c->a = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind k, Pos pos, ExprPtr a, ExprPtr b, std::string op = "") {
    auto e = make(k, pos);
    e->a = std::move(a);
    e->b = std::move(b);
    e->name = std::move(op);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      Pos pos = next().pos;
      e = binary(ExprKind::Or, pos, std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      Pos pos = next().pos;
      e = binary(ExprKind::And, pos, std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Pos pos = next().pos;
      auto e = make(ExprKind::Not, pos);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Pos pos = cur().pos;
    ExprPtr e = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      std::string op;
      if (cur().kind == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      ops.push_back(op);
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return e;
    auto c = make(ExprKind::Compare, pos);
    c->args.push_back(std::move(e));
    for (auto& o : operands) c->args.push_back(std::move(o));
    c->ops = std::move(ops);
    return c;
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token op = next();
      e = binary(ExprKind::Binary, op.pos, std::move(e), parse_concat(), op.text);
    }
    return e;
  }
  ExprPtr parse_concat() {
    Pos pos = cur().pos;
    ExprPtr e = parse_math2();
    if (!is_op("~")) return e;
    auto c = make(ExprKind::Concat, pos);
    c->args.push_back(std::move(e));
    while (skip_op("~")) c->args.push_back(parse_math2());
    return c;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token op = next();
      e = binary(ExprKind::Binary, op.pos, std::move(e), parse_pow(), op.text);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      Token op = next();
      e = binary(ExprKind::Binary, op.pos, std::move(e), parse_unary(true), op.text);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Token op = next();
      e = make(op.text == "-" ? ExprKind::Neg : ExprKind::Plus, op.pos);
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    auto lit = [&](Value v) {
      auto e = make(ExprKind::Literal, t.pos);
      e->value = std::move(v);
      return e;
    };
    switch (t.kind) {
      case Tok::Name: {
        Token n = next();
        if (n.text == "true" || n.text == "True") return lit(Value::boolean(true));
        if (n.text == "false" || n.text == "False") return lit(Value::boolean(false));
        if (n.text == "none" || n.text == "None") return lit(Value::none());
        auto e = make(ExprKind::Name, n.pos);
        e->name = n.text;
        return e;
      }
      case Tok::String: {
        Pos pos = t.pos;
        std::string s;
        while (cur().kind == Tok::String) s += next().text;  // adjacent literals concatenate
        auto e = make(ExprKind::Literal, pos);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int: { auto e = lit(Value::integer(t.ival)); ++i_; return e; }
      case Tok::Float: { auto e = lit(Value::number(t.fval)); ++i_; return e; }
      case Tok::Op:
        if (t.text == "(") {
          Pos pos = next().pos;
          if (skip_op(")")) return make(ExprKind::TupleLit, pos);
          ExprPtr first = parse_expression(true);
          if (!is_op(",")) {
            expect_op(")");
            return first;
          }
          auto tup = make(ExprKind::TupleLit, pos);
          tup->args.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            tup->args.push_back(parse_expression(true));
          }
          expect_op(")");
          return tup;
        }
        if (t.text == "[") {
          auto e = make(ExprKind::ListLit, next().pos);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = make(ExprKind::DictLit, next().pos);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default: break;
    }
    fail("unexpected " + describe(t) + " in expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        Pos pos = next().pos;
        if (cur().kind == Tok::Int) {
          auto g = make(ExprKind::GetItem, pos);
          g->b = make(ExprKind::Literal, cur().pos);
          g->b->value = Value::integer(next().ival);
          g->a = std::move(e);
          e = std::move(g);
        } else {
          auto g = make(ExprKind::GetAttr, pos);
          g->name = expect_name();
          g->a = std::move(e);
          e = std::move(g);
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    Pos pos = next().pos;  // '['
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (is_op(":")) {
        ++i_;
        slice = true;
        if (++n > 2) fail("too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) fail("expected ']' or ':' in subscript");
      parts[n] = parse_expression(true);
      if (!slice && is_op(",")) fail("unsupported: tuple subscripts");
    }
    expect_op("]");
    if (!slice) {
      if (!parts[0]) fail("empty subscript");
      auto g = make(ExprKind::GetItem, pos);
      g->a = std::move(target);
      g->b = std::move(parts[0]);
      return g;
    }
    auto s = make(ExprKind::Slice, pos);
    s->a = std::move(target);
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  void parse_call_args(std::vector<ExprPtr>& args, KwArgs& kwargs) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("unsupported: *args/**kwargs in calls");
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string k = next().text;
        ++i_;
        kwargs.emplace_back(k, parse_expression(true));
      } else {
        if (!kwargs.empty()) fail("positional argument after keyword argument");
        args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(ExprKind::Call, cur().pos);
    c->a = std::move(callee);
    parse_call_args(c->args, c->kwargs);
    return c;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().kind == Tok::Name) {
      ++i_;
      n += "." + next().text;
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr subject) {
    auto f = make(ExprKind::Filter, cur().pos);
    f->name = dotted_name();
    if (is_op("(")) parse_call_args(f->args, f->kwargs);
    f->a = std::move(subject);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr subject) {
    Pos pos = next().pos;  // 'is'
    auto t = make(ExprKind::Test, pos);
    t->negated = skip_name("not");
    t->name = dotted_name();
    if (is_op("(")) {
      parse_call_args(t->args, t->kwargs);
    } else {
      const Token& c = cur();
      bool starts_primary = c.kind == Tok::Name || c.kind == Tok::String || c.kind == Tok::Int ||
                            c.kind == Tok::Float || (c.kind == Tok::Op && (c.text == "(" || c.text == "[" || c.text == "{"));
      if (starts_primary && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail("You cannot chain multiple tests with is");
        t->args.push_back(parse_postfix(parse_primary()));
      }
    }
    t->a = std::move(subject);
    return t;
  }
};

}  // namespace

Body parse(std::string_view source, const LexOptions& opts) { return Parser(tokenize(source, opts)).parse_template(); }

}  // namespace loom::text::jinja
