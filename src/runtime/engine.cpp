#include "runtime/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"
#include "runtime/scheduler.h"
#include "runtime/spec/draft_length.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/verify.h"
#include "text/constrain/constraint.h"

namespace loom::runtime {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double rate(int32_t n, double s) { return s > 0 ? n / s : 0.0; }
}  // namespace

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::eog: return "eog";
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::cancelled: return "cancelled";
    case Finish::error: return "error";
  }
  return "?";
}

std::string RequestStats::speed_line() const {
  return fmt::format("prompt: {} tokens, {:.1f} t/s | generation: {} tokens, {:.1f} t/s", evaluated_tokens,
                     rate(evaluated_tokens, prompt_seconds), generated, rate(generated, gen_seconds));
}

struct Engine::Sequence {
  Sequence(RequestId i, Request r, Clock::time_point t) : id(i), req(std::move(r)), sampler(req.sampling), submitted(t) {}
  RequestId id;
  Request req;
  Sampler sampler;
  std::optional<text::StreamDecoder> stream;
  std::vector<int32_t> tokens;  // prompt, then each sampled token that is to be fed back
  int32_t n_computed = 0;       // positions whose KV rows are in the pool
  bool decoding = false;        // the prompt is done
  std::vector<int32_t> blocks;  // block table
  int32_t reserved = 0;         // blocks promised and not yet taken
  int32_t n_indexed = 0;        // leading blocks whose chain key is known (shared or indexed)
  BlockKey last_key = 0;        // the key of block n_indexed - 1 (0: none yet)
  RequestStats stats;
  Clock::time_point submitted, admitted, first_token;
  std::unique_ptr<spec::Drafter> drafter;  // speculative decoding, when the request asks
  spec::DraftLength draft_len;
  std::vector<int32_t> drafts;             // this step's, verified after the last token
};

Engine::Engine(std::unique_ptr<backend::Plan> plan, EngineOptions opts, const text::Tokenizer* tok)
    : plan_(std::move(plan)),
      opts_(opts),
      tok_(tok),
      alloc_((opts.n_ctx > 0 && opts.block_size > 0 && opts.max_seqs > 0)
                 ? (opts.n_blocks > 0 ? opts.n_blocks
                                      : opts.max_seqs * ((opts.n_ctx + opts.block_size - 1) / opts.block_size))
                 : 1,
             cache_) {
  if (opts_.n_ctx <= 0) loom::fail("engine: context length must be > 0, got {}", opts_.n_ctx);
  if (opts_.max_seqs <= 0) loom::fail("engine: max_seqs must be > 0, got {}", opts_.max_seqs);
  if (opts_.n_batch <= 0) loom::fail("engine: batch size must be > 0, got {}", opts_.n_batch);
  if (opts_.block_size <= 0) loom::fail("engine: block size must be > 0, got {}", opts_.block_size);
  opts_.n_blocks = alloc_.n_blocks();
  vocab_ = plan_->vocab_size();
  kv_ = plan_->allocate_kv(opts_.n_blocks, opts_.block_size, opts_.kv_elem);
}

Engine::~Engine() = default;

std::string Engine::refusal(const Request& r) const {
  if (r.prompt.empty()) return "empty prompt";
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab_)
      return fmt::format("prompt token {} (at {}) is outside the vocabulary of {}", r.prompt[i], i, vocab_);
  if (int64_t(r.prompt.size()) > opts_.n_ctx)
    return fmt::format("prompt of {} tokens does not fit the context of {} tokens (raise -c)", r.prompt.size(),
                       opts_.n_ctx);
  const int64_t positions = r.max_tokens < 0 ? opts_.n_ctx
                                             : std::min<int64_t>(opts_.n_ctx, int64_t(r.prompt.size()) +
                                                                                  std::max(0, r.max_tokens - 1));
  if (blocks_for(int32_t(positions)) > opts_.n_blocks)
    return fmt::format("needs {} KV blocks of {} positions ({} prompt tokens + {} to generate), the pool holds {}",
                       blocks_for(int32_t(positions)), opts_.block_size, r.prompt.size(),
                       r.max_tokens < 0 ? std::string("up to the context") : std::to_string(r.max_tokens),
                       opts_.n_blocks);
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs)
    return fmt::format("top_logprobs must be between 0 and {}, got {}", kMaxTopLogprobs, r.top_logprobs);
  try {
    Sampler check(r.sampling);
  } catch (const loom::Error& e) {
    return e.what();
  }
  return {};
}

