#include "port/draft_program.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "common/error.h"
#include "ir/verify.h"

namespace port {

namespace {

// The layer a value belongs to (`b12.out` -> 12), or -1 for values outside the layers.
int64_t layer_of(const std::string& value) {
  if (value.size() < 3 || value[0] != 'b') return -1;
  const auto dot = value.find('.');
  if (dot == std::string::npos || dot == 1) return -1;
  int64_t l = -1;
  const auto [end, ec] = std::from_chars(value.data() + 1, value.data() + dot, l);
  return ec == std::errc() && end == value.data() + dot ? l : -1;
}

void set_int_attr(ir::Attrs& attrs, const std::string& name, int64_t v) {
  for (auto& a : attrs)
    if (a.name == name) {
      a.value = v;
      return;
    }
}

}  // namespace

ir::Module draft_program(const ir::Module& target, int64_t layers) {
  const ir::Func* step = target.find_func("step");
  if (!step) loom::fail("draft: {} has no @step function", target.name);
  int64_t n_layer = 0;
  for (const auto& op : step->body) n_layer = std::max(n_layer, layer_of(op.result) + 1);
  if (n_layer == 0) loom::fail("draft: {} has no decoder layers (values named %b<L>.*)", target.name);
  if (layers < 1 || layers >= n_layer)
    loom::fail("draft: --layers must be between 1 and {} (the target has {} layers), got {}", n_layer - 1, n_layer,
               layers);

  ir::Module m = target;
  ir::Func& f = *std::find_if(m.funcs.begin(), m.funcs.end(), [](const ir::Func& fn) { return fn.name == "step"; });
  std::set<std::string> kept;  // values defined by the ops kept so far
  std::vector<ir::Op> body;
  const std::string last = "b" + std::to_string(n_layer - 1) + ".";
  const std::string exit = "b" + std::to_string(layers - 1) + ".";
  for (auto& op : f.body) {
    const int64_t l = layer_of(op.result);
    if (l >= layers) continue;
    // Ops after the layers (the head) that read the last layer read layer K-1's value of the
    // same name instead: the residual stream leaves the network K layers in.
    for (auto& o : op.operands) {
      if (o.kind != ir::Operand::Kind::value || l >= 0 || layer_of(o.name) != n_layer - 1) continue;
      const std::string renamed = exit + o.name.substr(last.size());
      if (!kept.count(renamed))
        loom::fail("draft: %{} reads %{}, but layer {} has no %{}", op.result, o.name, layers - 1, renamed);
      o.name = renamed;
    }
    for (const auto& o : op.operands)
      if (o.kind == ir::Operand::Kind::value && layer_of(o.name) >= layers)
        loom::fail("draft: %{} reads %{} of a dropped layer", op.result, o.name);
    kept.insert(op.result);
    body.push_back(std::move(op));
  }
  f.body = std::move(body);

  std::set<std::string> used;
  for (const auto& fn : m.funcs)
    for (const auto& op : fn.body)
      for (const auto& o : op.operands)
        if (o.kind == ir::Operand::Kind::weight) used.insert(o.name);
  std::erase_if(m.weights, [&](const ir::Weight& w) { return !used.count(w.name); });

  set_int_attr(m.attrs, "n_layer", layers);
  set_int_attr(m.attrs, "kv.n_layer", layers);
  m.attrs.push_back({"draft.of", target.name});
  m.attrs.push_back({"draft.layers", layers});
  m.name = target.name + "_draft" + std::to_string(layers);
  ir::verify(m);
  return m;
}

}  // namespace port
