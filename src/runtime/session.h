// One sequence's generation state: the compiled plan, its KV cache and the position reached.
// prefill() feeds a prompt in chunks, decode() one token; both return the logits of the last
// token. evaluate() returns every position's logits (perplexity, speculative verification).
// rollback() forgets positions, so a rejected draft or an edited chat turn re-uses the prefix.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "runtime/kv_cache.h"

namespace loom::runtime {

struct SessionOptions {
  int32_t n_ctx = 4096;
  backend::KvElem kv_elem = backend::KvElem::f16;
  int32_t n_batch = 512;  // most tokens per step during prefill
};

class Session {
 public:
  Session(std::unique_ptr<backend::Plan> plan, SessionOptions opts);

  std::span<const float> prefill(std::span<const int32_t> tokens);
  std::span<const float> decode(int32_t token);
  // Logits of tokens [from, size) of those fed, (size - from) x vocab, row-major; rows before
  // `from` skip the vocabulary projection (perplexity scores only the second half of a chunk).
  std::vector<float> evaluate(std::span<const int32_t> tokens, size_t from = 0);

  int32_t position() const { return n_past_; }
  int32_t n_ctx() const { return opts_.n_ctx; }
  int64_t vocab_size() const { return plan_->vocab_size(); }
  // Keeps positions [0, pos); the next token goes to position pos.
  void rollback(int32_t pos);
  void reset() { rollback(0); }
  const backend::Plan& plan() const { return *plan_; }
  const KvCache& kv() const { return kv_; }

 private:
  void check_room(size_t n) const;
  std::unique_ptr<backend::Plan> plan_;
  SessionOptions opts_;
  KvCache kv_;
  int32_t n_past_ = 0;
  std::vector<float> last_;
};

}  // namespace loom::runtime
