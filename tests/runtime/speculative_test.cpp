// Speculative decoding (src/runtime/spec/): the pieces (prompt lookup, the adaptive draft
// length, the scheduler's draft budget, the derived draft program), then the contract:
//   - temperature 0: token-identical to plain decoding, for every drafter, many prompts, one
//     and several sequences per step, with stop tokens and limits inside accepted runs, and
//     every KV block back in the pool afterwards;
//   - temperature > 0: the emitted tokens follow the target's distribution exactly — a
//     chi-square test of 3-token continuations against the distribution computed from the
//     model's own logits, at significance 0.001, passed by the engine and by the rule, and
//     failed by two deliberately wrong rules (always accept; accept with p(d) but resample from
//     the whole p instead of the residual).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "../backend_fast/synthetic_program.h"
#include "backend/cpu/fast/fast_backend.h"
#include "chain_model.h"
#include "ir/verify.h"
#include "port/draft_program.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "runtime/spec/draft_length.h"
#include "runtime/spec/draft_model.h"
#include "runtime/spec/prompt_lookup.h"
#include "runtime/spec/verify.h"

using namespace loom;
namespace lt = loom::testing;
namespace spec = loom::runtime::spec;
using runtime::Engine;
using runtime::EngineOptions;
using runtime::Finish;
using runtime::Request;

namespace {

const lt::SyntheticModel& synthetic() {
  static const auto sm = lt::make_synthetic({});
  return sm;
}

std::unique_ptr<Engine> synthetic_engine(EngineOptions o) {
  const auto& sm = synthetic();
  auto ws = backend::WeightSource::bind(sm.module, *sm.file);
  return std::make_unique<Engine>(backend::cpu::make_fast_backend()->compile(sm.module, ws, {2}), o);
}

struct Outcome {
  std::vector<int32_t> tokens;
  Finish finish = Finish::none;
  runtime::RequestStats stats;
};

std::map<runtime::RequestId, Outcome> drain(Engine& e) {
  std::map<runtime::RequestId, Outcome> out;
  for (int i = 0; i < 100000 && !e.idle(); ++i)
    for (auto& ev : e.step()) {
      auto& o = out[ev.id];
      if (ev.token >= 0) o.tokens.push_back(ev.token);
      if (ev.finish != Finish::none) {
        o.finish = ev.finish;
        o.stats = ev.stats;
      }
    }
  EXPECT_TRUE(e.idle());
  return out;
}

// Prompts that repeat themselves (so prompt lookup finds n-grams) and ones that do not.
std::vector<int32_t> prompt_of(size_t n, int32_t vocab, uint32_t seed, bool repetitive) {
  std::vector<int32_t> p;
  std::vector<int32_t> motif;
  for (size_t i = 0; i < (repetitive ? 6 : n); ++i)
    motif.push_back(int32_t((seed = seed * 1664525u + 1013904223u) >> 8) % vocab);
  while (p.size() < n) p.push_back(motif[p.size() % motif.size()]);
  return p;
}

Request greedy(std::vector<int32_t> prompt, int32_t max_tokens, std::shared_ptr<const spec::DraftSource> src = {},
               int32_t draft_max = 6) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.cache_prefix = false;
  r.speculation = {std::move(src), draft_max};
  return r;
}

}  // namespace

