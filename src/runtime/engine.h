// runtime::Engine: one compiled plan and one paged KV pool serving many sequences. Front ends
// (`loom run`, `loom chat`, a server, a benchmark) submit requests and one thread drives
// step(); each step is one StepBatch mixing decode tokens of running sequences with prefill
// chunks of new ones (scheduler.h), and reports what every request produced (request.h).
//
// Admission: submit() refuses up front a request that could never run (empty prompt, token
// outside the vocabulary, prompt longer than the context, more KV blocks than the pool has).
// Others wait in a queue and are admitted in order once every block they may need —
// prompt + max_tokens positions, less what the prefix cache already holds — can be reserved
// (block_allocator.h). There is no preemption: a running sequence never runs out of blocks,
// so a step never fails for want of memory.
//
// Prefix sharing: at admission the prompt's full blocks are looked up in the prefix cache
// (prefix_cache.h); those found are shared by reference count and not computed again. A
// request with cache_prefix set indexes each block it fills, and its blocks stay cached after
// it ends (evicted least recently used first when the pool needs them).
//
// Threads: submit(), cancel() and wait_for_work() may be called from any thread (a mutex
// guards the incoming queue). step(), the inspection calls, evaluate() and DirectSequence run
// on the one thread that drives the engine. A cancellation takes effect at the start of the
// next step(): the request's blocks go back to the pool before anything else runs.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "runtime/block_allocator.h"
#include "runtime/prefix_cache.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/spec/draft_gain.h"
#include "text/stream_decoder.h"
#include "text/tokenizer.h"

