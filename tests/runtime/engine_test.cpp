// runtime::Engine on tiny programs: concurrent sequences equal each run alone (greedy, both CPU
// backends), admission refuses with a reason or waits for blocks, prefix blocks are shared by
// reference count and change nothing, cancellation and completion give every block back, and
// stop tokens, token and context limits and UTF-8 split across tokens behave as documented.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "../backend/tiny_model.h"
#include "../backend_fast/synthetic_program.h"
#include "backend/cpu/fast/fast_backend.h"
#include "backend/cpu/reference.h"
#include "chain_model.h"
#include "common/error.h"
#include "runtime/engine.h"
#include "text/constrain/constraint.h"
#include "text/stream_decoder.h"

using namespace loom;
namespace lt = loom::testing;
using runtime::Engine;
using runtime::EngineOptions;
using runtime::Event;
using runtime::Finish;
using runtime::Request;

namespace {

const lt::TinyModel& tiny() {
  static const auto tm = lt::make_tiny_model();
  return tm;
}
const lt::SyntheticModel& synthetic() {
  static const auto sm = lt::make_synthetic({});
  return sm;
}

enum class Kind { reference, fast };

std::unique_ptr<Engine> engine_for(Kind k, EngineOptions o, const text::Tokenizer* tok = nullptr) {
  const ir::Module& m = k == Kind::reference ? tiny().module : synthetic().module;
  const gguf::File& f = k == Kind::reference ? *tiny().file : *synthetic().file;
  auto ws = backend::WeightSource::bind(m, f);
  auto be = k == Kind::reference ? backend::cpu::make_reference_backend() : backend::cpu::make_fast_backend();
  return std::make_unique<Engine>(be->compile(m, ws, {2}), o, tok);
}

std::vector<int32_t> prompt_of(size_t n, int32_t vocab, uint32_t seed) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = int32_t((seed = seed * 1664525u + 1013904223u) >> 8) % vocab;
  return p;
}

Request greedy(std::vector<int32_t> prompt, int32_t max_tokens, bool cache = false) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.cache_prefix = cache;
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::string> pieces;
  Finish finish = Finish::none;
  runtime::RequestStats stats;
};

// Every request's events, gathered from the steps a test runs.
struct Collected {
  std::map<runtime::RequestId, Outcome> out;
  void add(std::vector<Event> events) {
    for (auto& ev : events) {
      auto& o = out[ev.id];
      if (ev.token >= 0) o.tokens.push_back(ev.token);
      o.text += ev.text;
      o.pieces.push_back(ev.text);
      if (ev.finish != Finish::none) {
        EXPECT_EQ(o.finish, Finish::none) << "request " << ev.id << " finished twice";
        o.finish = ev.finish;
        o.stats = ev.stats;
      }
    }
  }
};

// Steps until the engine is idle.
std::map<runtime::RequestId, Outcome> drain(Engine& e, Collected c = {}) {
  for (int i = 0; i < 10000 && !e.idle(); ++i) c.add(e.step());
  EXPECT_TRUE(e.idle());
  return c.out;
}

runtime::RequestId submit_ok(Engine& e, Request r) {
  auto s = e.submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.refused;
  return s.id;
}

Outcome alone(Kind k, const Request& r, EngineOptions o = {}) {
  o.max_seqs = 1;
  auto e = engine_for(k, o);
  const auto id = submit_ok(*e, r);
  return drain(*e)[id];
}

}  // namespace

class EngineBothBackends : public ::testing::TestWithParam<Kind> {};

