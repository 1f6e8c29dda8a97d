// The narrow boundary between "what to compute" (a verified ir::Module) and "where" (a
// backend). A Backend says which ops it can run and compiles a module, with its weights bound,
// into a Plan; a Plan executes one step: a batch of tokens (each with its position, its
// sequence and whether its logits are wanted) against KV storage it allocated itself
// (kv_store.h: the runtime decides which blocks hold what, the plan owns the memory), writing
// logits.
//
// One step may carry several tokens of one sequence (prefill; speculative verification) and
// tokens of several sequences (continuous batching). Attention of a token sees only keys of
// its own sequence at positions <= its own.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_store.h"
#include "backend/schedule.h"
#include "gguf/file.h"
#include "ir/module.h"

namespace loom::backend {

// The weights of a module: its `weight @x = gguf "name"` bindings resolved against one GGUF
// file. Binding checks every weight exists with the declared shape and element type
// (port::check_bindings, the one place bindings are checked).
class WeightSource {
 public:
  struct Bound {
    const ir::Weight* decl = nullptr;
    const gguf::TensorInfo* tensor = nullptr;
  };
  // Throws loom::Error listing every weight that does not bind. The file must outlive the source.
  static WeightSource bind(const ir::Module& m, const gguf::File& file);
  const Bound& at(const std::string& weight_name) const;  // throws for an unknown name
  const gguf::File& file() const { return *file_; }

 private:
  const gguf::File* file_ = nullptr;
  std::vector<std::pair<std::string, Bound>> bound_;  // sorted by name
};

struct CompileOptions {
  int threads = 0;  // 0: the schedule's `threads`, else hardware concurrency
};

// One step's tokens. positions/seq_ids/want_logits are per token; empty seq_ids means every
// token is in sequence 0, empty want_logits means only the last token's logits.
// block_tables[s] is sequence s's block table: the KV storage block holding its positions
// [i * block_size, (i + 1) * block_size) at index i. It must cover every position up to each
// of the sequence's tokens in this step; the spans point into the caller's tables.
struct StepBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_ids;
  std::vector<uint8_t> want_logits;
  std::vector<std::span<const int32_t>> block_tables;

  size_t size() const { return tokens.size(); }
  int32_t seq(size_t i) const { return seq_ids.empty() ? 0 : seq_ids[i]; }
  bool wants(size_t i) const { return want_logits.empty() ? i + 1 == tokens.size() : want_logits[i] != 0; }
  size_t n_logit_rows() const;
  void validate() const;  // throws on mismatched lengths or negative positions

  // Tokens of one sequence at consecutive positions from `start`; logits for the last or all.
  static StepBatch sequence(std::vector<int32_t> tokens, int32_t start, bool all_logits = false,
                            int32_t seq = 0);
};

// One of a logits row's largest entries (Plan::run_top).
struct TopLogit {
  int32_t id;
  float logit;
};

// The order of run_top's entries: most likely first and, among equal logits, lowest id first
// (the order greedy and top-k sampling see, runtime/sampler.h).
inline bool ranks_before(const TopLogit& a, const TopLogit& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The k largest entries of a row (1 <= k <= row.size()) in ranks_before's order: the
// definition every backend's run_top matches.
void top_logits(std::span<const float> row, int32_t k, TopLogit* out);

class Plan {
 public:
  virtual ~Plan() = default;
  // Storage for a pool of n_blocks blocks of block_size positions of every layer in
  // kv_layers(), in this backend's memory.
  virtual std::unique_ptr<KvStorage> allocate_kv(int32_t n_blocks, int32_t block_size, KvElem elem) const = 0;
  // Runs the step; `logits_out` receives n_logit_rows() rows of vocab_size() floats, in token
  // order. Writes this step's keys and values into `kv` (storage from allocate_kv) first, at
  // the rows the batch's block tables name.
  virtual void run(const StepBatch& batch, KvStorage& kv, float* logits_out) = 0;
  // Runs the step as run() does but gives of each logit row only its k largest entries
  // (top_logits' order; 1 <= k <= vocab_size()): n_logit_rows() * k entries, row by row. What
  // greedy and top-k sampling read, without moving whole rows. This default runs run() and
  // selects on the host; a device backend selects where the logits are.
  virtual void run_top(const StepBatch& batch, KvStorage& kv, int32_t k, TopLogit* out);
  virtual int64_t vocab_size() const = 0;
  // The KV geometry the plan's attention ops need, one entry per cache layer.
  virtual const std::vector<KvLayerShape>& kv_layers() const = 0;
  virtual int threads() const = 0;
  // The effective choices, one line each: global options, then per op (kernel and layout of
  // each matmul, grouping, attention split), for `loom check --explain` and tests.
  virtual std::vector<std::string> explain() const = 0;

 private:
  std::vector<float> top_rows_;  // run_top's default: the whole rows it selects from
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool supports(const ir::Op& op) const = 0;
  // Every schedule key compile reads (backend/schedule.h); compile rejects any other.
  virtual const std::vector<ScheduleKey>& schedule_keys() const = 0;
  // Throws loom::Error naming the first unsupported op or unbindable weight.
  virtual std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& weights,
                                        const CompileOptions& opts) const = 0;
};

// The KV geometry a module's attention ops declare, indexed by their `layer` attribute.
std::vector<KvLayerShape> kv_layers_of(const ir::Module& m);

}  // namespace loom::backend