Submitted Engine::submit(Request r) {
  Submitted out;
  out.refused = refusal(r);
  if (!out.ok()) return out;
  {
    std::lock_guard lock(queue_mu_);
    out.id = next_id_++;
    incoming_.push_back({out.id, std::move(r), Clock::now()});
  }
  queue_cv_.notify_one();
  return out;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(queue_mu_);
    cancels_.push_back(id);
  }
  queue_cv_.notify_one();
}

bool Engine::wait_for_work(std::chrono::milliseconds timeout) {
  std::unique_lock lock(queue_mu_);
  return queue_cv_.wait_for(lock, timeout, [&] { return !incoming_.empty() || !cancels_.empty(); });
}

bool Engine::idle() const {
  std::lock_guard lock(queue_mu_);
  return incoming_.empty() && cancels_.empty() && waiting_.empty() && running_.empty();
}

std::vector<int32_t> Engine::block_table(RequestId id) const {
  for (const auto& s : running_)
    if (s->id == id) return s->blocks;
  return {};
}

void Engine::take_incoming(std::vector<Event>& events) {
  std::deque<Incoming> in;
  std::vector<RequestId> cancels;
  {
    std::lock_guard lock(queue_mu_);
    in.swap(incoming_);
    cancels.swap(cancels_);
  }
  for (auto& r : in) waiting_.push_back(std::make_unique<Sequence>(r.id, std::move(r.req), r.submitted));
  for (RequestId id : cancels) {
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
      if ((*it)->id == id) {
        finish(**it, Finish::cancelled, events);
        waiting_.erase(it);
        break;
      }
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if ((*it)->id == id) {
        finish(**it, Finish::cancelled, events);
        running_.erase(it);
        break;
      }
  }
}

// Shares the prompt's cached full blocks and reserves the rest; false (nothing held) when the
// pool cannot promise them now.
bool Engine::admit(Sequence& s) {
  const auto& prompt = s.req.prompt;
  const int32_t bs = opts_.block_size;
  // At least the last prompt token is computed: its logits give the first token.
  const size_t max_shared = (prompt.size() - 1) / size_t(bs);
  std::vector<int32_t> shared;
  BlockKey parent = 0;
  int32_t parked = 0;
  for (size_t b = 0; b < max_shared; ++b) {
    std::span<const int32_t> toks(prompt.data() + b * bs, size_t(bs));
    const BlockKey key = chain_key(parent, toks);
    const int32_t block = cache_.find(key, parent, toks);
    if (block < 0) break;
    shared.push_back(block);
    parked += cache_.parked(block);
    parent = key;
  }
  const int32_t positions = s.req.max_tokens < 0
                                ? opts_.n_ctx
                                : int32_t(std::min<int64_t>(opts_.n_ctx, int64_t(prompt.size()) +
                                                                             std::max(0, s.req.max_tokens - 1)));
  const int32_t need = blocks_for(positions) - int32_t(shared.size());
  if (parked + need > alloc_.available()) return false;
  for (int32_t b : shared) alloc_.share(b);
  if (!alloc_.reserve(need)) loom::fail("KV pool: reservation failed after the check");  // unreachable
  s.blocks = shared;
  s.reserved = need;
  s.n_indexed = int32_t(shared.size());
  s.last_key = parent;
  s.n_computed = int32_t(shared.size()) * bs;
  s.tokens = prompt;
  for (int32_t t : prompt) s.sampler.accept(t);
  if (tok_) s.stream.emplace(*tok_);
  // A constrained request decodes plainly: verifying drafts would need the grammar's mask for
  // every row and a parse state to roll back.
  if (s.req.speculation.source && s.req.speculation.draft_max > 0 && !s.req.constraint) {
    s.drafter = s.req.speculation.source->make();
    s.drafter->set_step_cost(&step_cost_);
    s.draft_len = spec::DraftLength(s.req.speculation.draft_max);
  }
  s.stats.prompt_tokens = int32_t(prompt.size());
  s.stats.reused_tokens = s.n_computed;
  s.stats.evaluated_tokens = int32_t(prompt.size()) - s.n_computed;
  s.admitted = Clock::now();
  s.stats.queue_seconds = seconds(s.submitted, s.admitted);
  return true;
}