TEST_P(EngineBothBackends, ConcurrentSequencesEqualEachAlone) {
  const Kind k = GetParam();
  const int32_t V = k == Kind::reference ? lt::TinyModel::V : synthetic().spec.V;
  EngineOptions o{.n_ctx = 128, .max_seqs = 4, .n_batch = 16, .block_size = 8};
  std::vector<Request> reqs;
  for (size_t n : {3u, 10u, 17u, 40u}) reqs.push_back(greedy(prompt_of(n, V, uint32_t(n)), 12));
  auto e = engine_for(k, o);
  std::vector<runtime::RequestId> ids;
  for (const auto& r : reqs) ids.push_back(submit_ok(*e, r));
  auto together = drain(*e);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto one = alone(k, reqs[i], o);
    EXPECT_EQ(together[ids[i]].tokens, one.tokens) << "request " << i;
    EXPECT_EQ(one.tokens.size(), 12u);
    EXPECT_EQ(together[ids[i]].finish, Finish::length);
  }
  EXPECT_EQ(e->blocks_in_use(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineBothBackends, ::testing::Values(Kind::reference, Kind::fast),
                         [](const auto& i) { return i.param == Kind::reference ? "reference" : "fast"; });

TEST(Engine, RefusesWhatCanNeverRunWithAReason) {
  auto e = engine_for(Kind::reference, {.n_ctx = 64, .block_size = 8, .n_blocks = 4});
  auto big = e->submit(greedy(prompt_of(20, 37, 1), 20));  // 39 positions: 5 blocks of 8 > 4
  EXPECT_FALSE(big.ok());
  EXPECT_NE(big.refused.find("KV blocks"), std::string::npos) << big.refused;
  auto longer = e->submit(greedy(prompt_of(65, 37, 1), 1));
  EXPECT_NE(longer.refused.find("does not fit the context"), std::string::npos) << longer.refused;
  EXPECT_FALSE(e->submit(greedy({}, 1)).ok());
  auto bad = e->submit(greedy({1, 37}, 1));
  EXPECT_NE(bad.refused.find("outside the vocabulary"), std::string::npos) << bad.refused;
  Request until_full = greedy({1, 2}, -1);  // reserves the whole context: 8 blocks > 4
  EXPECT_FALSE(e->submit(until_full).ok());
  EXPECT_TRUE(e->idle());
}

TEST(Engine, AdmissionWaitsForBlocksAndOutputIsUnchanged) {
  EngineOptions o{.n_ctx = 64, .max_seqs = 2, .block_size = 8, .n_blocks = 6};
  auto e = engine_for(Kind::reference, o);
  const Request a = greedy(prompt_of(20, 37, 5), 10), b = greedy(prompt_of(18, 37, 6), 10);  // 4 blocks each
  const auto ia = submit_ok(*e, a), ib = submit_ok(*e, b);
  Collected c;
  c.add(e->step());
  EXPECT_EQ(e->n_running(), 1);
  EXPECT_EQ(e->n_waiting(), 1);  // 4 + 4 > 6: b waits for a's blocks
  auto out = drain(*e, c);
  EXPECT_EQ(out[ia].tokens, alone(Kind::reference, a, o).tokens);
  EXPECT_EQ(out[ib].tokens, alone(Kind::reference, b, o).tokens);
  EXPECT_GT(out[ib].stats.queue_seconds, 0.0);
  EXPECT_EQ(e->blocks_in_use(), 0);
}

TEST(Engine, PrefixBlocksAreSharedAndChangeNothing) {
  EngineOptions o{.n_ctx = 128, .max_seqs = 3, .n_batch = 64, .block_size = 4};
  auto e = engine_for(Kind::reference, o);
  const auto system = prompt_of(22, 37, 9);
  auto with_tail = [&](std::vector<int32_t> tail) {
    auto p = std::vector<int32_t>(system.begin(), system.begin() + 20);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  const Request first = greedy(system, 6, true);
  const auto i1 = submit_ok(*e, first);
  Collected c;
  c.add(e->step());
  const auto first_blocks = e->block_table(i1);
  ASSERT_GE(first_blocks.size(), 5u);
  auto out1 = drain(*e, c);
  EXPECT_EQ(out1[i1].stats.reused_tokens, 0);
  EXPECT_EQ(e->blocks_in_use(), 0);
  EXPECT_GE(e->blocks_cached(), 5);  // 22 prompt + 5 fed tokens: 6 full blocks kept

  // The second request starts with the same 20 tokens (5 blocks): they are taken, not computed.
  const Request second = greedy(with_tail({1, 2, 3, 4, 5, 6}), 6, true);
  const int64_t before = e->evaluated_tokens();
  const auto i2 = submit_ok(*e, second);
  Collected c2;
  c2.add(e->step());
  const auto table = e->block_table(i2);
  ASSERT_GE(table.size(), 5u);
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_EQ(table[b], first_blocks[b]) << "block " << b;
    EXPECT_EQ(e->block_refs(table[b]), 1);
  }
  // A third one, while the second runs, shares them too: two references each.
  const auto i3 = submit_ok(*e, greedy(with_tail({7, 8}), 4, false));
  c2.add(e->step());
  for (size_t b = 0; b < 5; ++b) EXPECT_EQ(e->block_refs(table[b]), 2) << "block " << b;
  auto out = drain(*e, c2);
  EXPECT_EQ(out[i2].stats.reused_tokens, 20);
  EXPECT_EQ(out[i2].stats.evaluated_tokens, 6);
  EXPECT_EQ(out[i3].stats.reused_tokens, 20);
  // Prompt tokens computed: 6 + 2; then one decode token per generated token but the last.
  EXPECT_EQ(e->evaluated_tokens() - before, 6 + 5 + 2 + 3);
  EXPECT_EQ(out[i2].tokens, alone(Kind::reference, second, o).tokens);
  EXPECT_EQ(out[i3].tokens, alone(Kind::reference, greedy(with_tail({7, 8}), 4), o).tokens);
  EXPECT_EQ(e->blocks_in_use(), 0);
}

TEST(Engine, CachedBlocksAreEvictedWhenThePoolNeedsThem) {
  EngineOptions o{.n_ctx = 32, .block_size = 4, .n_blocks = 8};
  auto e = engine_for(Kind::reference, o);
  submit_ok(*e, greedy(prompt_of(24, 37, 3), 4, true));
  drain(*e);
  EXPECT_GE(e->blocks_cached(), 6);
  const Request other = greedy(prompt_of(28, 37, 4), 4);  // 31 positions: all 8 blocks
  const auto id = submit_ok(*e, other);
  auto out = drain(*e);
  EXPECT_EQ(out[id].tokens, alone(Kind::reference, other, o).tokens);
  EXPECT_EQ(e->blocks_cached(), 0);
}

TEST(Engine, CancellationFreesBlocksAtOnce) {
  // keep: 9 + 29 positions, 5 blocks; gone: 12 + 39, 7 blocks: the pool of 12 is all promised.
  auto e = engine_for(Kind::reference, {.n_ctx = 64, .max_seqs = 2, .block_size = 8, .n_blocks = 12});
  const auto keep = submit_ok(*e, greedy(prompt_of(9, 37, 1), 30));
  const auto gone = submit_ok(*e, greedy(prompt_of(12, 37, 2), 40));
  Collected c;
  c.add(e->step());
  c.add(e->step());
  EXPECT_EQ(e->n_running(), 2);
  EXPECT_EQ(e->blocks_in_use(), 4);  // 10 and 13 positions so far
  std::thread([&] { e->cancel(gone); }).join();  // from another thread, as a server would
  c.add(e->step());
  EXPECT_EQ(c.out[gone].finish, Finish::cancelled);
  EXPECT_EQ(e->block_table(gone).size(), 0u);
  EXPECT_EQ(e->blocks_in_use(), int32_t(e->block_table(keep).size()));
  // Its reservation went back too: a request needing the rest of the pool is admitted now.
  const auto next = submit_ok(*e, greedy(prompt_of(30, 37, 3), 3));  // 32 positions: 4 blocks
  c.add(e->step());
  EXPECT_EQ(e->n_running(), 2);
  auto out = drain(*e, c);
  EXPECT_EQ(out[keep].finish, Finish::length);
  EXPECT_EQ(out[next].finish, Finish::length);
  EXPECT_EQ(e->blocks_in_use(), 0);
  EXPECT_EQ(e->blocks_cached(), 0);  // cache_prefix off: nothing kept
}

TEST(Engine, SubmitFromAnotherThreadWakesTheDriver) {
  auto e = engine_for(Kind::reference, {.n_ctx = 32});
  std::thread client([&] { e->submit(greedy({1, 2, 3}, 2)); });
  EXPECT_TRUE(e->wait_for_work(std::chrono::seconds(30)));
  client.join();
  EXPECT_EQ(drain(*e).size(), 1u);
}

TEST(Engine, TokenLimitContextLimitAndStopTokens) {
  // 5 -> 6 -> 7 -> 8 -> 6 ...: greedy output is 6 7 8 6 7 8 ...
  auto cm = lt::make_chain_model({{5, 6}, {6, 7}, {7, 8}, {8, 6}});
  auto ws = backend::WeightSource::bind(cm.module, *cm.file);
  auto make = [&](int32_t n_ctx) {
    return Engine(backend::cpu::make_fast_backend()->compile(cm.module, ws, {1}), {.n_ctx = n_ctx, .block_size = 4});
  };
  Engine e = make(64);
  auto run = [&](Engine& en, Request r) {
    const auto id = submit_ok(en, std::move(r));
    return drain(en)[id];
  };
  auto limited = run(e, greedy({5}, 5));
  EXPECT_EQ(limited.tokens, (std::vector<int32_t>{6, 7, 8, 6, 7}));
  EXPECT_EQ(limited.finish, Finish::length);
  EXPECT_EQ(limited.stats.generated, 5);
  auto none = run(e, greedy({5}, 0));
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_EQ(none.finish, Finish::length);
  Request stop = greedy({5}, 20);
  stop.stop = {8};
  auto stopped = run(e, stop);
  EXPECT_EQ(stopped.tokens, (std::vector<int32_t>{6, 7, 8}));  // the stop token is reported, then the end
  EXPECT_EQ(stopped.finish, Finish::stop);
  Engine small = make(10);
  auto full = run(small, greedy({5, 6, 7, 8}, -1));  // positions 4..9 fed: 7 sampled, the last not fed
  EXPECT_EQ(full.tokens.size(), 7u);
  EXPECT_EQ(full.finish, Finish::length);
}

TEST(Engine, Utf8SplitAcrossTokensArrivesWhole) {
  // "aé€😀b" one byte per token, then end of text: each character must arrive complete, in
  // the event of its last byte, and two interleaved sequences must not mix their bytes.
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "b";
  auto probe = lt::make_chain_model({});
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(probe.byte_token(c));
  std::map<int32_t, int32_t> next;
  for (size_t i = 0; i + 1 < ids.size(); ++i) next[ids[i]] = ids[i + 1];
  next[ids.back()] = int32_t(probe.vocab.eos_id);
  auto cm = lt::make_chain_model(next);
  const auto tok = text::Tokenizer::from_gguf(*cm.file);
  ASSERT_TRUE(tok.vocab().is_eog(int32_t(cm.vocab.eos_id)));
  auto ws = backend::WeightSource::bind(cm.module, *cm.file);
  Engine e(backend::cpu::make_reference_backend()->compile(cm.module, ws, {1}), {.n_ctx = 64, .max_seqs = 2}, &tok);
  const auto from_a = submit_ok(e, greedy({ids[0]}, 30));  // generates é€😀b
  const auto from_euro = submit_ok(e, greedy({ids[3]}, 30));  // starts inside €: 0x82 0xAC, then 😀b
  auto out = drain(e);
  EXPECT_EQ(out[from_a].text, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" "b");
  EXPECT_EQ(out[from_a].pieces, (std::vector<std::string>{"", "\xC3\xA9", "", "", "\xE2\x82\xAC", "", "", "",
                                                          "\xF0\x9F\x98\x80", "b", ""}));
  EXPECT_EQ(out[from_a].finish, Finish::eog);
  // The orphan continuation bytes 0x82 0xAC are invalid: one U+FFFD each, then the rest whole.
  EXPECT_EQ(out[from_euro].text, "\xEF\xBF\xBD\xEF\xBF\xBD\xF0\x9F\x98\x80" "b");
  EXPECT_EQ(out[from_euro].finish, Finish::eog);
}

TEST(Engine, ConstraintMasksSamplingAndEndsTheRequest) {
  // The chain model prefers a -> b -> c -> a; a constraint overrides what it disallows (greedy
  // then takes the lowest allowed id: every other logit is 0), allows the end token only once
  // the grammar accepts, and ends the request when nothing more may follow.
  auto probe = lt::make_chain_model({});
  const int32_t a = probe.byte_token('a'), b = probe.byte_token('b'), c = probe.byte_token('c');
  auto cm = lt::make_chain_model({{a, b}, {b, c}, {c, a}});
  const auto tok = text::Tokenizer::from_gguf(*cm.file);
  auto ws = backend::WeightSource::bind(cm.module, *cm.file);
  Engine e(backend::cpu::make_reference_backend()->compile(cm.module, ws, {1}), {.n_ctx = 64, .max_seqs = 3}, &tok);
  namespace tc = text::constrain;
  auto with = [&](const std::string& gbnf) {
    Request r = greedy({a}, 20);
    r.constraint = std::make_shared<tc::Constraint>(tc::compile(tc::SourceKind::gbnf, gbnf).grammar, tc::TokenTrie::of(tok));
    return r;
  };
  const auto free = submit_ok(e, greedy({a}, 6));
  const auto forced = submit_ok(e, with("root ::= \"bz\""));         // c is preferred after b; z is forced
  const auto optional = submit_ok(e, with("root ::= \"bca\" \"q\"?"));  // after bca: q or the end token
  auto out = drain(e);
  EXPECT_EQ(out[free].text, "bcabca");
  EXPECT_EQ(out[forced].text, "bz");
  EXPECT_EQ(out[forced].finish, Finish::stop);  // nothing may follow: ended without an end token
  EXPECT_EQ(out[forced].tokens.size(), 2u);
  EXPECT_EQ(out[optional].text, "bca");
  EXPECT_LT(int32_t(cm.vocab.eos_id), probe.byte_token('q'));  // why greedy picks the end token
  EXPECT_EQ(out[optional].finish, Finish::eog);
}

TEST(Engine, DirectSequenceChunksRollbackAndLimits) {
  auto e = engine_for(Kind::reference, {.n_ctx = 16, .n_batch = 4, .block_size = 4});
  const auto p = prompt_of(10, 37, 11);
  const auto whole = e->evaluate(p);  // 10 rows, in chunks of 4
  ASSERT_EQ(whole.size(), 10u * 37);
  runtime::DirectSequence s(*e);
  for (size_t i = 0; i < p.size(); ++i) {
    const auto row = s.feed(std::span<const int32_t>(&p[i], 1));
    for (size_t v = 0; v < 37; ++v) ASSERT_NEAR(row[v], whole[i * 37 + v], 1e-4f) << i;
  }
  const int32_t t = 7;
  const auto a = s.feed(std::span<const int32_t>(&t, 1));
  s.rollback(10);
  EXPECT_EQ(s.feed(std::span<const int32_t>(&t, 1)), a);
  EXPECT_THROW(s.feed(std::vector<int32_t>(6, 1)), loom::Error);  // 11 + 6 > 16
  EXPECT_EQ(s.position(), 11);
  s.reset();
  EXPECT_EQ(e->blocks_in_use(), 0);
}

namespace {

// A plan that counts which of its entry points the engine calls, and otherwise is the plan it wraps.
class CountingPlan final : public backend::Plan {
 public:
  explicit CountingPlan(std::unique_ptr<backend::Plan> p) : p_(std::move(p)) {}
  std::unique_ptr<backend::KvStorage> allocate_kv(int32_t n, int32_t bs, backend::KvElem e) const override {
    return p_->allocate_kv(n, bs, e);
  }
  void run(const backend::StepBatch& b, backend::KvStorage& kv, float* out) override {
    whole += b.n_logit_rows() > 0;  // a step of prompt rows alone reads no logits either way
    p_->run(b, kv, out);
  }
  void run_top(const backend::StepBatch& b, backend::KvStorage& kv, int32_t k, backend::TopLogit* out) override {
    ++top, max_k = std::max(max_k, k);
    p_->run_top(b, kv, k, out);
  }
  int64_t vocab_size() const override { return p_->vocab_size(); }
  const std::vector<backend::KvLayerShape>& kv_layers() const override { return p_->kv_layers(); }
  int threads() const override { return p_->threads(); }
  std::vector<std::string> explain() const override { return p_->explain(); }
  int whole = 0, top = 0, max_k = 0;

 private:
  std::unique_ptr<backend::Plan> p_;
};

}  // namespace

// Greedy and top-k requests sample from the plan's top entries alone (Plan::run_top); one that
// asks for log-probabilities needs whole rows. Either way the tokens are the same: the same
// request with logprobs on (whole rows, Sampler::sample) and off (top entries, sample_top).
TEST(Engine, PlainSamplingReadsTopEntriesAndPicksTheSameTokens) {
  const int32_t V = synthetic().spec.V;
  auto ws = backend::WeightSource::bind(synthetic().module, *synthetic().file);
  auto counting = [&](CountingPlan*& raw) {
    auto p = std::make_unique<CountingPlan>(backend::cpu::make_fast_backend()->compile(synthetic().module, ws, {2}));
    raw = p.get();
    return std::make_unique<Engine>(std::move(p), EngineOptions{.n_ctx = 128, .max_seqs = 4, .n_batch = 16, .block_size = 8});
  };
  std::vector<Request> reqs = {greedy(prompt_of(9, V, 1), 10), greedy(prompt_of(14, V, 2), 10)};
  for (uint64_t seed : {11u, 12u}) {
    Request r = greedy(prompt_of(6 + seed, V, uint32_t(seed)), 10);
    r.sampling.temperature = 0.9f, r.sampling.top_k = 20, r.sampling.seed = seed;
    reqs.push_back(r);
  }
  std::vector<std::vector<int32_t>> first;  // the tokens without logprobs
  for (bool logprobs : {false, true}) {
    CountingPlan* plan = nullptr;
    auto e = counting(plan);
    std::vector<runtime::RequestId> ids;
    for (Request r : reqs) {
      r.logprobs = logprobs;
      ids.push_back(submit_ok(*e, r));
    }
    auto out = drain(*e);
    if (logprobs) {
      EXPECT_EQ(plan->top, 0);
      EXPECT_GT(plan->whole, 0);
    } else {
      EXPECT_EQ(plan->whole, 0) << "plain requests moved whole rows";
      EXPECT_GT(plan->top, 0);
      EXPECT_EQ(plan->max_k, 20);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(out[ids[i]].tokens.size(), 10u);
      if (!logprobs) first.push_back(out[ids[i]].tokens);
      else EXPECT_EQ(out[ids[i]].tokens, first[i]) << "request " << i;
    }
  }
}
