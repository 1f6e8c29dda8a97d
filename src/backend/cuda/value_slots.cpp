#include "backend/cuda/value_slots.h"

#include <algorithm>
#include <map>

namespace loom::backend::cuda {

ValueSlots plan_value_slots(const passes::Lowering& l, const DecodeFusion& f) {
  ValueSlots vs;
  vs.last_step = passes::last_use(l, f.step_of_op);
  const int n_values = int(l.cols.size());
  vs.offset.assign(size_t(n_values), -1);
  vs.def_step.assign(size_t(n_values), -1);
  std::map<int64_t, std::vector<int64_t>> free_by_bytes;
  auto slot_bytes = [&](int v) { return (l.cols[v] * int64_t(sizeof(float)) + 255) / 256 * 256; };
  auto take = [&](int v) {
    auto& fl = free_by_bytes[slot_bytes(v)];
    if (!fl.empty()) {
      vs.offset[v] = fl.back();
      fl.pop_back();
    } else {
      vs.offset[v] = vs.row_bytes;
      vs.row_bytes += slot_bytes(v);
    }
  };
  auto give_back = [&](int v) { free_by_bytes[slot_bytes(v)].push_back(vs.offset[v]); };
  for (int s = 0; s < int(f.steps.size()); ++s) {
    const auto& ops = f.steps[size_t(s)].ops;
    for (int i : ops) vs.def_step[l.ops[i].out] = s, take(l.ops[i].out);
    std::vector<int> dead;
    auto dies = [&](int v) {
      if (std::find(dead.begin(), dead.end(), v) == dead.end()) dead.push_back(v);
    };
    for (int i : ops) {
      const auto& lo = l.ops[i];
      for (const auto& o : lo.in)
        if (o.value >= 0 && o.value != l.tokens && o.value != l.positions && o.value != l.result &&
            vs.last_step[o.value] == s)
          dies(o.value);
      if (vs.last_step[lo.out] < 0 && lo.out != l.result) dies(lo.out);
    }
    for (int v : dead) give_back(v);
  }
  vs.drop_step = l.has_mixing() ? f.step_of_op[size_t(l.last_mixing)] : -1;
  for (int v = 0; v < n_values; ++v)
    if (vs.def_step[v] >= 0 && vs.def_step[v] <= vs.drop_step && (vs.last_step[v] > vs.drop_step || v == l.result))
      vs.live_at_drop.push_back(v);
  return vs;
}

}  // namespace loom::backend::cuda