void Engine::grow(std::vector<int32_t>& table, int32_t& reserved, int32_t n_pos) {
  while (int32_t(table.size()) < blocks_for(n_pos)) {
    if (reserved <= 0) loom::fail("engine: a sequence outgrew its reservation");  // a bookkeeping bug
    table.push_back(alloc_.take_reserved());
    --reserved;
  }
}

void Engine::index_full_blocks(Sequence& s) {
  const int32_t bs = opts_.block_size;
  while ((s.n_indexed + 1) * bs <= s.n_computed) {
    std::span<const int32_t> toks(s.tokens.data() + size_t(s.n_indexed) * bs, size_t(bs));
    const BlockKey key = chain_key(s.last_key, toks);
    // A block another sequence already indexed under this key stays private to this one.
    cache_.insert(key, s.last_key, toks, s.blocks[size_t(s.n_indexed)]);
    s.last_key = key;
    ++s.n_indexed;
  }
}

void Engine::finish(Sequence& s, Finish why, std::vector<Event>& events, std::string error, std::string text,
                    int32_t token) {
  const auto now = Clock::now();
  if (s.req.cache_prefix && why != Finish::error) index_full_blocks(s);
  for (int32_t b : s.blocks) alloc_.release(b);
  s.blocks.clear();
  alloc_.unreserve(s.reserved);
  s.reserved = 0;
  if (s.stream) text += s.stream->finish();
  if (s.stats.generated > 0) s.stats.gen_seconds = seconds(s.first_token, now);
  else if (s.admitted != Clock::time_point{}) s.stats.prompt_seconds = seconds(s.admitted, now);
  events.push_back({s.id, token, std::move(text), why, std::move(error), s.stats, {}});
}

// Samples the sequence's next token from its logits row; reports it, and ends the request
// when the token or the limits say so.
void Engine::sample(Sequence& s, const float* logits, std::span<const backend::TopLogit> top,
                    std::vector<Event>& events) {
  if (s.stats.generated == 0) {
    s.first_token = Clock::now();
    s.stats.prompt_seconds = seconds(s.admitted, s.first_token);
  }
  if (s.req.max_tokens >= 0 && s.stats.generated >= s.req.max_tokens) {  // max_tokens 0: the prompt only
    finish(s, Finish::length, events);
    return;
  }
  auto* constraint = s.req.constraint.get();
  int32_t t = -1;
  try {
    if (constraint) {
      // The tokens this request may still generate: max_tokens', and in any case the context's
      // room, so a reply without max_tokens (a model repeating tool calls) still closes in time.
      int32_t left = opts_.n_ctx - s.n_computed;
      if (s.req.max_tokens >= 0) left = std::min(left, s.req.max_tokens - s.stats.generated);
      constraint->set_budget(left);
    }
    if (!top.empty()) {
      std::vector<Candidate> c(top.size());
      for (size_t i = 0; i < top.size(); ++i) c[i] = {top[i].id, top[i].logit};
      t = s.sampler.sample_top(std::move(c));
    } else {
      t = s.sampler.sample(std::span<const float>(logits, size_t(vocab_)), constraint ? constraint->mask().data() : nullptr);
    }
    if (constraint) constraint->accept(t);
  } catch (const loom::Error& e) {  // a grammar too ambiguous, or no token of the vocabulary fits
    return finish(s, Finish::error, events, fmt::format("constrained output: {}", e.what()));
  }
  emit(s, t, logits, events);
}

