// Pass 3: after the last attention op every op works row by row, so a step can drop the rows
// whose logits are not wanted there (decode computes the final norm and the vocabulary
// projection for one row, not for the whole prompt).
#include "passes/lowering.h"

namespace loom::passes {

void row_drop(Lowering& l) {
  l.last_mixing = -1;
  for (size_t i = 0; i < l.ops.size(); ++i)
    if (l.ops[i].code == Opcode::attention) l.last_mixing = int(i);
}

}  // namespace loom::passes
