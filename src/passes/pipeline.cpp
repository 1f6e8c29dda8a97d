// The shared lowering pipeline, in order.
#include "passes/lowering.h"

namespace loom::passes {

Lowering lower(const ir::Module& m) {
  const ir::Func& step = step_contract(m);
  Lowering l = resolve_operands(m, step);
  row_drop(l);
  return l;
}

}  // namespace loom::passes