// Reports token t, chosen from `logits`; true when it ended the request.
bool Engine::emit(Sequence& s, int32_t t, const float* logits, std::vector<Event>& events) {
  s.sampler.accept(t);
  ++s.stats.generated;
  const size_t at = events.size();
  if (!s.req.ignore_eog && tok_ && tok_->vocab().is_eog(t)) {
    finish(s, Finish::eog, events, {}, {}, t);
  } else if (s.req.stop.count(t)) {
    finish(s, Finish::stop, events, {}, {}, t);
  } else {
    std::string piece = s.stream ? s.stream->push(t) : std::string();
    const bool at_limit = s.req.max_tokens >= 0 && s.stats.generated >= s.req.max_tokens;
    if (at_limit || s.n_computed >= opts_.n_ctx) {
      finish(s, Finish::length, events, {}, std::move(piece), t);
    } else if (s.req.constraint && s.req.constraint->finished()) {  // the grammar allows nothing more
      finish(s, Finish::stop, events, {}, std::move(piece), t);
    } else {
      s.tokens.push_back(t);
      events.push_back({s.id, t, std::move(piece), Finish::none, {}, {}, {}});
    }
  }
  if (s.req.logprobs) events[at].logprobs = token_logprobs({logits, size_t(vocab_)}, t, s.req.top_logprobs);
  return events[at].finish != Finish::none;
}

// The drafts this step verifies after the sequence's last token: as many as the adaptive
// length asks (or the drafter finds worth it, when it sizes its own drafts), no more than the
// tokens the request may still emit (less the one the target adds) and the positions left in
// the context, so the step's rows stay inside the blocks the request reserved at admission.
void Engine::propose(Sequence& s) {
  s.drafts.clear();
  if (!s.drafter || !s.decoding || s.tokens.size() != size_t(s.n_computed) + 1) return;
  int32_t k = s.drafter->sizes_own_drafts() ? s.req.speculation.draft_max : s.draft_len.next();
  if (s.req.max_tokens >= 0) k = std::min(k, s.req.max_tokens - s.stats.generated - 1);
  k = std::min(k, opts_.n_ctx - s.n_computed - 1);
  if (k <= 0) return;
  try {
    s.drafts = s.drafter->draft(s.tokens, k);
  } catch (const loom::Error&) {
    s.drafter.reset();  // e.g. the draft model's pool ran out: decode this one plainly from now on
    s.drafts.clear();
  }
  if (s.drafts.size() > size_t(k)) s.drafts.resize(size_t(k));
  for (int32_t d : s.drafts)
    if (d < 0 || d >= vocab_) return s.drafts.clear();
}

// Rows [0, 1 + drafts) of the step verify the drafts left to right (spec/verify.h): row j
// decides the token after position n_computed + j; each accepted draft lets row j + 1 decide
// the next, so 1 + accepted tokens are emitted. Rows of rejected drafts hold KV that nothing
// reads: those positions are past n_computed and are written again when reached.
void Engine::verify(Sequence& s, const float* rows, std::vector<Event>& events) {
  const int32_t base = s.n_computed, n_draft = int32_t(s.drafts.size());
  int32_t accepted = 0;
  // Counted before the tokens go out: the event that ends the request carries the statistics.
  s.stats.drafted += n_draft;
  s.stats.verify_steps += n_draft > 0;
  for (int32_t j = 0; j <= n_draft; ++j) {
    const float* row = rows + size_t(j) * size_t(vocab_);
    s.n_computed = base + j + 1;  // positions up to the one this row's token sits at are committed
    spec::Verdict v{-1, false};
    if (j < n_draft) v = spec::verify_draft(s.sampler, {row, size_t(vocab_)}, s.drafts[size_t(j)]);
    else v.token = s.sampler.sample({row, size_t(vocab_)});
    if (v.accepted) ++accepted, ++s.stats.draft_accepted;
    if (emit(s, v.token, row, events) || !v.accepted) break;
  }
  if (!s.drafter->sizes_own_drafts()) s.draft_len.record(n_draft, accepted);
  if (s.req.cache_prefix && !s.blocks.empty()) index_full_blocks(s);
  s.drafts.clear();
}

