// Checks that a module means something: names declared and defined once, values defined before
// use, operands of the right kind and count, attributes of the right type, and every op's
// declared result type equal to the one its shape rule infers (ir/ops.h, docs/loom-language.md).
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"

namespace ir {

// The type of an SSA value in scope, or nullptr when there is none.
using TypeLookup = std::function<const Type*(std::string_view value)>;

// The result type `op` must have, from its operands' types and attributes (the shape rules of
// ir/ops.h). Throws loom::Error without a location (the caller adds it): unknown opcode, wrong
// operand count or kind, missing/unknown/mistyped attribute, shapes that do not fit.
// Weights are looked up in `m`; `f` is the function the op belongs to.
Type infer_type(const Module& m, const Func& f, const Op& op, const TypeLookup& lookup);

// Throws loom::Error at the first problem, as "file:line: op %x (matmul): ..." when the op's
// line is known ("op %x (matmul): ..." when built in memory).
void verify(const Module& m);

// Non-fatal findings about the schedule: entries whose selector matches no weight operand of
// an op of that opcode. A schedule written for a model family may name layers one program
// lacks, so these are warnings, not errors. Call after verify().
std::vector<std::string> schedule_warnings(const Module& m);

// Glob over weight names: '*' any run of characters (dots included), '?' one character.
bool glob_match(std::string_view pattern, std::string_view name);

// True for names the text form can print and read back.
bool is_valid_name(std::string_view name);      // after % and @: [A-Za-z0-9_.]+
bool is_valid_dim_name(std::string_view name);  // [A-Z][A-Z0-9_]*
bool is_valid_attr_name(std::string_view name);  // [A-Za-z_][A-Za-z0-9_.]*

}  // namespace ir