TEST(PromptLookup, DraftsWhatFollowedTheMostRecentLongestMatch) {
  // ... 1 2 3 9 ... 1 2 3 7 8 ... 2 3 | the tail "2 3" last followed by 7 8 (the more recent).
  const std::vector<int32_t> ctx = {1, 2, 3, 9, 4, 1, 2, 3, 7, 8, 5, 2, 3};
  EXPECT_EQ(spec::lookup_draft(ctx, 2), (std::vector<int32_t>{7, 8}));
  // Up to the context's end, then on as an overlapping copy (the tail repeats what followed it).
  EXPECT_EQ(spec::lookup_draft(ctx, 10), (std::vector<int32_t>{7, 8, 5, 2, 3, 7, 8, 5, 2, 3}));
  EXPECT_TRUE(spec::lookup_draft(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());   // no earlier occurrence
  EXPECT_TRUE(spec::lookup_draft(std::vector<int32_t>{1}, 4).empty());
}

TEST(DraftLength, GrowsOnSuccessBacksOffToZeroOnFailureAndProbesAgain) {
  spec::DraftLength d(4);
  EXPECT_EQ(d.next(), 4);
  d.record(4, 1);
  EXPECT_EQ(d.next(), 2);  // accepted + 1
  d.record(2, 2);
  EXPECT_EQ(d.next(), 3);
  int zeros = 0, probes = 0;
  for (int i = 0; i < 200; ++i) {  // drafts that always fail
    const int32_t k = d.next();
    if (k == 0) ++zeros;
    else ++probes, d.record(k, 0);
  }
  EXPECT_GT(zeros, 150) << "drafting should pause when every draft fails";
  EXPECT_GT(probes, 0) << "and probe again after the pause";
  d.record(0, 0);  // nothing drafted: no change
}

TEST(Scheduler, DraftsTakeOnlyWhatTheDecodeTokensLeave) {
  const std::vector<runtime::SeqProgress> seqs = {{1, true, 5}, {1, true, 2}, {30, false, 0}};
  auto s = runtime::schedule_step(seqs, 6);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].count, 5);  // 1 + 4 of its 5 drafts: the budget of 6 less the other's token
  EXPECT_EQ(s[1].count, 1);
  auto roomy = runtime::schedule_step(seqs, 64);
  EXPECT_EQ(roomy[0].count, 6);
  EXPECT_EQ(roomy[1].count, 3);
  EXPECT_EQ(roomy[2].count, 30 + 0);  // the prefill after them
}

TEST(DraftProgram, KeepsTheFirstLayersAndTheHeadAndVerifies) {
  const auto& sm = synthetic();
  const auto d = port::draft_program(sm.module, 1);
  EXPECT_NO_THROW(ir::verify(d));
  for (const auto& op : d.funcs[0].body) EXPECT_EQ(op.result.rfind("b1.", 0), std::string::npos) << op.result;
  for (const auto& w : d.weights) EXPECT_EQ(w.name.find("blk.1."), std::string::npos) << w.name;
  EXPECT_LT(d.weights.size(), sm.module.weights.size());
  EXPECT_THROW(port::draft_program(sm.module, 0), loom::Error);
  EXPECT_THROW(port::draft_program(sm.module, 2), loom::Error);  // all of its 2 layers: not a draft
}

// Greedy identity over many prompts: plain, prompt lookup and the derived 1-layer draft, each
// request alone and then all at once (several sequences, each with its own drafts, per step).
TEST(Speculative, GreedyOutputIsTokenIdenticalToPlainDecoding) {
  const auto& sm = synthetic();
  const int32_t V = sm.spec.V;
  EngineOptions o{.n_ctx = 160, .max_seqs = 6, .n_batch = 24, .block_size = 8};
  runtime::RunOptions ro;
  ro.backend = "cpu";
  ro.threads = 2;
  ro.n_ctx = o.n_ctx;
  ro.max_seqs = o.max_seqs;
  const std::vector<std::shared_ptr<const spec::DraftSource>> sources = {
      std::make_shared<spec::PromptLookup>(), spec::DraftModel::derive(sm.module, *sm.file, 1, ro)};
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 12; ++i) prompts.push_back(prompt_of(5 + 7 * i % 40, V, 100 + i, i % 3 != 2));
  std::vector<std::vector<int32_t>> plain;
  {
    auto e = synthetic_engine(o);
    std::vector<runtime::RequestId> ids;
    for (const auto& p : prompts) ids.push_back(e->submit(greedy(p, 40)).id);
    auto out = drain(*e);
    for (auto id : ids) plain.push_back(out[id].tokens);
  }
  for (const auto& src : sources) {
    int32_t accepted = 0;
    auto together = synthetic_engine(o);
    std::vector<runtime::RequestId> ids;
    for (const auto& p : prompts) ids.push_back(together->submit(greedy(p, 40, src)).id);
    auto out = drain(*together);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out[ids[i]].tokens, plain[i]) << src->name() << ", prompt " << i << " among others";
      accepted += out[ids[i]].stats.draft_accepted;
    }
    EXPECT_EQ(together->blocks_in_use(), 0) << src->name();
    EXPECT_GT(accepted, 0) << src->name() << ": no draft was ever accepted, nothing was tested";
    for (size_t i = 0; i < prompts.size(); i += 3) {  // and alone, with a small step budget
      EngineOptions one = o;
      one.max_seqs = 1;
      one.n_batch = 4;
      auto e = synthetic_engine(one);
      const auto id = e->submit(greedy(prompts[i], 40, src)).id;
      EXPECT_EQ(drain(*e)[id].tokens, plain[i]) << src->name() << ", prompt " << i << " alone";
    }
  }
}