namespace loom::runtime {

struct StepSlice;  // scheduler.h

struct EngineOptions {
  int32_t n_ctx = 4096;      // positions one sequence may hold
  int32_t max_seqs = 1;      // sequences running at once
  int32_t n_batch = 512;     // tokens per step at most
  int32_t block_size = 32;   // positions per KV block (a prefix is shared in whole blocks)
  int32_t n_blocks = 0;      // KV pool size; 0: max_seqs * ceil(n_ctx / block_size)
  backend::KvElem kv_elem = backend::KvElem::f16;
};

class Engine {
 public:
  // `tok` (may be null: no text in events, no end-of-generation tokens) must outlive the engine.
  Engine(std::unique_ptr<backend::Plan> plan, EngineOptions opts, const text::Tokenizer* tok = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Any thread.
  Submitted submit(Request r);
  void cancel(RequestId id);
  // Blocks until a request or a cancellation is waiting, or the timeout passes; true if so.
  bool wait_for_work(std::chrono::milliseconds timeout);

  // The driving thread.
  std::vector<Event> step();
  bool idle() const;  // nothing queued, running or waiting to be cancelled

  const EngineOptions& options() const { return opts_; }
  int64_t vocab_size() const { return vocab_; }
  int threads() const { return plan_->threads(); }
  size_t kv_bytes() const { return kv_->bytes(); }
  int32_t n_running() const { return int32_t(running_.size()); }
  int32_t n_waiting() const { return int32_t(waiting_.size()); }
  int32_t blocks_in_use() const { return alloc_.in_use(); }      // referenced by a sequence
  int32_t blocks_cached() const { return cache_.n_parked(); }    // kept for prefix re-use only
  int32_t block_refs(int32_t block) const { return alloc_.ref_count(block); }
  // The block table of a running request (empty when it is not running).
  std::vector<int32_t> block_table(RequestId id) const;
  // Tokens computed by steps since the engine started (prompt chunks and decode tokens).
  int64_t evaluated_tokens() const { return evaluated_; }

  // Logits of every position of `tokens` (rows [first_row, n)), evaluated as a fresh sequence
  // outside the scheduler: the perplexity, logits and benchmark path.
  std::vector<float> evaluate(std::span<const int32_t> tokens, size_t first_row = 0);
  // Logits of every position of `tokens` cut into n_seqs consecutive parts, each a fresh
  // sequence, their rows sharing steps as a server's do: each step takes one row of part 0 (a
  // decode beside the others) and up to (n_batch - 1) / (n_seqs - 1) rows of each other part (a
  // prompt's chunk). Rows come back in the order of `tokens`. What the backends' multi-sequence
  // steps are checked with (loom logits --sequences).
  std::vector<float> evaluate_side_by_side(std::span<const int32_t> tokens, int32_t n_seqs);

 private:
  friend class DirectSequence;
  struct Sequence;
  struct Incoming {
    RequestId id;
    Request req;
    std::chrono::steady_clock::time_point submitted;
  };
  std::string refusal(const Request& r) const;
  void check_tokens(std::span<const int32_t> tokens) const;  // the direct paths: throws on an id outside the vocabulary
  int32_t blocks_for(int32_t positions) const { return (positions + opts_.block_size - 1) / opts_.block_size; }
  void take_incoming(std::vector<Event>& events);
  bool admit(Sequence& s);
  void finish(Sequence& s, Finish why, std::vector<Event>& events, std::string error = {}, std::string text = {},
              int32_t token = -1);
  void index_full_blocks(Sequence& s);
  // From the row's logits, or from its top entries alone when the step asked the plan for those.
  void sample(Sequence& s, const float* logits, std::span<const backend::TopLogit> top, std::vector<Event>& events);
  int32_t step_top_k(const std::vector<StepSlice>& slices) const;
  bool emit(Sequence& s, int32_t token, const float* logits, std::vector<Event>& events);
  void propose(Sequence& s);  // speculative decoding: this step's drafts
  void verify(Sequence& s, const float* rows, std::vector<Event>& events);
  // Takes reserved blocks until `table` covers positions [0, n_pos).
  void grow(std::vector<int32_t>& table, int32_t& reserved, int32_t n_pos);

  std::unique_ptr<backend::Plan> plan_;
  EngineOptions opts_;
  const text::Tokenizer* tok_;
  int64_t vocab_ = 0;
  std::unique_ptr<backend::KvStorage> kv_;
  PrefixCache cache_;
  BlockAllocator alloc_;

  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Incoming> incoming_;
  std::vector<RequestId> cancels_;
  RequestId next_id_ = 1;

  // Decode step time by row count: what drafts cost (spec/draft_gain.h). Before the sequences,
  // whose drafters point at it.
  spec::StepCost step_cost_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  size_t rotate_ = 0;
  int64_t evaluated_ = 0;
  std::vector<float> logits_;
  std::vector<backend::TopLogit> top_;
  int direct_open_ = 0;
};

// A sequence fed token lists directly, outside the scheduler (the thread that drives the
// engine): perplexity, teacher-forced logits, benchmarks. Its blocks come from the engine's
// pool, never from those reserved for requests, and go back at reset() or destruction.
class DirectSequence {
 public:
  explicit DirectSequence(Engine& e) : e_(e) { ++e_.direct_open_; }
  ~DirectSequence();
  DirectSequence(const DirectSequence&) = delete;
  DirectSequence& operator=(const DirectSequence&) = delete;

  // Evaluates `tokens` at the positions after those fed before, in n_batch chunks, and returns
  // the logits of rows [first_row, n) of them, row-major; by default the last row only.
  // Throws loom::Error when the context or the pool's unreserved blocks run out.
  std::vector<float> feed(std::span<const int32_t> tokens, size_t first_row = SIZE_MAX);
  // The same into `out`, resized to the rows wanted: a caller feeding token after token keeps
  // one buffer (a fresh vocabulary-sized vector a token is ~0.1 ms of zeroing and page faults).
  void feed(std::span<const int32_t> tokens, std::vector<float>& out, size_t first_row = SIZE_MAX);
  int32_t position() const { return n_past_; }
  // Keeps positions [0, pos) (a rejected draft, an edited turn); blocks past them go back.
  void rollback(int32_t pos);
  void reset() { rollback(0); }

 private:
  Engine& e_;
  std::vector<int32_t> blocks_;
  int32_t n_past_ = 0;
};

}  // namespace loom::runtime
