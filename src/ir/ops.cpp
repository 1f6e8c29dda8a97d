#include "ir/ops.h"

namespace ir {

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = {
      {"embed", 2, 2, {}},
      {"rms_norm", 2, 2, {"eps"}},
      {"matmul", 2, 2, {}},
      {"add", 2, 2, {}},
      {"mul", 2, 2, {}},
      {"scale", 1, 1, {"factor"}},
      {"softcap", 1, 1, {"cap"}},
      {"swiglu", 2, 2, {}},
      {"geglu", 2, 2, {}},
      {"slice", 1, 1, {"start", "size"}},
      {"rope", 2, 3, {"head_dim", "n_rot", "base", "mode"}},
      {"attention", 4, 4, {"layer", "n_head", "n_kv_head", "head_dim", "value_dim", "scale"}},
  };
  return ops;
}

const OpInfo* find_op(std::string_view opcode) {
  for (const auto& op : all_ops())
    if (op.name == opcode) return &op;
  return nullptr;
}

}  // namespace ir