// A chain model (greedy next token fixed: 5 -> 6 -> 7 -> 8 -> 6 ...) whose cycle prompt lookup
// drafts in full: stop tokens, max_tokens and the context end inside an accepted run.
TEST(Speculative, StopTokensAndLimitsInsideAnAcceptedRun) {
  auto cm = lt::make_chain_model({{5, 6}, {6, 7}, {7, 8}, {8, 6}});
  auto ws = backend::WeightSource::bind(cm.module, *cm.file);
  auto make = [&](int32_t n_ctx, bool cache) {
    return Engine(backend::cpu::make_fast_backend()->compile(cm.module, ws, {1}),
                  {.n_ctx = n_ctx, .max_seqs = 2, .block_size = 4, .n_blocks = cache ? 64 : 0});
  };
  auto lookup = std::make_shared<spec::PromptLookup>();
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 6, 7, 8, 6, 7, 8};
  auto run = [&](Engine& e, Request r) {
    const auto id = e.submit(std::move(r)).id;
    return drain(e)[id];
  };
  Engine e = make(64, false);
  auto limited = run(e, greedy(prompt, 7, lookup, 8));
  EXPECT_EQ(limited.tokens, (std::vector<int32_t>{6, 7, 8, 6, 7, 8, 6}));
  EXPECT_EQ(limited.finish, Finish::length);
  EXPECT_GE(limited.stats.draft_accepted, 3);  // lookup drafts up to the context's end: 7 8 6
  EXPECT_LT(limited.stats.verify_steps, 6) << "accepted runs should emit several tokens per step";
  Request stop = greedy(prompt, 30, lookup, 8);
  stop.stop = {8};
  stop.max_tokens = 30;
  auto stopped = run(e, stop);
  EXPECT_EQ(stopped.tokens, (std::vector<int32_t>{6, 7, 8}));
  EXPECT_EQ(stopped.finish, Finish::stop);
  Engine small = make(20, false);
  auto full = run(small, greedy(prompt, -1, lookup, 8));  // positions 10..19: 11 tokens sampled
  EXPECT_EQ(full.tokens.size(), 11u);
  EXPECT_EQ(full.finish, Finish::length);
  EXPECT_EQ(small.blocks_in_use(), 0);
  // The prefix cache indexes committed tokens only: a request that starts from the first one's
  // text (its cached blocks) continues exactly as plain decoding does.
  Engine cached = make(64, true);
  Request first = greedy(prompt, 16, lookup, 8);
  first.cache_prefix = true;
  auto a = run(cached, first);
  std::vector<int32_t> again = prompt;
  again.insert(again.end(), a.tokens.begin(), a.tokens.end() - 1);
  Request second = greedy(again, 5, lookup, 8);
  second.cache_prefix = true;
  auto b = run(cached, second);
  EXPECT_GT(b.stats.reused_tokens, 0);
  Engine plain_engine = make(64, false);
  EXPECT_EQ(b.tokens, run(plain_engine, greedy(again, 5)).tokens);
  EXPECT_EQ(cached.blocks_in_use(), 0);
}

// ---- the distribution at temperature > 0 ----

