// Matmul grouping: q/k/v (and gate/up) read one normalised activation; run as one step, the
// activation is converted once and all their weight rows are split across threads together.
// Running a matmul earlier than written is always valid: its only value operand is defined
// before the step it joins.
#include "passes/lowering.h"

namespace loom::passes {

std::vector<int> group_matmuls(const Lowering& l, const GroupRules& rules) {
  std::vector<int> leader(l.ops.size());
  std::vector<int> steps;               // leading op of each step so far
  std::vector<int> parts(l.ops.size(), 0);
  size_t floor = 0;                     // first step a matmul may still join
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const LoweredOp& op = l.ops[i];
    leader[i] = int(i);
    if (op.code == Opcode::matmul && rules.lookback > 0) {
      for (size_t b = steps.size(); b > floor && steps.size() - b < size_t(rules.lookback); --b) {
        const LoweredOp& c = l.ops[steps[b - 1]];
        if (c.code == Opcode::matmul && c.in[0].value == op.in[0].value && parts[steps[b - 1]] < rules.max_parts &&
            (!rules.compatible || rules.compatible(c, op))) {
          leader[i] = steps[b - 1];
          break;
        }
      }
    }
    parts[leader[i]]++;
    if (leader[i] == int(i)) steps.push_back(int(i));
    if (int(i) == l.last_mixing) floor = steps.size();
  }
  return leader;
}

}  // namespace loom::passes
