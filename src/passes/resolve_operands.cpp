// Pass 2: every operand becomes a value id (the parameters first: 0 = %tok, 1 = %pos) or a
// declared weight, every op an Opcode, every result a value id with its width.
#include <map>

#include "common/error.h"
#include "passes/lowering.h"

namespace loom::passes {

Lowering resolve_operands(const ir::Module& m, const ir::Func& step) {
  Lowering l;
  l.step = &step;
  std::map<std::string, int, std::less<>> ids;
  for (const auto& p : step.params) {
    ids[p.name] = int(l.cols.size());
    l.cols.push_back(1);
  }
  l.ops.reserve(step.body.size());
  for (const auto& op : step.body) {
    const auto code = opcode_of(op.opcode);
    if (!code) loom::fail("line {}: unknown op {}", op.line, op.opcode);
    if (op.type.shape.size() != 2 || !op.type.shape[1].is_static())
      loom::fail("line {}: %{} must be [T x N] with a static N", op.line, op.result);
    LoweredOp lo{*code, &op, {}, -1, op.type.shape[1].value};
    for (const auto& o : op.operands) {
      OperandRef r;
      if (o.kind == ir::Operand::Kind::weight) {
        r.weight = m.find_weight(o.name);
        if (!r.weight) loom::fail("line {}: weight @{} is not declared", op.line, o.name);
      } else {
        auto it = ids.find(o.name);
        if (it == ids.end()) loom::fail("line {}: %{} used before it is defined", op.line, o.name);
        r.value = it->second;
      }
      lo.in.push_back(r);
    }
    if (!ids.emplace(op.result, int(l.cols.size())).second) loom::fail("line {}: %{} defined twice", op.line, op.result);
    lo.out = int(l.cols.size());
    l.cols.push_back(lo.cols);
    l.ops.push_back(std::move(lo));
  }
  auto it = ids.find(step.results.at(0));
  if (it == ids.end()) loom::fail("@step returns %{} which is not defined", step.results[0]);
  l.result = it->second;
  return l;
}

}  // namespace loom::passes
