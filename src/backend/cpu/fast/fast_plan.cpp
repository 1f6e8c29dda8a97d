// Running a compiled program: size the arena for this step's rows (it only grows), walk the
// steps, and drop the rows whose logits are not wanted right after the last attention op,
// so the final norm and the vocabulary projection run only for wanted rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/fast/fast_plan.h"
#include "backend/cpu/value_dump.h"
#include "common/error.h"
#include "passes/lowering.h"
#include "quant/simd/kernels.h"

namespace loom::backend::cpu::fast {

namespace {

// The schedule's `profile = true`: wall time per step kind, printed every 64 runs and at exit
// (for finding what dominates; the clock reads cost ~1% of a decode step).
struct Profile {
  bool on = false;
  double seconds[passes::kOpcodeCount] = {};
  int64_t calls[passes::kOpcodeCount] = {};
  int runs = 0;
  void report() {
    std::fprintf(stderr, "profile over %d runs:", runs);
    for (int k = 0; k < passes::kOpcodeCount; ++k)
      if (calls[k]) std::fprintf(stderr, " %s %.1f ms", passes::opcode_name(passes::Opcode(k)), seconds[k] * 1e3);
    std::fprintf(stderr, "\n");
    runs = 0;
    for (int k = 0; k < passes::kOpcodeCount; ++k) seconds[k] = 0, calls[k] = 0;
  }
  ~Profile() {
    if (on && runs) report();
  }
};
Profile& profile() {
  static Profile p;
  return p;
}

}  // namespace

// The schedule's `dump_dir`: every non-matmul step's result, as the reference writes them.
void FastPlan::dump(const Step& s, const Exec& e) const {
  dump_value(opt_.dump_dir, s.op->result, e.value(s.out), e.rows, s.cols, size_t(slots_[s.out].row_bytes));
}

void FastPlan::drop_rows(Exec& e) {
  const int64_t kept = int64_t(keep_.size());
  if (kept == e.rows) return;
  for (int v : live_at_drop_) {
    uint8_t* base = reinterpret_cast<uint8_t*>(e.value(v));
    const size_t rb = size_t(slots_[v].row_bytes);
    for (int64_t r = 0; r < kept; ++r)
      if (keep_[r] != r) std::memmove(base + r * rb, base + keep_[r] * rb, rb);
  }
  for (int64_t r = 0; r < kept; ++r) {
    tokens_[r] = tokens_[keep_[r]];
    positions_[r] = positions_[keep_[r]];
  }
  e.rows = kept;
}

void FastPlan::run(const StepBatch& batch, KvStorage& kv, float* logits_out) {
  batch.validate();
  loom::quant::simd::force_isa(opt_.isa);  // the level is process-wide; this plan's is its own
  const int64_t T = int64_t(batch.size());

  if (T > capacity_) {
    capacity_ = (T + 15) / 16 * 16;
    arena_.assign(size_t(capacity_ * arena_row_bytes_ + 64), 0);
  }
  tokens_.assign(batch.tokens.begin(), batch.tokens.end());
  positions_.assign(batch.positions.begin(), batch.positions.end());
  keep_.clear();
  for (int64_t t = 0; t < T; ++t)
    if (batch.wants(t)) keep_.push_back(t);
  std::fill(rope_ready_.begin(), rope_ready_.end(), 0);

  Exec e{pool_, batch, HostKvView::bind(kv, batch, layers_)};
  e.rows = T;
  e.tokens = tokens_.data();
  e.positions = positions_.data();
  // 64-byte aligned base: slot offsets are multiples of 64, so every slot starts aligned.
  e.arena = arena_.data() + ((64 - reinterpret_cast<uintptr_t>(arena_.data()) % 64) % 64);
  e.capacity = capacity_;
  e.slots = &slots_;
  e.quant_slots = &quant_slots_;
  e.result = result_;
  e.logits = direct_result_ ? logits_out : nullptr;
  e.ropes = &ropes_;
  e.rope_tables = &rope_tables_;
  e.rope_ready = &rope_ready_;
  e.scratch = &scratch_;

  if (!has_mixing_) drop_rows(e);
  Profile& prof = profile();
  prof.on |= opt_.profile;
  for (int i = 0; i < int(steps_.size()); ++i) {
    const Step& s = steps_[i];
    const auto t0 = opt_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    switch (s.kind) {
      case StepKind::embed: run_embed(s, e); break;
      case StepKind::rms_norm: run_rms_norm(s, e); break;
      case StepKind::add: case StepKind::mul: case StepKind::swiglu: case StepKind::geglu: run_binary(s, e); break;
      case StepKind::scale: case StepKind::softcap: run_unary(s, e); break;
      case StepKind::slice: run_slice(s, e); break;
      case StepKind::rope: run_rope(s, e); break;
      case StepKind::attention: run_attention(s, e); break;
      case StepKind::matmul: run_matmul(s, e); break;
    }
    if (opt_.profile) {
      prof.seconds[int(s.kind)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      prof.calls[int(s.kind)]++;
    }
    if (!opt_.dump_dir.empty() && s.kind != StepKind::matmul && s.op) dump(s, e);
    if (has_mixing_ && i == drop_after_) drop_rows(e);
  }
  if (opt_.profile && ++prof.runs == 64) prof.report();
  if (e.rows != int64_t(keep_.size())) loom::fail("logits have {} rows, {} wanted", e.rows, keep_.size());
  if (!direct_result_) std::memcpy(logits_out, e.value(result_), size_t(e.rows * vocab_) * sizeof(float));
}

namespace {

class FastBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // Every op of ir/ops.h has a step.
  bool supports(const ir::Op& op) const override { return passes::opcode_of(op.opcode).has_value(); }
  const std::vector<ScheduleKey>& schedule_keys() const override { return fast_schedule_keys(); }
  std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& ws, const CompileOptions& opts) const override {
    return std::make_unique<FastPlan>(m, ws, read_fast_options(m, opts));
  }
};

}  // namespace

}  // namespace loom::backend::cpu::fast

namespace loom::backend::cpu {
std::unique_ptr<Backend> make_fast_backend() { return std::make_unique<fast::FastBackend>(); }
}  // namespace loom::backend::cpu