// How many of each logit row's largest entries the step's samplers read, when every one of
// them reads no more than that (plain greedy or top-k sampling: no constraint's mask, no
// log-probabilities, no speculative verification, no penalty): the plan then sends only those
// (Plan::run_top) instead of whole rows. 0: whole rows.
int32_t Engine::step_top_k(const std::vector<StepSlice>& slices) const {
  constexpr int32_t kMaxTop = 1024;
  int32_t k = 0;
  for (const auto& sl : slices) {
    if (!sl.logits) continue;
    const Sequence& s = *running_[sl.seq];
    if (s.req.constraint || s.req.logprobs || (s.drafter && s.decoding)) return 0;
    const int32_t need = s.sampler.candidates_needed();
    if (need == 0) return 0;
    k = std::max(k, need);
  }
  return k <= std::min<int64_t>(kMaxTop, vocab_) ? k : 0;
}

std::vector<Event> Engine::step() {
  std::vector<Event> events;
  take_incoming(events);
  while (!waiting_.empty() && int32_t(running_.size()) < opts_.max_seqs && admit(*waiting_.front())) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  std::vector<SeqProgress> progress;
  for (const auto& s : running_) {
    propose(*s);
    progress.push_back({int32_t(s->tokens.size()) - s->n_computed, s->decoding, int32_t(s->drafts.size())});
  }
  const auto slices = schedule_step(progress, opts_.n_batch, rotate_);
  if (slices.empty()) return events;
  rotate_ += size_t(opts_.n_batch);

  backend::StepBatch batch;
  bool decode_only = true;  // no prompt rows: a step whose time says what drafts cost
  for (size_t k = 0; k < slices.size(); ++k) {
    Sequence& s = *running_[slices[k].seq];
    decode_only = decode_only && s.decoding;
    grow(s.blocks, s.reserved, s.n_computed + slices[k].count);
    if (s.decoding) s.drafts.resize(size_t(slices[k].count - 1));  // the budget may have cut them
    for (int32_t i = 0; i < slices[k].count; ++i) {
      const bool draft = s.decoding && i > 0;
      batch.tokens.push_back(draft ? s.drafts[size_t(i - 1)] : s.tokens[size_t(s.n_computed + i)]);
      batch.positions.push_back(s.n_computed + i);
      batch.seq_ids.push_back(int32_t(k));
      batch.want_logits.push_back(slices[k].logits && (s.decoding || i + 1 == slices[k].count));
    }
    batch.block_tables.push_back(s.blocks);
  }
  const int32_t top_k = step_top_k(slices);
  if (top_k > 0) top_.resize(batch.n_logit_rows() * size_t(top_k));
  else logits_.resize(batch.n_logit_rows() * size_t(vocab_));
  std::string error;
  try {
    const auto t0 = Clock::now();
    if (top_k > 0) plan_->run_top(batch, *kv_, top_k, top_.data());
    else plan_->run(batch, *kv_, logits_.data());
    if (decode_only) step_cost_.record(int32_t(batch.size()), seconds(t0, Clock::now()));
  } catch (const loom::Error& e) {
    error = e.what();
  }
  evaluated_ += int64_t(batch.size());
  std::vector<bool> done(running_.size(), false);
  size_t row = 0;
  for (const auto& sl : slices) {
    Sequence& s = *running_[sl.seq];
    if (!error.empty()) {
      finish(s, Finish::error, events, error);
      done[sl.seq] = true;
      continue;
    }
    const size_t before = events.size();
    if (s.drafter && s.decoding) {  // speculative: 1 + drafts rows, all with logits
      verify(s, logits_.data() + row * size_t(vocab_), events);
      row += size_t(sl.count);
      done[sl.seq] = events.size() > before && events.back().finish != Finish::none;
      continue;
    }
    s.n_computed += sl.count;
    if (s.req.cache_prefix) index_full_blocks(s);
    if (!sl.logits) continue;
    s.decoding = true;
    if (top_k > 0) sample(s, nullptr, {top_.data() + row++ * size_t(top_k), size_t(top_k)}, events);
    else sample(s, logits_.data() + row++ * size_t(vocab_), {}, events);
    done[sl.seq] = events.size() > before && events.back().finish != Finish::none;
  }
  size_t w = 0;
  for (size_t i = 0; i < running_.size(); ++i)
    if (!done[i]) running_[w++] = std::move(running_[i]);
  running_.resize(w);
  return events;
}

