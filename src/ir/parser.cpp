// Recursive-descent parser for the `.loom` text form. The grammar (docs/loom-language.md) does
// not depend on line breaks; the printer puts one op per line, and Op::line records where each
// op started so that the verifier and the backends can point at it.
#include <set>

#include "common/error.h"
#include "ir/lexer.h"
#include "ir/text.h"
#include "ir/verify.h"  // the name rules

namespace ir {
namespace {

using text::Tok;
using text::Token;

class Parser {
 public:
  Parser(std::string_view src, std::string_view file) : file_(file), toks_(text::lex(src, file)) {}

  Module module() {
    Module m;
    m.source = std::string(file_);
    expect_keyword("module");
    m.name = plain_symbol("a module name (@name)");
    if (peek().is('{')) m.attrs = attr_dict();
    std::set<std::string, std::less<>> dims, weights, funcs;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::eof) return m;
      if (t.is_ident("dim")) {
        SymDim d = dim();
        if (!dims.insert(d.name).second) fail(t, fmt::format("dim {} is declared twice", d.name));
        m.dims.push_back(std::move(d));
      } else if (t.is_ident("weight")) {
        Weight w = weight();
        if (!weights.insert(w.name).second) fail(t, fmt::format("weight @{} is declared twice", w.name));
        m.weights.push_back(std::move(w));
      } else if (t.is_ident("func")) {
        Func f = func();
        if (!funcs.insert(f.name).second) fail(t, fmt::format("func @{} is defined twice", f.name));
        m.funcs.push_back(std::move(f));
      } else if (t.is_ident("schedule")) {
        schedule(m.schedule);
      } else {
        expected("'dim', 'weight', 'func', 'schedule' or end of file");
      }
    }
  }

