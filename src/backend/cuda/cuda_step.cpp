// A step of the CUDA plan on its stream (captured into a graph or run directly): the steps of
// the decode fusion (decode_fusion.h) in order, each as its fused kernels where the rows take
// the integer-dot path, else op by op; the rows whose logits are not wanted are gathered away
// right after the step of the last attention. Each q8 buffer names the value whose q8_1 form
// it holds, so a matmul quantizes its input only when no earlier kernel of the step (a fused
// norm, an attention, a gated matmul, an earlier matmul of the same input) already did.
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/programmatic_launch.h"
#include "common/error.h"

namespace loom::backend::cuda {

using passes::Opcode;

namespace {

// The step's launches use programmatic dependent launch when the plan asks for it; kernels run
// outside a plan's step (tests) launch plainly.
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool on) : was_(programmatic_launch()) { programmatic_launch() = on; }
  ~ProgrammaticLaunchScope() { programmatic_launch() = was_; }

 private:
  bool was_;
};

}  // namespace

void CudaPlan::enqueue(CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept) {
  const ProgrammaticLaunchScope pdl(programmatic_);
  const int32_t* d_keep = tables.pos_of_row - T + 3 * T;
  q8_[0].value = q8_[1].value = -1;
  roped_attention_ = -1;
  int64_t rows = T;
  auto drop_rows = [&] {
    if (kept == rows) return;
    for (int v : live_at_drop_) {
      gather_rows(value(v), d_keep, scratch_.get<float>(), kept, low_.cols[v], stream_);
      LOOM_CUDA_CHECK(cudaMemcpyAsync(value(v), scratch_.get(), size_t(kept * low_.cols[v]) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    rows = kept;
    q8_[0].value = q8_[1].value = -1;
  };
  if (!low_.has_mixing()) drop_rows();
  auto run_step = [&](int s) {
    const FusedStep& st = fusion_.steps[size_t(s)];
    if (!run_fused(st, kv, tables, T, rows))
      for (int i : st.ops) run_op(i, kv, tables, T, rows);
  };
  if (T == 1 && kept == 1 && persistent_) {  // decode_persistent: the embedding, then one kernel
    const auto it = persistent_steps_.find(step_key_);
    if (it != persistent_steps_.end()) {
      for (int s = 0; s < persistent_prefix_; ++s) run_step(s);
      it->second.launch(stream_);
      return;
    }
  }
  for (int s = 0; s < int(fusion_.steps.size()); ++s) {
    run_step(s);
    if (s == drop_step_) drop_rows();
  }
  if (rows != kept) loom::fail("logits have {} rows, {} wanted", rows, kept);
}

const Q8Buffer& CudaPlan::quantize_for(int v, int64_t K, int64_t rows) {
  for (const auto& b : q8_)
    if (b.value == v) return b;
  quantize_q8_1(value(v), K, rows, K, q8_[0].q(), q8_[0].ds(), stream_);
  q8_[0].value = v;
  return q8_[0];
}

CudaPlan::MatmulStep CudaPlan::matmul_step(const FusedStep& st, CudaKvStorage& kv, const StepTables& tables, int64_t T,
                                           int64_t rows) const {
  MatmulStep m;
  const passes::LoweredOp& first = low_.ops[size_t(st.ops[0])];
  m.K = weights_.at(first.in[1].weight).cols;
  m.input = first.in[0].value;
  const int n_mm = int(st.ops.size()) - (st.epilogue_op >= 0 ? 1 : 0);
  auto part_of = [&](int i) {
    const passes::LoweredOp& lo = low_.ops[size_t(i)];
    const DeviceWeight& w = weights_.at(lo.in[1].weight);
    return MatmulPart{w.type, w.packed, w.packed_row_bytes, w.rows, value(lo.out), lo.cols};
  };
  if (st.epilogue_op < 0) {
    for (int j = 0; j < n_mm; ++j) m.parts.push_back(part_of(st.ops[size_t(j)]));
    if (st.rope_attention >= 0 && rows == 1 && T == 1) {  // rope + KV store in the epilogue
      const passes::LoweredOp& at = low_.ops[size_t(st.rope_attention)];
      const passes::LoweredOp &rq = low_.ops[size_t(fusion_.def_op[size_t(at.in[0].value)])],
                              &rk = low_.ops[size_t(fusion_.def_op[size_t(at.in[1].value)])];
      m.rope_kv.rope = rope_spec(rq);
      m.rope_kv.kv = kv.layer(passes::attention_attrs(*at.op).layer);
      m.rope_kv.st = tables;
      for (int j = 0; j < n_mm; ++j) {
        const int out = low_.ops[size_t(st.ops[size_t(j)])].out;
        MatmulPart& p = m.parts[size_t(j)];
        if (out == rq.in[0].value) p.out = MatmulPart::Out::rope_q, p.y = value(rq.out), p.ldy = rq.cols;
        else if (out == rk.in[0].value) p.out = MatmulPart::Out::rope_k, p.y = nullptr;
        else if (out == at.in[2].value) p.out = MatmulPart::Out::kv_v, p.y = nullptr;
      }
      m.roped_attention = st.rope_attention;
    }
  } else {
    const passes::LoweredOp& ep = low_.ops[size_t(st.epilogue_op)];
    if (ep.code == Opcode::add) {  // one projection + its residual, into the add's output
      MatmulPart p = part_of(st.ops[0]);
      const int mm_out = low_.ops[size_t(st.ops[0])].out;
      const int res = ep.in[0].value == mm_out ? ep.in[1].value : ep.in[0].value;
      p.y = value(ep.out);
      p.ldy = ep.cols;
      p.residual = value(res);
      p.ld_residual = low_.cols[size_t(res)];
      m.parts.push_back(p);
    } else {  // gate and up, into the gated op's output
      const int gate = low_.ops[size_t(st.ops[0])].out == ep.in[0].value ? st.ops[0] : st.ops[1];
      const int up = gate == st.ops[0] ? st.ops[1] : st.ops[0];
      m.parts = {part_of(gate), part_of(up)};
      m.parts[0].y = value(ep.out);
      m.parts[0].ldy = ep.cols;
      m.e = ep.code == Opcode::swiglu ? MatmulEpilogue::swiglu : MatmulEpilogue::geglu;
      m.gated_q8 = fusion_.gated_q8[size_t(st.epilogue_op)];
    }
  }
  return m;
}

bool CudaPlan::run_fused(const FusedStep& st, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t rows) {
  if (st.kind == FusedStep::Kind::matmuls) {
    if (!q8_path(rows)) return false;
    const MatmulStep m = matmul_step(st, kv, tables, T, rows);
    const Q8Buffer& x = quantize_for(m.input, m.K, rows);
    Q8Buffer& spare = &x == &q8_[0] ? q8_[1] : q8_[0];  // for the output's q8_1 form
    GatedQ8 gq8;
    if (m.gated_q8) gq8 = {spare.q(), spare.ds(), gated_counters_.get<int>()};
    if (m.roped_attention >= 0) roped_attention_ = m.roped_attention;
    matmul_q8_parts(m.parts.data(), int(m.parts.size()), m.e, m.K, x.q(), x.ds(), rows, stream_, gq8, mma(), gemv_warps_,
                    m.roped_attention >= 0 ? &m.rope_kv : nullptr);
    if (gq8.codes) spare.value = low_.ops[size_t(st.epilogue_op)].out;
    return true;
  }
  if (st.kind == FusedStep::Kind::rope_attention) {
    const passes::LoweredOp& at = low_.ops[size_t(st.ops.back())];
    if (rows != T) loom::fail("%{}: attention after rows were dropped", at.op->result);
    // ops: the two ropes (in program order), then the attention; the one it reads as q.
    const int rq = low_.ops[size_t(st.ops[0])].out == at.in[0].value ? st.ops[0] : st.ops[1];
    const int rk = rq == st.ops[0] ? st.ops[1] : st.ops[0];
    const passes::LoweredOp &q = low_.ops[size_t(rq)], &k = low_.ops[size_t(rk)];
    const auto aa = passes::attention_attrs(*at.op);
    const RopeSpec rs = rope_spec(q);
    const KvView& view = kv.layer(aa.layer);
    if (roped_attention_ == st.ops.back()) roped_attention_ = -1;  // the q/k/v launch did it
    else
      rope_kv_store(rs, value(q.in[0].value), aa.n_head, value(q.out), value(k.in[0].value), value(at.in[2].value), view,
                    tables, rows, stream_);
    const bool q8 = fusion_.attention_q8[size_t(st.ops.back())] && q8_path(rows);
    attention(attention_shape(*at.op), view, tables, value(q.out), value(at.out), rows, stream_, attn_scratch_.get<float>(),
              attn_scratch_.bytes() / sizeof(float), q8 ? q8_[0].q() : nullptr, q8 ? q8_[0].ds() : nullptr,
              attn_counters_.get<unsigned>());
    if (q8) q8_[0].value = at.out;
    return true;
  }
  return false;
}

void CudaPlan::prepare_persistent(CudaKvStorage& kv, const StepTables& tables) {
  if (persistent_steps_.count(step_key_)) return;
  PersistentStep ps;
  const std::string why = build_persistent(kv, tables, ps);
  if (!why.empty()) {  // a property of the program: every one-row step runs launched, said once
    persistent_ = false;
    explain_.push_back("decode_persistent: one-row steps run launched: " + why);
    fmt::print(stderr, "warning: the schedule asks for decode_persistent; one-row steps run launched: {}\n", why);
    return;
  }
  ps.upload();
  if (persistent_steps_.size() >= 32) persistent_steps_.clear();
  persistent_steps_.emplace(step_key_, std::move(ps));
}

// The phases of a one-row step after its embedding: each norm_q8 norm joins the matmuls that read
// it (their blocks stage the normalised row), each matmuls step is a phase, each attention (its
// ropes and KV store done by the q/k/v phase) an attention phase and, over several chunks, a
// merge. Anything else keeps the step launched, and the reason is returned.
std::string CudaPlan::build_persistent(CudaKvStorage& kv, const StepTables& tables, PersistentStep& out) {
  if (!q8_path(1)) return "one-row matmuls run on the GEMM (gemm_rows = 0)";
  const auto& steps = fusion_.steps;
  size_t s = 0;
  while (s < steps.size() && steps[s].kind == FusedStep::Kind::op && low_.ops[size_t(steps[s].ops[0])].code == Opcode::embed)
    ++s;
  persistent_prefix_ = int(s);
  struct Norm {
    int in = -1, out = -1;
    const float* w = nullptr;
    float eps = 0;
  } norm;
  int roped = -1;
  auto is_packed_matmul = [&](const FusedStep& st) {
    if (st.kind != FusedStep::Kind::op) return false;
    const passes::LoweredOp& lo = low_.ops[size_t(st.ops[0])];
    return lo.code == Opcode::matmul && weights_.at(lo.in[1].weight).packed;
  };
  for (; s < steps.size(); ++s) {
    const FusedStep& st = steps[s];
    if (st.kind == FusedStep::Kind::op && !is_packed_matmul(st)) {
      const int i = st.ops[0];
      const passes::LoweredOp& lo = low_.ops[size_t(i)];
      if (lo.code == Opcode::rms_norm && fusion_.norm_q8[size_t(i)] && norm.out < 0) {
        const DeviceWeight& w = weight(lo.in[1], *lo.op);
        if (w.cols != lo.cols) return fmt::format("%{}: a norm weight narrower than its row", lo.op->result);
        norm = {lo.in[0].value, lo.out, reinterpret_cast<const float*>(w.data), float(passes::norm_eps(*lo.op))};
        continue;
      }
      return fmt::format("%{} ({}) has no phase of its own", lo.op->result, lo.op->opcode);
    }
    if (st.kind == FusedStep::Kind::matmuls || is_packed_matmul(st)) {  // a lone matmul (the logits) too
      const MatmulStep m = matmul_step(st, kv, tables, 1, 1);
      PersistentMatmul pm;
      pm.parts = m.parts;
      pm.e = m.e;
      pm.K = m.K;
      pm.rope = m.roped_attention >= 0 ? &m.rope_kv : nullptr;
      if (norm.out >= 0) {
        if (m.input != norm.out) return "a norm whose row the matmuls after it do not read";
        for (size_t i = 0; i < low_.ops.size(); ++i)  // its f32 output is never written: no other reader
          for (const auto& o : low_.ops[i].in)
            if (o.value == norm.out && std::find(st.ops.begin(), st.ops.end(), int(i)) == st.ops.end())
              return fmt::format("%{}: a norm read by more than the matmuls after it", low_.ops[i].op->result);
        pm.x = value(norm.in);
        pm.norm = norm.w;
        pm.eps = norm.eps;
        norm = {};
      } else {
        pm.x = value(m.input);
      }
      if (std::string why = PersistentStep::unsupported(pm); !why.empty()) return why;
      out.add(pm);
      roped = m.roped_attention;
      continue;
    }
    const passes::LoweredOp& at = low_.ops[size_t(st.ops.back())];  // rope_attention
    if (roped != st.ops.back()) return "an attention whose ropes the q/k/v launch does not do (neox rotary pairs)";
    const int rq = low_.ops[size_t(st.ops[0])].out == at.in[0].value ? st.ops[0] : st.ops[1];
    PersistentAttention pa;
    pa.a = attention_shape(*at.op);
    pa.kv = kv.layer(passes::attention_attrs(*at.op).layer);
    pa.st = tables;
    pa.q = value(low_.ops[size_t(rq)].out);
    pa.out = value(at.out);
    pa.scratch = attn_scratch_.get<float>();
    pa.chunks = decode_chunks(pa.a, pa.kv, tables, 1, attn_scratch_.bytes() / sizeof(float));
    if (pa.chunks < 1) return "an attention without the decode kernel";
    if (std::string why = PersistentStep::unsupported(pa); !why.empty()) return why;
    out.add(pa);
    roped = -1;
  }
  if (norm.out >= 0) return "a norm at the end of the step";
  return "";
}

AttentionShape CudaPlan::attention_shape(const ir::Op& attention) const {
  const auto aa = passes::attention_attrs(attention);
  AttentionShape a{int(aa.n_head), int(aa.n_kv_head), int(aa.head_dim), int(aa.value_dim), int(aa.window),
                   float(aa.scale), float(aa.softcap)};
  a.tensor_cores = attention_mma_;
  a.mma_shared_kv = attention_mma_shared_;
  a.merge_in_kernel = merge_in_kernel_;
  return a;
}

RopeSpec CudaPlan::rope_spec(const passes::LoweredOp& rope) const {
  const auto ra = passes::rope_attrs(*rope.op);
  RopeSpec rs{ra.head_dim, ra.n_rot, float(ra.base), float(ra.freq_scale), nullptr, ra.neox};
  if (rope.in.size() > 2 && rope.in[2].weight) rs.ff = reinterpret_cast<const float*>(weight(rope.in[2], *rope.op).data);
  return rs;
}

void CudaPlan::run_op(int i, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t rows) {
  const auto& lo = low_.ops[size_t(i)];
  const ir::Op& op = *lo.op;
  const int32_t* d_tok = tables.pos_of_row - T;
  const int32_t* d_pos = tables.pos_of_row;
  float* out = value(lo.out);
  auto in = [&](int j) -> const float* {
    const int v = lo.in.at(size_t(j)).value;
    if (v < 0) loom::fail("line {}: %{}: operand {} must be a value", op.line, op.result, j + 1);
    return value(v);
  };
  auto second = [&](int64_t& b_rows) -> const float* {
    if (lo.in.at(1).weight) {
      b_rows = 1;
      return reinterpret_cast<const float*>(weight(lo.in[1], op).data);
    }
    b_rows = rows;
    return in(1);
  };
  switch (lo.code) {
    case Opcode::embed: {
      const DeviceWeight& t = weight(lo.in[0], op);
      embed_rows(t.type, t.data, t.row_bytes, t.rows, t.cols, d_tok, rows, out, stream_);
      break;
    }
    case Opcode::rms_norm: {
      const DeviceWeight& w = weight(lo.in[1], op);
      const float* wf = reinterpret_cast<const float*>(w.data);
      if (fusion_.norm_q8[size_t(i)] && q8_path(rows)) {  // the matmuls after it read q8_1
        rms_norm_q8(in(0), wf, float(passes::norm_eps(op)), out, rows, lo.cols, q8_[0].q(), q8_[0].ds(), stream_);
        q8_[0].value = lo.out;
      } else {
        rms_norm(in(0), wf, float(passes::norm_eps(op)), out, rows, lo.cols, w.cols, stream_);
      }
      break;
    }
    case Opcode::matmul: {
      const DeviceWeight& w = weight(lo.in[1], op);
      if (!q8_path(rows)) {
        const __half* wh = static_cast<const __half*>(w.f16);
        __half* xh = gemm_x_.get<__half>();
        f32_to_f16(in(0), rows * w.cols, xh, stream_);
        if (!wh) {  // dequantized for this step (gemm_f16_weights keeps copies instead)
          __half* tile = gemm_w_.get<__half>();
          if (w.packed) weights_to_f16(w.type, true, w.packed, w.packed_row_bytes, w.rows, w.cols, tile, stream_);
          else weights_to_f16(w.type, false, w.data, w.row_bytes, w.rows, w.cols, tile, stream_);
          wh = tile;
        }
        gemm_->f16(wh, xh, w.rows, rows, w.cols, out, lo.cols);
      } else if (w.packed) {
        // q, k and v (gate and up) read one input: it is quantized once for all of them.
        const Q8Buffer& x = quantize_for(lo.in[0].value, w.cols, rows);
        const MatmulPart part{w.type, w.packed, w.packed_row_bytes, w.rows, out, lo.cols};
        matmul_q8_parts(&part, 1, MatmulEpilogue::store, w.cols, x.q(), x.ds(), rows, stream_, {}, mma(), gemv_warps_);
      } else {
        matmul_rows(w.type, w.data, w.row_bytes, w.rows, w.cols, in(0), w.cols, rows, out, lo.cols, stream_);
      }
      break;
    }
    case Opcode::add: case Opcode::mul: {
      int64_t br = 0;
      const float* b = second(br);
      binary(lo.code == Opcode::add ? Binary::add : Binary::mul, in(0), b, br, out, rows, lo.cols, stream_);
      break;
    }
    case Opcode::swiglu: case Opcode::geglu:
      binary(lo.code == Opcode::swiglu ? Binary::swiglu : Binary::geglu, in(0), in(1), rows, out, rows, lo.cols, stream_);
      break;
    case Opcode::scale: scale(in(0), float(passes::scalar_attr(op)), out, rows * lo.cols, stream_); break;
    case Opcode::softcap: softcap(in(0), float(passes::scalar_attr(op)), out, rows * lo.cols, stream_); break;
    case Opcode::slice: {
      const auto sa = passes::slice_attrs(op);
      slice(in(0), low_.cols[lo.in[0].value], sa.start, out, rows, lo.cols, stream_);
      break;
    }
    case Opcode::rope: {
      const auto ra = passes::rope_attrs(op);
      const float* ff = lo.in.size() > 2 && lo.in[2].weight ? reinterpret_cast<const float*>(weight(lo.in[2], op).data) : nullptr;
      rope(in(0), d_pos, out, rows, lo.cols, ra.head_dim, ra.n_rot, float(ra.base), float(ra.freq_scale), ff, ra.neox,
           stream_);
      break;
    }
    case Opcode::attention: {
      if (rows != T) loom::fail("%{}: attention after rows were dropped", op.result);
      const auto aa = passes::attention_attrs(op);
      const KvView& view = kv.layer(aa.layer);
      kv_store(view, tables, in(1), in(2), rows, stream_);
      const bool q8 = fusion_.attention_q8[size_t(i)] && q8_path(rows);
      attention(attention_shape(op), view, tables, in(0), out, rows, stream_, attn_scratch_.get<float>(),
                attn_scratch_.bytes() / sizeof(float), q8 ? q8_[0].q() : nullptr, q8 ? q8_[0].ds() : nullptr,
                attn_counters_.get<unsigned>());
      if (q8) q8_[0].value = lo.out;
      break;
    }
  }
}

}  // namespace loom::backend::cuda