namespace {

// Sampling restricted to each position's 3 most likely tokens, so a 3-token continuation has
// 27 possible values and a chi-square test of a few thousand runs has power.
runtime::SamplerParams sampled(uint64_t seed) {
  runtime::SamplerParams p;
  p.temperature = 1.5f;  // flatter than the model's own: fewer cells too rare to test
  p.top_k = 3;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// Everything the test needs of the model after `prompt`: the logits rows of the first three
// positions along every path through the top-3 sets, and which draft tokens the test drafter
// proposes (after t1: the 2nd most likely t2, then the most likely t3 after that).
struct Paths {
  std::vector<int32_t> prompt;
  int64_t V = 0;
  std::vector<float> l1;
  std::map<int32_t, std::vector<float>> l2;
  std::map<std::pair<int32_t, int32_t>, std::vector<float>> l3;
  std::map<int32_t, std::pair<int32_t, int32_t>> drafts;
  std::map<std::vector<int32_t>, double> expected;  // P(t1 t2 t3)
};

std::vector<runtime::Candidate> dist(std::span<const float> row) {
  runtime::Sampler s(sampled(0));
  return s.distribution(row);
}

Paths explore(Engine& e, std::vector<int32_t> prompt) {
  Paths p;
  p.prompt = prompt;
  p.V = e.vocab_size();
  auto row = [&](std::vector<int32_t> toks) { return e.evaluate(toks, toks.size() - 1); };  // the last row
  p.l1 = row(prompt);
  for (const auto& c1 : dist(p.l1)) {
    auto ctx1 = prompt;
    ctx1.push_back(c1.id);
    p.l2[c1.id] = row(ctx1);
    const auto d2 = dist(p.l2[c1.id]);
    for (const auto& c2 : d2) {
      auto ctx2 = ctx1;
      ctx2.push_back(c2.id);
      p.l3[{c1.id, c2.id}] = row(ctx2);
      for (const auto& c3 : dist(p.l3[{c1.id, c2.id}]))
        p.expected[{c1.id, c2.id, c3.id}] = double(c1.p) * c2.p * c3.p;
    }
    const int32_t d1 = d2.size() > 1 ? d2[1].id : d2[0].id;
    p.drafts[c1.id] = {d1, dist(p.l3[{c1.id, d1}])[0].id};
  }
  return p;
}

// Proposes the explored drafts after the first generated token, nothing elsewhere.
class PathDrafter final : public spec::Drafter {
 public:
  explicit PathDrafter(const Paths& p) : p_(p) {}
  std::vector<int32_t> draft(std::span<const int32_t> ctx, int32_t max) override {
    if (ctx.size() != p_.prompt.size() + 1) return {};
    const auto [d1, d2] = p_.drafts.at(ctx.back());
    std::vector<int32_t> d = {d1, d2};
    d.resize(std::min<size_t>(2, size_t(max)));
    return d;
  }

 private:
  const Paths& p_;
};
class PathSource final : public spec::DraftSource {
 public:
  explicit PathSource(const Paths& p) : p_(p) {}
  std::unique_ptr<spec::Drafter> make() const override { return std::make_unique<PathDrafter>(p_); }
  std::string name() const override { return "paths"; }

 private:
  const Paths& p_;
};

// Pearson's statistic over the 27 cells, those expected fewer than 5 times pooled into one (the
// usual condition for the chi-square approximation); the critical value of chi-square at
// significance 0.001 by Wilson-Hilferty (z = 3.0902), within 1% at these degrees of freedom.
struct ChiSquare {
  double stat = 0, critical = 0;
  bool passes() const { return stat < critical; }
};
ChiSquare chi_square(const std::map<std::vector<int32_t>, int>& counts, const Paths& p, int n) {
  ChiSquare c;
  int outside = 0;
  for (const auto& [k, v] : counts)
    if (!p.expected.count(k)) outside += v;
  double pooled_e = 0, pooled_o = 0;
  int bins = 0;
  for (const auto& [k, prob] : p.expected) {
    const double e = prob * n, o = counts.count(k) ? counts.at(k) : 0;
    if (e < 5) {
      pooled_e += e, pooled_o += o;
      continue;
    }
    c.stat += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooled_e > 0) c.stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e, ++bins;
  if (outside > 0) c.stat = INFINITY;  // a continuation the target can never produce
  const double dof = double(bins - 1), z = 3.0902;
  c.critical = dof * std::pow(1 - 2 / (9 * dof) + z * std::sqrt(2 / (9 * dof)), 3);
  return c;
}

using Rule = spec::Verdict (*)(runtime::Sampler&, std::span<const float>, int32_t);

spec::Verdict always_accept(runtime::Sampler& s, std::span<const float> row, int32_t d) {
  (void)s.distribution(row);
  return {d, true};
}
// Accepts with p(d) as it should, but on rejection draws from the whole p (d included).
spec::Verdict resample_whole(runtime::Sampler& s, std::span<const float> row, int32_t d) {
  auto p = s.distribution(row);
  double pd = 0;
  for (const auto& c : p)
    if (c.id == d) pd = c.p;
  if (s.uniform() < pd) return {d, true};
  return {s.draw(p), false};
}

// The engine's verification step replayed on the explored rows with a given rule: t1 sampled
// from the prompt's row, then the drafts (d1, d2) verified in turn; a rejection emits the
// rule's token and the third comes from a plain sample of the next row.
std::map<std::vector<int32_t>, int> replay(const Paths& p, Rule rule, int n) {
  std::map<std::vector<int32_t>, int> counts;
  const size_t V = size_t(p.V);
  for (int i = 0; i < n; ++i) {
    runtime::Sampler s(sampled(1000 + uint64_t(i)));
    const int32_t t1 = s.sample({p.l1.data(), V});
    s.accept(t1);
    const auto [d1, d2] = p.drafts.at(t1);
    const auto v1 = rule(s, {p.l2.at(t1).data(), V}, d1);
    s.accept(v1.token);
    const auto& r3 = p.l3.at({t1, v1.token});
    const int32_t t3 = v1.accepted ? rule(s, {r3.data(), V}, d2).token : s.sample({r3.data(), V});
    ++counts[{t1, v1.token, t3}];
  }
  return counts;
}

}  // namespace

TEST(Speculative, SampledOutputFollowsTheTargetDistribution) {
  constexpr int N = 4000;
  auto e = synthetic_engine({.n_ctx = 32, .max_seqs = 32, .n_batch = 128, .block_size = 8});
  const Paths p = explore(*e, {11, 42, 7, 99});
  ASSERT_EQ(p.expected.size(), 27u);

  auto source = std::make_shared<PathSource>(p);
  std::map<std::vector<int32_t>, int> counts;
  int32_t drafted = 0, accepted = 0;
  for (int base = 0; base < N; base += 32) {
    std::vector<runtime::RequestId> ids;
    for (int i = base; i < std::min(N, base + 32); ++i) {
      Request r;
      r.prompt = p.prompt;
      r.sampling = sampled(uint64_t(i) * 7919 + 1);
      r.max_tokens = 4;  // t4 only lets both drafts be verified; the test looks at t1..t3
      r.cache_prefix = false;
      r.speculation = {source, 2};
      ids.push_back(e->submit(r).id);
    }
    auto out = drain(*e);
    for (auto id : ids) {
      const auto& t = out[id].tokens;
      ASSERT_GE(t.size(), 3u);
      ++counts[{t[0], t[1], t[2]}];
      drafted += out[id].stats.drafted;
      accepted += out[id].stats.draft_accepted;
    }
  }
  // Both paths of the rule were taken often: drafts accepted and rejected.
  EXPECT_GT(accepted, N / 5);
  EXPECT_LT(accepted, drafted - N / 5);
  const auto engine = chi_square(counts, p, N);
  EXPECT_TRUE(engine.passes()) << "engine: chi-square " << engine.stat << " >= " << engine.critical;
  const auto right = chi_square(replay(p, spec::verify_draft, N), p, N);
  EXPECT_TRUE(right.passes()) << "rule: chi-square " << right.stat << " >= " << right.critical;
  const auto wrong = chi_square(replay(p, always_accept, N), p, N);
  EXPECT_FALSE(wrong.passes()) << "always-accept went unnoticed: " << wrong.stat << " < " << wrong.critical;
  const auto wrong2 = chi_square(replay(p, resample_whole, N), p, N);
  EXPECT_FALSE(wrong2.passes()) << "resampling from p, not the residual, went unnoticed: " << wrong2.stat;
  std::printf("chi-square, critical %.1f at 0.001: engine %.1f, rule %.1f, always-accept %.1f, resample-whole %.1f; "
              "%d of %d drafts accepted\n", engine.critical, engine.stat, right.stat, wrong.stat, wrong2.stat, accepted,
              drafted);
}
