#include "runtime/session.h"

#include <algorithm>

#include "common/error.h"

namespace loom::runtime {

Session::Session(std::unique_ptr<backend::Plan> plan, SessionOptions opts)
    : plan_(std::move(plan)), opts_(opts), kv_(plan_->kv_layers(), KvCacheOptions{opts.kv_elem, opts.n_ctx, 1, 256}) {
  if (opts_.n_batch <= 0) loom::fail("batch size must be > 0, got {}", opts_.n_batch);
  last_.resize(plan_->vocab_size());
}

void Session::check_room(size_t n) const {
  if (int64_t(n_past_) + int64_t(n) > opts_.n_ctx)
    loom::fail("context length exceeded: {} tokens in the cache + {} new > context {} (raise -c)", n_past_, n,
               opts_.n_ctx);
}

std::span<const float> Session::prefill(std::span<const int32_t> tokens) {
  if (tokens.empty()) loom::fail("prefill needs at least one token");
  check_room(tokens.size());
  for (size_t i = 0; i < tokens.size(); i += opts_.n_batch) {
    const size_t n = std::min(tokens.size() - i, size_t(opts_.n_batch));
    auto batch = backend::StepBatch::sequence({tokens.begin() + i, tokens.begin() + i + n}, n_past_);
    plan_->run(batch, kv_, last_.data());
    n_past_ += int32_t(n);
  }
  return last_;
}

std::span<const float> Session::decode(int32_t token) { return prefill(std::span<const int32_t>(&token, 1)); }

std::vector<float> Session::evaluate(std::span<const int32_t> tokens, size_t from) {
  if (tokens.empty()) loom::fail("evaluate needs at least one token");
  if (from >= tokens.size()) loom::fail("evaluate: first scored row {} but only {} tokens", from, tokens.size());
  check_room(tokens.size());
  const size_t V = size_t(plan_->vocab_size());
  std::vector<float> out((tokens.size() - from) * V);
  size_t row = 0;
  for (size_t i = 0; i < tokens.size(); i += opts_.n_batch) {
    const size_t n = std::min(tokens.size() - i, size_t(opts_.n_batch));
    auto batch = backend::StepBatch::sequence({tokens.begin() + i, tokens.begin() + i + n}, n_past_, true);
    for (size_t j = 0; j < n; ++j) batch.want_logits[j] = i + j >= from;
    const size_t rows = batch.n_logit_rows();
    if (rows > 0) {
      plan_->run(batch, kv_, out.data() + row * V);
    } else {  // no row of this chunk is scored; run it for the cache, keep one row aside
      batch.want_logits.back() = 1;
      plan_->run(batch, kv_, last_.data());
    }
    row += rows;
    n_past_ += int32_t(n);
  }
  std::copy(out.end() - V, out.end(), last_.begin());
  return out;
}

void Session::rollback(int32_t pos) {
  if (pos < 0 || pos > n_past_) loom::fail("rollback to position {} but the session is at {}", pos, n_past_);
  n_past_ = pos;
  kv_.truncate(0, pos);
}

}  // namespace loom::runtime
