// FastPlan: a compiled program of the fast CPU backend (see plan.h for the step model).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/fast/fast_options.h"
#include "backend/cpu/fast/plan.h"
#include "backend/cpu/fast/repack.h"

namespace loom::backend::cpu::fast {

class FastPlan final : public Plan {
 public:
  FastPlan(const ir::Module& m, const WeightSource& ws, const FastOptions& o);  // fast_compile.cpp
  void run(const StepBatch& batch, KvStorage& kv, float* logits_out) override;  // fast_plan.cpp
  std::unique_ptr<KvStorage> allocate_kv(int32_t n_blocks, int32_t block_size, KvElem elem) const override {
    return std::make_unique<HostKvStorage>(layers_, n_blocks, block_size, elem);
  }
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<KvLayerShape>& kv_layers() const override { return layers_; }
  int threads() const override { return pool_.size(); }
  std::vector<std::string> explain() const override { return explain_; }

 private:
  const float* dense_of(const gguf::TensorInfo* t);
  void allocate_slots(int n_values, const std::vector<int>& last_use, const std::vector<int>& quant_last_use);
  void drop_rows(Exec& e);
  void dump(const Step& s, const Exec& e) const;

  FastOptions opt_;
  std::vector<std::string> explain_;  // written by the constructor
  SpinPool pool_;
  std::vector<Step> steps_;
  std::vector<Slot> slots_, quant_slots_;
  int64_t arena_row_bytes_ = 0;
  std::vector<uint8_t> arena_;
  int64_t capacity_ = 0;
  std::vector<RopeConfig> ropes_;
  std::vector<std::vector<float>> rope_tables_;
  std::vector<uint8_t> rope_ready_;
  std::vector<std::vector<float>> scratch_;
  std::map<const gguf::TensorInfo*, std::vector<float>> dense_;
  std::map<const gguf::TensorInfo*, std::pair<gguf::TensorType, const uint8_t*>> repacked_;  // in packed_arena_
  std::map<const gguf::TensorInfo*, const uint8_t*> packed_;  // x8 groups (packed.h) in packed_arena_
  HugeArena packed_arena_;
  bool has_mixing_ = false;
  int drop_after_ = -1;            // step after which unwanted rows are dropped
  std::vector<int> live_at_drop_;  // values whose rows are compacted there
  int result_ = -1;
  bool direct_result_ = false;     // the result is written straight into logits_out
  int64_t vocab_ = 0;
  std::vector<KvLayerShape> layers_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<int64_t> keep_;
};

}  // namespace loom::backend::cpu::fast
