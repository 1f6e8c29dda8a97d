#include "backend/cuda/decode_fusion.h"

#include <algorithm>
#include <map>

namespace loom::backend::cuda {

using passes::LoweredOp;
using passes::Opcode;

namespace {

bool same_rope(const passes::Lowering& l, int a, int b) {
  const auto ra = passes::rope_attrs(*l.ops[a].op), rb = passes::rope_attrs(*l.ops[b].op);
  auto ff = [&](int i) { return l.ops[i].in.size() > 2 ? l.ops[i].in[2].weight : nullptr; };
  return ra.head_dim == rb.head_dim && ra.n_rot == rb.n_rot && ra.base == rb.base && ra.freq_scale == rb.freq_scale &&
         ra.neox == rb.neox && ff(a) == ff(b);
}

}  // namespace

DecodeFusion fuse_decode(const passes::Lowering& l, const FusionRules& rules) {
  const int n = int(l.ops.size());
  DecodeFusion f;
  f.norm_q8.assign(size_t(n), 0);
  f.attention_q8.assign(size_t(n), 0);
  f.gated_q8.assign(size_t(n), 0);
  std::vector<int> def(l.cols.size(), -1), readers(l.cols.size(), 0), reader_of(l.cols.size(), -1);
  for (int i = 0; i < n; ++i) {
    def[l.ops[i].out] = i;
    for (const auto& o : l.ops[i].in)
      if (o.value >= 0) readers[o.value]++, reader_of[o.value] = i;
  }
  auto sole_reader = [&](int v) { return readers[v] == 1 ? reader_of[v] : -1; };
  // Steps on both sides of the row drop never merge: rows change between them.
  auto same_side = [&](int a, int b) { return !l.has_mixing() || ((a <= l.last_mixing) == (b <= l.last_mixing)); };
  auto packed_matmul = [&](int i) { return l.ops[i].code == Opcode::matmul && rules.packed && rules.packed(l.ops[i]); };
  auto read_by_packed_matmul = [&](int v) {
    for (int i = 0; i < n; ++i)
      if (packed_matmul(i) && l.ops[i].in[0].value == v) return true;
    return false;
  };

  std::vector<int> anchor(size_t(n), -1);  // per op: the op its step is anchored at (runs where)
  std::map<int, FusedStep> fused;          // by anchor
  if (rules.enabled) {
    passes::GroupRules gr;
    gr.max_parts = 4;  // matmul_q8_parts' limit
    gr.compatible = [&](const LoweredOp& a, const LoweredOp& b) { return rules.packed(a) && rules.packed(b); };
    const std::vector<int> leader = passes::group_matmuls(l, gr);
    std::map<int, std::vector<int>> members;
    for (int i = 0; i < n; ++i)
      if (packed_matmul(i)) members[leader[i]].push_back(i);
    for (auto& [lead, mm] : members) {
      FusedStep st{FusedStep::Kind::matmuls, mm, -1};
      if (mm.size() == 2) {  // gate and up, read by one gated op
        const int g = sole_reader(l.ops[mm[0]].out);
        const Opcode c = g >= 0 ? l.ops[g].code : Opcode::add;
        if ((c == Opcode::swiglu || c == Opcode::geglu) && sole_reader(l.ops[mm[1]].out) == g &&
            l.ops[g].in[0].value != l.ops[g].in[1].value && same_side(lead, g))
          st.epilogue_op = g;
      } else if (mm.size() == 1) {  // a projection added to a residual defined before it
        const int a = sole_reader(l.ops[mm[0]].out);
        if (a >= 0 && l.ops[a].code == Opcode::add && l.ops[a].in.size() == 2 && same_side(lead, a)) {
          const auto& in = l.ops[a].in;
          const int other = in[0].value == l.ops[mm[0]].out ? in[1].value : in[0].value;
          if (other >= 0 && other != l.ops[mm[0]].out && def[other] >= 0 && def[other] < mm[0] &&
              l.cols[other] == l.ops[mm[0]].cols)
            st.epilogue_op = a;
        }
      }
      if (st.epilogue_op >= 0) st.ops.push_back(st.epilogue_op);
      if (st.epilogue_op >= 0 && l.ops[st.epilogue_op].code != Opcode::add)
        f.gated_q8[st.epilogue_op] = l.ops[st.epilogue_op].cols % 32 == 0 && read_by_packed_matmul(l.ops[st.epilogue_op].out);
      if (st.ops.size() < 2) continue;
      for (int i : st.ops) anchor[i] = lead;
      fused[lead] = st;
    }
    for (int i = 0; i < n; ++i) {
      if (l.ops[i].code != Opcode::attention) continue;
      const int q = l.ops[i].in[0].value, k = l.ops[i].in[1].value;
      if (q < 0 || k < 0) continue;
      const int rq = def[q], rk = def[k];
      if (rq < 0 || rk < 0 || rq == rk || l.ops[rq].code != Opcode::rope || l.ops[rk].code != Opcode::rope) continue;
      if (sole_reader(q) != i || sole_reader(k) != i || anchor[rq] >= 0 || anchor[rk] >= 0 || !same_rope(l, rq, rk))
        continue;
      if (l.ops[rq].in[0].value < 0 || l.ops[rk].in[0].value < 0) continue;
      if (passes::rope_attrs(*l.ops[rq].op).head_dim != passes::attention_attrs(*l.ops[i].op).head_dim) continue;
      FusedStep st{FusedStep::Kind::rope_attention, {rq, rk, i}, -1};
      std::sort(st.ops.begin(), st.ops.end());
      for (int j : st.ops) anchor[j] = i;
      fused[i] = st;
    }
    for (int i = 0; i < n; ++i) {
      const LoweredOp& lo = l.ops[i];
      if (lo.code == Opcode::rms_norm && lo.cols % 32 == 0 && rules.whole_row_norm && rules.whole_row_norm(lo))
        f.norm_q8[i] = read_by_packed_matmul(lo.out);
      if (lo.code == Opcode::attention) f.attention_q8[i] = read_by_packed_matmul(lo.out) && lo.cols % 32 == 0;
    }
  }
  f.step_of_op.assign(size_t(n), -1);
  for (int i = 0; i < n; ++i) {
    if (anchor[i] >= 0 && anchor[i] != i) continue;
    FusedStep st = anchor[i] == i ? fused.at(i) : FusedStep{FusedStep::Kind::op, {i}, -1};
    for (int j : st.ops) f.step_of_op[j] = int(f.steps.size());
    f.steps.push_back(std::move(st));
  }
  f.def_op = def;
  if (!rules.enabled || !rules.fold_ropes) return f;
  // The join of one activation row (decode_fusion.h), on the steps as they now stand: q, k and
  // v parts whose only readers are the ropes and attention of one step.
  for (auto& st : f.steps) {
    if (st.kind != FusedStep::Kind::matmuls || st.epilogue_op >= 0) continue;
    for (const auto& ra : f.steps) {
      if (ra.kind != FusedStep::Kind::rope_attention) continue;
      const int at = ra.ops.back();
      const LoweredOp& a = l.ops[at];
      const int rq = def[a.in[0].value], rk = def[a.in[1].value];
      const auto rope = passes::rope_attrs(*l.ops[rq].op);
      if (rope.neox || rope.n_rot % 2 || rope.head_dim % 2) continue;
      auto part_feeding = [&](int v, int reader) {
        const int d = v >= 0 ? def[v] : -1;
        return d >= 0 && std::count(st.ops.begin(), st.ops.end(), d) && sole_reader(v) == reader;
      };
      if (part_feeding(l.ops[rq].in[0].value, rq) && part_feeding(l.ops[rk].in[0].value, rk) &&
          part_feeding(a.in[2].value, at)) {
        st.rope_attention = at;
        break;
      }
    }
  }
  return f;
}

}  // namespace loom::backend::cuda
