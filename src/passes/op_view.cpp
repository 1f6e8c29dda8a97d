// The one table from opcode names to Opcode, and the typed attribute reads backends use
// instead of looking attributes up by string.
#include <utility>

#include "common/error.h"
#include "passes/lowering.h"

namespace loom::passes {

namespace {
constexpr std::pair<std::string_view, Opcode> kNames[kOpcodeCount] = {
    {"embed", Opcode::embed},     {"rms_norm", Opcode::rms_norm}, {"matmul", Opcode::matmul},
    {"add", Opcode::add},         {"mul", Opcode::mul},           {"scale", Opcode::scale},
    {"softcap", Opcode::softcap}, {"swiglu", Opcode::swiglu},     {"geglu", Opcode::geglu},
    {"slice", Opcode::slice},     {"rope", Opcode::rope},         {"attention", Opcode::attention},
};
}  // namespace

std::optional<Opcode> opcode_of(std::string_view name) {
  for (const auto& [n, c] : kNames)
    if (n == name) return c;
  return std::nullopt;
}

const char* opcode_name(Opcode c) {
  for (const auto& [n, k] : kNames)
    if (k == c) return n.data();
  return "?";
}

RopeAttrs rope_attrs(const ir::Op& op) {
  RopeAttrs r;
  r.head_dim = ir::attr_int(op.attrs, "head_dim");
  r.n_rot = ir::attr_int(op.attrs, "n_rot");
  r.base = ir::attr_float(op.attrs, "base");
  r.freq_scale = ir::attr_float(op.attrs, "freq_scale", 1.0);
  const std::string mode = ir::attr_string(op.attrs, "mode", "normal");
  if (mode != "normal" && mode != "neox") loom::fail("%{}: rope mode \"{}\" (want normal or neox)", op.result, mode);
  r.neox = mode == "neox";
  return r;
}

AttentionAttrs attention_attrs(const ir::Op& op) {
  AttentionAttrs a;
  a.layer = ir::attr_int(op.attrs, "layer");
  a.n_head = ir::attr_int(op.attrs, "n_head");
  a.n_kv_head = ir::attr_int(op.attrs, "n_kv_head");
  a.head_dim = ir::attr_int(op.attrs, "head_dim");
  a.value_dim = ir::attr_int(op.attrs, "value_dim");
  a.scale = ir::attr_float(op.attrs, "scale");
  a.window = ir::attr_int(op.attrs, "window", 0);
  a.softcap = ir::attr_float(op.attrs, "softcap", 0.0);
  return a;
}

SliceAttrs slice_attrs(const ir::Op& op) { return {ir::attr_int(op.attrs, "start"), ir::attr_int(op.attrs, "size")}; }

double norm_eps(const ir::Op& op) { return ir::attr_float(op.attrs, "eps"); }

double scalar_attr(const ir::Op& op) {
  return ir::attr_float(op.attrs, op.opcode == "softcap" ? "cap" : "factor");
}

std::string LoweredOp::weight_name() const {
  for (const auto& o : in)
    if (o.weight) return o.weight->name;
  return {};
}

}  // namespace loom::passes
