// Liveness: the last position at which each value is read, so backends free (or re-use) its
// storage right after.
#include <algorithm>

#include "passes/lowering.h"

namespace loom::passes {

std::vector<int> last_use(const Lowering& l, const std::vector<int>& position_of_op) {
  std::vector<int> last(l.cols.size(), -1);
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const int at = position_of_op.empty() ? int(i) : position_of_op[i];
    for (const auto& o : l.ops[i].in)
      if (o.value >= 0) last[o.value] = std::max(last[o.value], at);
  }
  return last;
}

}  // namespace loom::passes
