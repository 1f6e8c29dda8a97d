// Compiling a module for the reference backend resolves every operand to a value slot or a
// bound weight, finds each value's last use (so activations are freed early), and records
// where row-mixing ends: after the last attention op every op works row by row, so rows whose
// logits are not wanted are dropped there (a decode step computes the vocabulary projection
// for one row, not for the whole prompt).
#include <algorithm>
#include <cstring>
#include <string>
#include <map>

#include "backend/cpu/reference.h"
#include "backend/host_kv.h"
#include "backend/cpu/reference_kernels.h"
#include "backend/cpu/value_dump.h"
#include "common/error.h"
#include "passes/lowering.h"
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

// The reference backend's schedule keys: the thread count, and the dump of every value.
const std::vector<ScheduleKey>& reference_keys() {
  using Type = ScheduleKey::Type;
  static const std::vector<ScheduleKey> keys = {
      {"", "threads", Type::integer, 0, 1024, {}, int64_t(0), "worker threads (0: the hardware's concurrency)"},
      {"", "dump_dir", Type::text, 0, 0, {}, std::string(),
       "diagnosis: write every op's result as <dir>/<value>.f32 each step (empty: off)"},
  };
  return keys;
}

struct ReferenceOptions {
  int threads = 0;
  std::string dump_dir;
};

class ReferencePlan final : public Plan {
 public:
  ReferencePlan(const ir::Module& m, const WeightSource& ws, const ReferenceOptions& o);
  void run(const StepBatch& batch, KvStorage& kv, float* logits_out) override;
  std::unique_ptr<KvStorage> allocate_kv(int32_t n_blocks, int32_t block_size, KvElem elem) const override {
    return std::make_unique<HostKvStorage>(layers_, n_blocks, block_size, elem);
  }
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<KvLayerShape>& kv_layers() const override { return layers_; }
  int threads() const override { return pool_.size(); }
  std::vector<std::string> explain() const override;

 private:
  const float* dense_of(const gguf::TensorInfo* t);
  ThreadPool pool_;
  std::string dump_dir_;
  std::vector<CompiledOp> ops_;
  std::vector<KvLayerShape> layers_;
  std::map<const gguf::TensorInfo*, std::vector<float>> dense_;  // small weights as f32
  int n_slots_ = 0, tok_slot_ = 0, pos_slot_ = 1, result_slot_ = -1;
  size_t last_mixing_ = 0;  // index of the op after which rows may be dropped
  bool has_mixing_ = false;
  int64_t vocab_ = 0;
};

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

ReferencePlan::ReferencePlan(const ir::Module& m, const WeightSource& ws, const ReferenceOptions& o)
    : pool_(o.threads), dump_dir_(o.dump_dir) {
  const passes::Lowering low = passes::lower(m);
  tok_slot_ = low.tokens;
  pos_slot_ = low.positions;
  n_slots_ = int(low.cols.size());
  for (const auto& lo : low.ops) {
    CompiledOp c{lo.op, kernel_for(lo.code), {}, {}, {}, lo.out, lo.cols, {}};
    for (const auto& r : lo.in) {
      const gguf::TensorInfo* t = r.weight ? ws.at(r.weight->name).tensor : nullptr;
      if (t && !loom::quant::is_supported(t->type))
        loom::fail("weight @{}: element type {} has no reference kernel", r.weight->name, gguf::type_name(t->type));
      c.slot.push_back(r.value);
      c.weight.push_back(t);
      c.dense.push_back(t ? dense_of(t) : nullptr);
    }
    ops_.push_back(std::move(c));
  }
  has_mixing_ = low.has_mixing();
  last_mixing_ = has_mixing_ ? size_t(low.last_mixing) : 0;
  result_slot_ = low.result;
  const std::vector<int> last_use = passes::last_use(low);
  for (int s = 0; s < n_slots_; ++s)
    if (s != result_slot_ && last_use[s] >= 0) ops_[last_use[s]].free_after.push_back(s);
  vocab_ = low.cols[result_slot_];
  layers_ = kv_layers_of(m);
}

std::vector<std::string> ReferencePlan::explain() const {
  std::vector<std::string> out = {fmt::format("backend cpu-ref: threads {}, {} ops run one by one in program order, "
                                              "dump_dir {}", pool_.size(), ops_.size(), dump_dir_.empty() ? "off" : dump_dir_)};
  out.push_back(has_mixing_ ? fmt::format("rows whose logits are not wanted are dropped after op {} (%{})", last_mixing_,
                                          ops_[last_mixing_].op->result)
                            : "no attention: rows whose logits are not wanted are dropped before op 0");
  return out;
}

void ReferencePlan::run(const StepBatch& batch, KvStorage& kv, float* logits_out) {
  batch.validate();
  const int64_t T = int64_t(batch.size());

  std::vector<Tensor> values(n_slots_);
  values[tok_slot_] = {T, 1, {}, batch.tokens};
  values[pos_slot_] = {T, 1, {}, batch.positions};
  std::vector<int64_t> keep;  // rows that survive the drop
  for (int64_t t = 0; t < T; ++t)
    if (batch.wants(t)) keep.push_back(t);
  int64_t rows = T;
  StepContext ctx{pool_, batch, HostKvView::bind(kv, batch, layers_)};
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
    if (!dump_dir_.empty() && !out.f.empty()) dump_value(dump_dir_, c.op->result, out.f.data(), out.rows, out.cols, size_t(out.cols) * sizeof(float));
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
  bool supports(const ir::Op& op) const override { return passes::opcode_of(op.opcode).has_value(); }
  const std::vector<ScheduleKey>& schedule_keys() const override { return reference_keys(); }
  std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& ws, const CompileOptions& opts) const override {
    check_schedule(m, reference_keys(), "cpu-ref");
    const ScheduleReader r(m, reference_keys());
    ReferenceOptions o;
    o.threads = opts.threads > 0 ? opts.threads : int(r.integer("threads"));
    o.dump_dir = r.text("dump_dir");
    return std::make_unique<ReferencePlan>(m, ws, o);
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace loom::backend::cpu