 private:
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }

  [[noreturn]] void fail(const Token& at, const std::string& msg) const {
    loom::fail("{}:{}:{}: {}", file_, at.line, at.col, msg);
  }
  [[noreturn]] void fail_at(int line, int col, const std::string& msg) const {
    loom::fail("{}:{}:{}: {}", file_, line, col, msg);
  }
  [[noreturn]] void expected(std::string_view what) const {
    fail(peek(), fmt::format("expected {}, found {}", what, text::describe(peek())));
  }

  void expect_punct(char c) {
    if (!peek().is(c)) expected(fmt::format("'{}'", c));
    next();
  }
  void expect_keyword(std::string_view kw) {
    if (!peek().is_ident(kw)) expected(fmt::format("'{}'", kw));
    next();
  }
  std::string ident(std::string_view what) {
    if (peek().kind != Tok::ident) expected(what);
    return next().text;
  }
  // An @name that names one thing (no glob characters).
  std::string plain_symbol(std::string_view what) {
    if (peek().kind != Tok::symbol) expected(what);
    const Token& t = next();
    if (t.text.find_first_of("*?") != std::string::npos)
      fail(t, fmt::format("'@{}': '*' and '?' are only allowed in schedule selectors", t.text));
    return t.text;
  }
  std::string value_name(std::string_view what) {
    if (peek().kind != Tok::value) expected(what);
    return next().text;
  }

  // tensor<d0 x d1 x ... x elem>: the body is one angle token, split here on 'x' (dims are
  // digits or upper-case names, elements lower case without 'x', so the split is unambiguous).
  Type type() {
    if (!peek().is_ident("tensor")) expected("a type (tensor<...>)");
    next();
    if (peek().kind != Tok::angle) expected("'<' after 'tensor'");
    const Token& t = next();
    Type ty;
    const std::string& s = t.text;
    size_t b = 0;
    for (;;) {
      const size_t e = s.find('x', b);
      const std::string piece = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
      const int col = t.col + 1 + int(b);
      if (e == std::string::npos) {
        if (auto el = elem_from_name(piece)) {
          ty.elem = *el;
          return ty;
        }
        fail_at(t.line, col, fmt::format("expected an element type (f32, f16, bf16, i32, q4_0, ..., q8_k) in "
                                         "tensor<{}>, found '{}'", s, piece));
      }
      ty.shape.push_back(dim_piece(piece, s, t.line, col));
      b = e + 1;
    }
  }

  Dim dim_piece(const std::string& piece, const std::string& whole, int line, int col) const {
    if (is_valid_dim_name(piece)) return Dim::symbol(piece);
    bool digits = !piece.empty() && piece.size() <= 18;
    for (char c : piece) digits = digits && c >= '0' && c <= '9';
    if (!digits)
      fail_at(line, col, fmt::format("expected a dimension (an extent or an upper-case dim name) in tensor<{}>, "
                                     "found '{}'", whole, piece));
    return Dim::of(std::stoll(piece));
  }

  AttrValue attr_value() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::integer: next(); return t.i;
      case Tok::floating: next(); return t.f;
      case Tok::string: next(); return t.text;
      case Tok::ident:
        if (t.text == "true" || t.text == "false") {
          next();
          return t.text == "true";
        }
        break;
      case Tok::punct:
        if (t.is('[')) {
          next();
          std::vector<int64_t> xs;
          if (!peek().is(']')) {
            for (;;) {
              if (peek().kind != Tok::integer) expected("an integer in the list");
              xs.push_back(next().i);
              if (!peek().is(',')) break;
              next();
            }
          }
          expect_punct(']');
          return xs;
        }
        break;
      default: break;
    }
    expected("an attribute value (number, string, true, false or [integers])");
  }

  Attr attr() {
    Attr a;
    a.name = ident("an attribute name");
    expect_punct('=');
    a.value = attr_value();
    return a;
  }

  Attrs attr_dict(std::vector<std::pair<int, int>>* positions = nullptr) {
    expect_punct('{');
    Attrs as;
    if (!peek().is('}')) {
      for (;;) {
        const Token& at = peek();
        if (positions) positions->push_back({at.line, at.col});
        Attr a = attr();
        if (find_attr(as, a.name)) fail(at, fmt::format("attribute '{}' is given twice", a.name));
        as.push_back(std::move(a));
        if (!peek().is(',')) break;
        next();
      }
    }
    expect_punct('}');
    return as;
  }

  SymDim dim() {
    expect_keyword("dim");
    const Token& t = peek();
    SymDim d;
    d.name = ident("a dim name");
    if (!is_valid_dim_name(d.name))
      fail(t, fmt::format("dim name '{}' must be upper case ([A-Z][A-Z0-9_]*) to read apart from the 'x' in "
                          "tensor<...>", d.name));
    expect_keyword("in");
    expect_punct('[');
    d.lo = integer("the lower bound");
    expect_punct(',');
    d.hi = integer("the upper bound");
    expect_punct(']');
    return d;
  }

  int64_t integer(std::string_view what) {
    if (peek().kind != Tok::integer) expected(fmt::format("an integer ({})", what));
    return next().i;
  }

  Weight weight() {
    expect_keyword("weight");
    Weight w;
    w.name = plain_symbol("a weight name (@name)");
    expect_punct(':');
    w.type = type();
    expect_punct('=');
    expect_keyword("gguf");
    if (peek().kind != Tok::string) expected("the GGUF tensor name as a string");
    w.gguf_name = next().text;
    return w;
  }

  Func func() {
    expect_keyword("func");
    Func f;
    f.name = plain_symbol("a function name (@name)");
    std::set<std::string, std::less<>> defined;
    expect_punct('(');
    if (!peek().is(')')) {
      for (;;) {
        const Token& at = peek();
        Param p;
        p.name = value_name("a parameter (%name)");
        if (!defined.insert(p.name).second) fail(at, fmt::format("parameter %{} is declared twice", p.name));
        expect_punct(':');
        p.type = type();
        f.params.push_back(std::move(p));
        if (!peek().is(',')) break;
        next();
      }
    }
    expect_punct(')');
    if (peek().kind != Tok::arrow) expected("'->' and the result types");
    next();
    if (peek().is('(')) {
      next();
      if (!peek().is(')')) {
        for (;;) {
          f.result_types.push_back(type());
          if (!peek().is(',')) break;
          next();
        }
      }
      expect_punct(')');
    } else {
      f.result_types.push_back(type());
    }
    expect_punct('{');
    while (peek().kind == Tok::value) {
      const Token& at = peek();
      Op op = operation();
      if (!defined.insert(op.result).second) fail(at, fmt::format("%{} is defined twice", op.result));
      f.body.push_back(std::move(op));
    }
    if (!peek().is_ident("return")) expected("an op (%name = ...) or 'return'");
    next();
    if (peek().kind == Tok::value) {
      for (;;) {
        f.results.push_back(value_name("a returned value (%name)"));
        if (!peek().is(',')) break;
        next();
      }
    }
    expect_punct('}');
    return f;
  }

  Op operation() {
    Op op;
    op.line = peek().line;
    op.result = value_name("a result (%name)");
    expect_punct('=');
    op.opcode = ident("an opcode");
    if (peek().kind == Tok::value || peek().kind == Tok::symbol) {
      for (;;) {
        if (peek().kind == Tok::value)
          op.operands.push_back(Operand::value(next().text));
        else
          op.operands.push_back(Operand::weight(plain_symbol("an operand (%value or @weight)")));
        if (!peek().is(',')) break;
        next();
        if (peek().kind != Tok::value && peek().kind != Tok::symbol) expected("an operand (%value or @weight)");
      }
    }
    if (peek().is('{')) op.attrs = attr_dict();
    if (!peek().is(':')) expected("':' and the result type");
    next();
    op.type = type();
    return op;
  }

  // schedule { matmul(@blk*.w*) = {kernel = "..."}, attention = {block = 64}, threads = 2 }
  void schedule(std::vector<ScheduleEntry>& out) {
    expect_keyword("schedule");
    expect_punct('{');
    if (!peek().is('}')) {
      for (;;) {
        ScheduleEntry e;
        const Token& at = peek();
        const std::pair<int, int> name_pos{at.line, at.col};
        std::string name = ident("a schedule entry (opcode(@selector) = {...} or option = value)");
        if (peek().is('(')) {
          next();
          if (peek().kind != Tok::symbol) expected("a weight selector (@glob)");
          e.selector = next().text;
          expect_punct(')');
          expect_punct('=');
          e.opcode = std::move(name);
          e.settings = attr_dict(&e.setting_pos);
        } else {
          expect_punct('=');
          if (peek().is('{')) {
            e.opcode = std::move(name);
            e.settings = attr_dict(&e.setting_pos);
          } else {
            e.settings.push_back({std::move(name), attr_value()});
            e.setting_pos.push_back(name_pos);
          }
        }
        out.push_back(std::move(e));
        if (!peek().is(',')) break;
        next();
      }
    }
    expect_punct('}');
  }

  std::string_view file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

Module parse(std::string_view text, std::string_view filename) { return Parser(text, filename).module(); }

}  // namespace ir