std::vector<float> Engine::evaluate(std::span<const int32_t> tokens, size_t first_row) {
  DirectSequence d(*this);
  return d.feed(tokens, first_row);
}

void Engine::check_tokens(std::span<const int32_t> tokens) const {
  for (const int32_t t : tokens)
    if (t < 0 || t >= vocab_) loom::fail("token id {} is outside the vocabulary of {}", t, vocab_);
}

std::vector<float> Engine::evaluate_side_by_side(std::span<const int32_t> tokens, int32_t n_seqs) {
  const size_t n = tokens.size(), V = size_t(vocab_);
  if (n_seqs < 1 || size_t(n_seqs) > n) loom::fail("{} sequences side by side need at least as many tokens, not {}", n_seqs, n);
  std::vector<size_t> begin(size_t(n_seqs) + 1);
  for (size_t k = 0; k <= size_t(n_seqs); ++k) begin[k] = n * k / size_t(n_seqs);
  check_tokens(tokens);
  int32_t need = 0;
  for (size_t k = 0; k < size_t(n_seqs); ++k) {
    if (int64_t(begin[k + 1] - begin[k]) > opts_.n_ctx)
      loom::fail("context length exceeded: a part of {} tokens > context {}", begin[k + 1] - begin[k], opts_.n_ctx);
    need += blocks_for(int32_t(begin[k + 1] - begin[k]));
  }
  if (!alloc_.reserve(need))
    loom::fail("KV pool full: {} blocks needed, {} available ({} in use by requests)", need, alloc_.available(),
               alloc_.in_use());
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
  struct Release {  // the blocks (and any reservation not yet taken) go back however the steps end
    Engine& e;
    std::vector<std::vector<int32_t>>& tables;
    int32_t& reserved;
    ~Release() {
      if (reserved > 0) e.alloc_.unreserve(reserved);
      for (auto& t : tables)
        for (const int32_t b : t) e.alloc_.release(b);
    }
  } release{*this, tables, need};
  for (size_t k = 0; k < size_t(n_seqs); ++k) grow(tables[k], need, int32_t(begin[k + 1] - begin[k]));
  const size_t wide = n_seqs == 1 ? size_t(opts_.n_batch) : std::max<size_t>(1, size_t(opts_.n_batch - 1) / size_t(n_seqs - 1));
  std::vector<size_t> done(size_t(n_seqs), 0), origin;
  std::vector<float> out(n * V), rows;
  for (;;) {
    backend::StepBatch b;
    origin.clear();
    for (size_t k = 0; k < size_t(n_seqs); ++k) {
      const size_t take = std::min(k == 0 && n_seqs > 1 ? size_t(1) : wide, begin[k + 1] - begin[k] - done[k]);
      for (size_t j = 0; j < take; ++j) {
        b.tokens.push_back(tokens[begin[k] + done[k] + j]);
        b.positions.push_back(int32_t(done[k] + j));
        b.seq_ids.push_back(int32_t(k));
        b.want_logits.push_back(1);
        origin.push_back(begin[k] + done[k] + j);
      }
      done[k] += take;
      b.block_tables.push_back(tables[k]);
    }
    if (b.tokens.empty()) break;
    rows.resize(b.size() * V);
    plan_->run(b, *kv_, rows.data());
    for (size_t i = 0; i < origin.size(); ++i) std::copy_n(rows.data() + i * V, V, out.data() + origin[i] * V);
    evaluated_ += int64_t(b.size());
  }
  return out;
}

