// Compiling a module for the reference backend resolves every operand to a value slot or a
// bound weight, finds each value's last use (so activations are freed early), and records
// where row-mixing ends: after the last attention op every op works row by row, so rows whose
// logits are not wanted are dropped there (a decode step computes the vocabulary projection
// for one row, not for the whole prompt).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>

#include "backend/cpu/reference.h"
#include "backend/cpu/reference_kernels.h"
#include "common/error.h"
#include "quant/quant.h"

namespace loom::backend::cpu {

namespace {

struct CompiledOp {
  const ir::Op* op;
  Kernel kernel;
  std::vector<int> slot;                          // value slot per operand, -1 for weights
  std::vector<const gguf::TensorInfo*> weight;    // per operand
  std::vector<const float*> dense;                // per operand
  int out_slot;
  int64_t out_cols;
  std::vector<int> free_after;                    // slots whose last use is this op
};

class ReferencePlan final : public Plan {
 public:
  ReferencePlan(const ir::Module& m, const WeightSource& ws, int threads);
  void run(const StepBatch& batch, KvStore& kv, float* logits_out) override;
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<KvLayerShape>& kv_layers() const override { return layers_; }
  int threads() const override { return pool_.size(); }

 private:
  const float* dense_of(const gguf::TensorInfo* t);
  void dump(const ir::Op& op, const Tensor& out) const;
  ThreadPool pool_;
  const char* dump_dir_ = std::getenv("LOOM_DUMP_DIR");  // debugging: every value, as raw f32
  std::vector<CompiledOp> ops_;
  std::vector<KvLayerShape> layers_;
  std::map<const gguf::TensorInfo*, std::vector<float>> dense_;  // small weights as f32
  int n_slots_ = 0, tok_slot_ = 0, pos_slot_ = 1, result_slot_ = -1;
  size_t last_mixing_ = 0;  // index of the op after which rows may be dropped
  bool has_mixing_ = false;
  int64_t vocab_ = 0;
};

// LOOM_DUMP_DIR=dir writes each op's result as dir/<name>.f32 (rows x cols, row-major, the last
// step's values overwrite the earlier ones) for comparing a run with another engine's tensors.
void ReferencePlan::dump(const ir::Op& op, const Tensor& out) const {
  if (out.f.empty()) return;
  const std::string path = std::string(dump_dir_) + "/" + op.result + ".f32";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(out.f.data(), sizeof(float), out.f.size(), f);
    std::fclose(f);
  }
}

// 1-D weights (norms, biases, rope frequency factors) are dequantized once at compile time.
const float* ReferencePlan::dense_of(const gguf::TensorInfo* t) {
  if (t->dims.size() > 1 && t->rows() > 1) return nullptr;
  auto [it, fresh] = dense_.try_emplace(t);
  if (fresh) {
    const int64_t n = int64_t(t->elements());
    it->second.resize(n);
    loom::quant::dequantize_row(t->type, t->data, it->second.data(), n);
  }
  return it->second.data();
}

ReferencePlan::ReferencePlan(const ir::Module& m, const WeightSource& ws, int threads) : pool_(threads) {
  const ir::Func* f = m.find_func("step");
  if (!f) loom::fail("module @{} has no func @step", m.name);
  if (f->params.size() != 2) loom::fail("@step must take (%tok, %pos), has {} parameters", f->params.size());
  if (f->results.size() != 1) loom::fail("@step must return the logits only, returns {} values", f->results.size());
  std::map<std::string, int, std::less<>> slots;
  for (const auto& p : f->params) {
    if (p.type.elem != ir::Elem::i32) loom::fail("@step parameter %{} must be i32", p.name);
    slots[p.name] = n_slots_++;
  }
  std::vector<int> last_use;
  for (size_t oi = 0; oi < f->body.size(); ++oi) {
    const ir::Op& op = f->body[oi];
    CompiledOp c{&op, find_kernel(op.opcode), {}, {}, {}, -1, 0, {}};
    if (!c.kernel) loom::fail("line {}: op {} is not supported by the reference CPU backend", op.line, op.opcode);
    for (const auto& o : op.operands) {
      if (o.kind == ir::Operand::Kind::weight) {
        const gguf::TensorInfo* t = ws.at(o.name).tensor;
        if (!loom::quant::is_supported(t->type))
          loom::fail("weight @{}: element type {} has no reference kernel", o.name, gguf::type_name(t->type));
        c.slot.push_back(-1);
        c.weight.push_back(t);
        c.dense.push_back(dense_of(t));
      } else {
        auto it = slots.find(o.name);
        if (it == slots.end()) loom::fail("line {}: %{} used before it is defined", op.line, o.name);
        c.slot.push_back(it->second);
        c.weight.push_back(nullptr);
        c.dense.push_back(nullptr);
        if (size_t(it->second) >= last_use.size()) last_use.resize(it->second + 1, -1);
        last_use[it->second] = int(oi);
      }
    }
    if (op.type.shape.size() != 2 || !op.type.shape[1].is_static())
      loom::fail("line {}: %{} must be [T x N] with a static N", op.line, op.result);
    if (slots.count(op.result)) loom::fail("line {}: %{} defined twice", op.line, op.result);
    c.out_slot = slots[op.result] = n_slots_++;
    c.out_cols = op.type.shape[1].value;
    if (op.opcode == "attention") {
      last_mixing_ = oi;
      has_mixing_ = true;
    }
    ops_.push_back(std::move(c));
  }
  auto rit = slots.find(f->results[0]);
  if (rit == slots.end()) loom::fail("@step returns %{} which is not defined", f->results[0]);
  result_slot_ = rit->second;
  last_use.resize(n_slots_, -1);
  for (int s = 0; s < n_slots_; ++s)
    if (s != result_slot_ && last_use[s] >= 0) ops_[last_use[s]].free_after.push_back(s);
  for (const auto& c : ops_)
    if (c.out_slot == result_slot_) vocab_ = c.out_cols;
  layers_ = kv_layers_of(m);
}

void ReferencePlan::run(const StepBatch& batch, KvStore& kv, float* logits_out) {
  batch.validate();
  const int64_t T = int64_t(batch.size());
  std::map<int32_t, int32_t> extent;  // per sequence: one past its highest position
  for (int64_t t = 0; t < T; ++t) extent[batch.seq(t)] = std::max(extent[batch.seq(t)], batch.positions[t] + 1);
  for (auto [seq, n] : extent) kv.reserve(seq, n);

  std::vector<Tensor> values(n_slots_);
  values[tok_slot_] = {T, 1, {}, batch.tokens};
  values[pos_slot_] = {T, 1, {}, batch.positions};
  std::vector<int64_t> keep;  // rows that survive the drop
  for (int64_t t = 0; t < T; ++t)
    if (batch.wants(t)) keep.push_back(t);
  int64_t rows = T;
  StepContext ctx{pool_, batch, kv};
  auto drop_rows = [&] {
    if (int64_t(keep.size()) == rows) return;
    for (auto& v : values) {
      if (v.rows != rows) continue;
      for (size_t r = 0; r < keep.size(); ++r) {
        if (!v.f.empty()) std::memmove(&v.f[r * v.cols], &v.f[keep[r] * v.cols], v.cols * sizeof(float));
        if (!v.i.empty()) v.i[r] = v.i[keep[r]];
      }
      v.rows = int64_t(keep.size());
      if (!v.f.empty()) v.f.resize(v.rows * v.cols);
      if (!v.i.empty()) v.i.resize(v.rows);
    }
    rows = int64_t(keep.size());
  };
  if (!has_mixing_) drop_rows();
  for (size_t oi = 0; oi < ops_.size(); ++oi) {
    const CompiledOp& c = ops_[oi];
    Tensor& out = values[c.out_slot];
    out.rows = rows;
    out.cols = c.out_cols;
    KernelArgs args{*c.op, {}, c.weight, c.dense, out, ctx};
    for (int s : c.slot) args.in.push_back(s < 0 ? nullptr : &values[s]);
    c.kernel(args);
    if (out.f.size() != size_t(out.rows * out.cols) && out.i.empty())
      loom::fail("%{}: kernel produced {} values for {}x{}", c.op->result, out.f.size(), out.rows, out.cols);
    if (dump_dir_) dump(*c.op, out);
    for (int s : c.free_after) values[s] = Tensor{};
    if (has_mixing_ && oi == last_mixing_) drop_rows();
  }
  const Tensor& logits = values[result_slot_];
  if (logits.rows != int64_t(keep.size())) loom::fail("logits have {} rows, {} wanted", logits.rows, keep.size());
  std::memcpy(logits_out, logits.f.data(), logits.f.size() * sizeof(float));
}

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "cpu-reference"; }
  bool supports(const ir::Op& op) const override { return find_kernel(op.opcode) != nullptr; }
  std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& ws, const CompileOptions& opts) const override {
    int threads = opts.threads;
    if (threads <= 0)
      for (const auto& e : m.schedule)
        if (e.opcode.empty())
          if (const ir::Attr* a = ir::find_attr(e.settings, "threads"); a && std::holds_alternative<int64_t>(a->value))
            threads = int(std::get<int64_t>(a->value));
    return std::make_unique<ReferencePlan>(m, ws, threads);
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace loom::backend::cpu
