#include "ir/ops.h"

namespace ir {
namespace {

constexpr auto V = OperandKind::value, W = OperandKind::weight, E = OperandKind::either;
constexpr auto I = AttrKind::integer, N = AttrKind::number, S = AttrKind::string;

// required_attrs is derived from the specs so the two lists cannot disagree.
OpInfo make(std::string_view name, int lo, int hi, std::vector<OperandKind> kinds, std::vector<AttrSpec> specs) {
  std::vector<std::string_view> required;
  for (const auto& s : specs)
    if (s.required) required.push_back(s.name);
  return {name, lo, hi, std::move(required), std::move(kinds), std::move(specs)};
}

}  // namespace

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::integer: return "an integer";
    case AttrKind::number: return "a number";
    case AttrKind::string: return "a string";
    case AttrKind::boolean: return "true or false";
    case AttrKind::int_list: return "a list of integers";
  }
  return "?";
}

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = {
      make("embed", 2, 2, {W, V}, {}),
      make("rms_norm", 2, 2, {V, W}, {{"eps", N, true}}),
      make("matmul", 2, 2, {V, W}, {}),
      make("add", 2, 2, {V, E}, {}),
      make("mul", 2, 2, {V, E}, {}),
      make("scale", 1, 1, {V}, {{"factor", N, true}}),
      make("softcap", 1, 1, {V}, {{"cap", N, true}}),
      make("swiglu", 2, 2, {V, V}, {}),
      make("geglu", 2, 2, {V, V}, {}),
      make("slice", 1, 1, {V}, {{"start", I, true}, {"size", I, true}}),
      make("rope", 2, 3, {V, V, W},
           {{"head_dim", I, true}, {"n_rot", I, true}, {"base", N, true}, {"mode", S, true},
            {"freq_scale", N, false}}),
      make("attention", 4, 4, {V, V, V, V},
           {{"layer", I, true}, {"n_head", I, true}, {"n_kv_head", I, true}, {"head_dim", I, true},
            {"value_dim", I, true}, {"scale", N, true}, {"window", I, false}, {"softcap", N, false}}),
  };
  return ops;
}

const OpInfo* find_op(std::string_view opcode) {
  for (const auto& op : all_ops())
    if (op.name == opcode) return &op;
  return nullptr;
}

const AttrSpec* find_attr_spec(const OpInfo& op, std::string_view attr) {
  for (const auto& s : op.attr_specs)
    if (s.name == attr) return &s;
  return nullptr;
}

}  // namespace ir
