// The syntax tree of a parsed template. Every node carries the line:column it came from so
// run-time errors point into the template.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace loom::text::jinja {

enum class ExprKind {
  Literal, Name, ListLit, TupleLit, DictLit,  // values
  GetAttr, GetItem, Slice, Call,              // postfix
  Filter, Test,                               // x | f(…), x is t(…)
  Neg, Plus, Not, Binary, Concat, Compare, And, Or, Cond,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  Pos pos;
  Value value;                   // Literal
  std::string name;              // Name; attribute; filter/test name; Binary operator
  ExprPtr a, b, c;               // operands: GetItem a[b]; Cond: a if b else c; Binary a op b
  std::vector<ExprPtr> args;     // items, call arguments, dict keys/values interleaved,
                                 // Concat and Compare operands, Slice start/stop/step (may be null)
  KwArgs kwargs;                 // keyword arguments of calls, filters and tests
  std::vector<std::string> ops;  // Compare operators between args
  bool negated = false;          // `is not`
};

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr def;  // null: no default (an omitted argument is undefined, as in jinja2)
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  Pos pos;
  std::string text;                                // Text
  ExprPtr expr;                                    // Output; For iterable; Set value; CallBlock call
  std::vector<std::pair<ExprPtr, Body>> branches;  // If/elif conditions and bodies
  Body body, else_body;                            // For/Macro/SetBlock/… body; If/For else
  std::vector<std::string> targets;                // For/Set names (several when unpacking)
  std::string attr;                                // `set ns.attr = …`: targets[0] is ns
  ExprPtr cond;                                    // `for x in xs if cond`
  std::string name;                                // Macro name
  std::vector<MacroParam> params;                  // Macro parameters; CallBlock caller parameters
  std::vector<ExprPtr> filters;                    // SetBlock/FilterBlock: Filter nodes with a == null
};

}  // namespace loom::text::jinja