DirectSequence::~DirectSequence() {
  reset();
  --e_.direct_open_;
}

void DirectSequence::rollback(int32_t pos) {
  if (pos < 0 || pos > n_past_) loom::fail("rollback to position {} but the sequence is at {}", pos, n_past_);
  const size_t keep = size_t(e_.blocks_for(pos));
  while (blocks_.size() > keep) {
    e_.alloc_.release(blocks_.back());
    blocks_.pop_back();
  }
  n_past_ = pos;
}

std::vector<float> DirectSequence::feed(std::span<const int32_t> tokens, size_t first_row) {
  std::vector<float> out;
  feed(tokens, out, first_row);
  return out;
}

void DirectSequence::feed(std::span<const int32_t> tokens, std::vector<float>& out, size_t first_row) {
  if (tokens.empty()) loom::fail("evaluate needs at least one token");
  if (first_row == SIZE_MAX) first_row = tokens.size() - 1;
  if (first_row >= tokens.size()) loom::fail("evaluate: first row {} but only {} tokens", first_row, tokens.size());
  if (int64_t(n_past_) + int64_t(tokens.size()) > e_.opts_.n_ctx)
    loom::fail("context length exceeded: {} tokens in the cache + {} new > context {} (raise -c)", n_past_,
               tokens.size(), e_.opts_.n_ctx);
  e_.check_tokens(tokens);
  const int32_t need = e_.blocks_for(n_past_ + int32_t(tokens.size())) - int32_t(blocks_.size());
  if (need > 0 && !e_.alloc_.reserve(need))
    loom::fail("KV pool full: {} more blocks needed, {} available ({} in use by requests)", need,
               e_.alloc_.available(), e_.alloc_.in_use());
  int32_t reserved = std::max(need, 0);
  e_.grow(blocks_, reserved, n_past_ + int32_t(tokens.size()));
  const size_t V = size_t(e_.vocab_);
  out.resize((tokens.size() - first_row) * V);
  std::vector<float> scratch;
  size_t row = 0;
  for (size_t i = 0; i < tokens.size(); i += size_t(e_.opts_.n_batch)) {
    const size_t n = std::min(tokens.size() - i, size_t(e_.opts_.n_batch));
    auto batch = backend::StepBatch::sequence({tokens.begin() + i, tokens.begin() + i + n}, n_past_, true);
    batch.block_tables.push_back(blocks_);
    for (size_t j = 0; j < n; ++j) batch.want_logits[j] = i + j >= first_row;
    const size_t rows = batch.n_logit_rows();
    if (rows > 0) {
      e_.plan_->run(batch, *e_.kv_, out.data() + row * V);
    } else {  // no row of this chunk is wanted: run it for the cache, one row set aside
      batch.want_logits.back() = 1;
      scratch.resize(V);
      e_.plan_->run(batch, *e_.kv_, scratch.data());
    }
    row += rows;
    n_past_ += int32_t(n);
    e_.evaluated_ += int64_t(n);
  }
}

}  // namespace loom::runtime
