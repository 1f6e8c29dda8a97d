// The `.loom` text form: parse and print (grammar in docs/loom-language.md).
//
//   print(parse(print(m))) == print(m)   for every module m that verify() accepts
//   parse(print(m)) == m                 structurally (Op::line and Module::source aside)
#pragma once
#include <string>
#include <string_view>

#include "ir/module.h"

namespace ir {

// Parses one module. Syntax errors throw loom::Error "file:line:col: expected X, found Y".
// Records Op::line and Module::source. The result is well-formed text, not yet checked for
// meaning: run verify() (ir/verify.h) on it.
Module parse(std::string_view text, std::string_view filename);

// Canonical text: fixed section order (dims, weights, funcs, schedule), aligned columns,
// shortest round-trip floats. Deterministic: equal modules print to equal bytes.
std::string print(const Module& m);

// Pieces of the printer, for messages and other tools.
std::string print_type(const Type& t);          // tensor<Tx576xf32>
std::string print_attr_value(const AttrValue& v);  // 1e-05, "neox", [1, 2], true

}  // namespace ir
