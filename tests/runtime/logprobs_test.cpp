// token_logprobs() on fresh random logits against a plain double-precision log-softmax and a
// full sort, and the engine's events: logprobs only when asked, equal to the log-softmax of the
// logits the engine's own evaluate() gives for the same prefix, whatever the sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "../backend/tiny_model.h"
#include "backend/cpu/reference.h"
#include "common/error.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

using namespace loom;
using runtime::Logprobs;
using runtime::token_logprobs;

namespace {

// The definition, in double: log(exp(x_t) / sum_i exp(x_i)), and the ids by logit descending
// (ties: lowest id first).
struct Reference {
  std::vector<double> lp;
  std::vector<int32_t> order;
};
Reference reference(const std::vector<float>& x) {
  Reference r;
  double mx = -INFINITY;
  for (float v : x) mx = std::max(mx, double(v));
  double sum = 0;
  for (float v : x) sum += std::exp(double(v) - mx);
  for (float v : x) r.lp.push_back(double(v) - mx - std::log(sum));
  r.order.resize(x.size());
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(), [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)]; });
  return r;
}

void expect_matches(const std::vector<float>& x, int32_t token, int32_t top_n) {
  const Logprobs got = token_logprobs(x, token, top_n);
  const Reference ref = reference(x);
  EXPECT_NEAR(got.logprob, ref.lp[size_t(token)], 1e-5 * (1 + std::abs(ref.lp[size_t(token)])));
  const size_t n = std::min(size_t(std::max(top_n, 0)), x.size());
  ASSERT_EQ(got.top.size(), n);
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(got.top[k].id, ref.order[k]) << "rank " << k << " of " << n << ", vocab " << x.size();
    EXPECT_NEAR(got.top[k].logprob, ref.lp[size_t(ref.order[k])], 1e-5 * (1 + std::abs(ref.lp[size_t(ref.order[k])])));
  }
}

}  // namespace

TEST(TokenLogprobs, MatchesDoubleReferenceOnRandomLogits) {
  std::mt19937 rng(20261204);
  for (size_t vocab : {1u, 2u, 7u, 37u, 1000u, 49152u}) {
    for (float scale : {0.1f, 3.f, 30.f}) {
      std::normal_distribution<float> nd(0.f, scale);
      std::vector<float> x(vocab);
      for (auto& v : x) v = nd(rng) + 5.f;  // an offset: the log-sum-exp must not assume max 0
      std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab) - 1);
      for (int32_t n : {0, 1, 5, 20, 25}) expect_matches(x, pick(rng), n);
    }
  }
}

TEST(TokenLogprobs, TiesKeepTheLowestIdsAndProbabilitiesSumToOne) {
  std::vector<float> x = {1.f, 4.f, 4.f, -2.f, 4.f, 0.f, 4.f};
  const Logprobs lp = token_logprobs(x, 3, 7);
  ASSERT_EQ(lp.top.size(), 7u);
  EXPECT_EQ(lp.top[0].id, 1);
  EXPECT_EQ(lp.top[1].id, 2);
  EXPECT_EQ(lp.top[2].id, 4);
  EXPECT_EQ(lp.top[3].id, 6);
  double sum = 0;
  for (auto& c : lp.top) sum += std::exp(double(c.logprob));
  EXPECT_NEAR(sum, 1.0, 1e-6);  // the whole vocabulary
  expect_matches(x, 3, 3);
  // Masked (-inf) entries have probability 0 and sort last.
  std::vector<float> m = {-INFINITY, 2.f, -INFINITY, 1.f};
  const Logprobs lm = token_logprobs(m, 0, 4);
  EXPECT_EQ(lm.logprob, -INFINITY);
  EXPECT_EQ(lm.top[0].id, 1);
  EXPECT_EQ(lm.top[1].id, 3);
  EXPECT_NEAR(std::exp(double(lm.top[0].logprob)) + std::exp(double(lm.top[1].logprob)), 1.0, 1e-6);
}

TEST(TokenLogprobs, RefusesATokenOutsideTheVocabulary) {
  std::vector<float> x = {0.f, 1.f};
  EXPECT_THROW(token_logprobs(x, 2, 1), loom::Error);
  EXPECT_THROW(token_logprobs(x, -1, 1), loom::Error);
  EXPECT_THROW(token_logprobs({}, 0, 1), loom::Error);
}

namespace {

std::unique_ptr<runtime::Engine> tiny_engine() {
  static const auto tm = loom::testing::make_tiny_model();
  auto ws = backend::WeightSource::bind(tm.module, *tm.file);
  auto be = backend::cpu::make_reference_backend();
  return std::make_unique<runtime::Engine>(be->compile(tm.module, ws, {2}),
                                           runtime::EngineOptions{.n_ctx = 64, .max_seqs = 2, .n_batch = 16, .block_size = 8});
}

}  // namespace

TEST(EngineLogprobs, EventsCarryTheRawLogSoftmaxOnlyWhenAsked) {
  auto e = tiny_engine();
  const int32_t V = loom::testing::TinyModel::V;
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 2, 6};
  runtime::Request greedy, sampled, plain;
  greedy.prompt = sampled.prompt = plain.prompt = prompt;
  greedy.max_tokens = sampled.max_tokens = plain.max_tokens = 6;
  greedy.sampling.temperature = 0;
  sampled.sampling = {.temperature = 1.7f, .top_k = 3, .top_p = 0.9f, .min_p = 0.f, .repeat_penalty = 1.3f, .seed = 7};
  greedy.logprobs = sampled.logprobs = true;
  greedy.top_logprobs = 5;
  sampled.top_logprobs = 20;
  runtime::Request bad = greedy;
  bad.top_logprobs = 21;
  EXPECT_FALSE(e->submit(bad).ok());
  const auto g = e->submit(greedy).id, s = e->submit(sampled).id, p = e->submit(plain).id;
  std::map<runtime::RequestId, std::vector<runtime::Event>> got;
  for (int i = 0; i < 1000 && !e->idle(); ++i)
    for (auto& ev : e->step()) got[ev.id].push_back(std::move(ev));
  for (auto id : {g, s}) {
    std::vector<int32_t> prefix = prompt;
    int n = 0;
    for (const auto& ev : got[id]) {
      if (ev.token < 0) continue;
      ASSERT_TRUE(ev.logprobs.has_value());
      // The same prefix evaluated afresh: its last row's log-softmax is what the event reports.
      const auto logits = e->evaluate(prefix, prefix.size() - 1);
      ASSERT_EQ(logits.size(), size_t(V));
      const Reference ref = reference(logits);
      EXPECT_NEAR(ev.logprobs->logprob, ref.lp[size_t(ev.token)], 1e-4);
      const size_t want = id == g ? 5 : 20;
      ASSERT_EQ(ev.logprobs->top.size(), want);
      for (size_t k = 0; k < want; ++k) {
        EXPECT_EQ(ev.logprobs->top[k].id, ref.order[k]);
        EXPECT_NEAR(ev.logprobs->top[k].logprob, ref.lp[size_t(ref.order[k])], 1e-4);
      }
      if (id == g) {
        EXPECT_EQ(ev.logprobs->top[0].id, ev.token);  // greedy: the top-1 is the token
      }
      prefix.push_back(ev.token);
      ++n;
    }
    EXPECT_EQ(n, 6);
  }
  for (const auto& ev : got[p]) EXPECT_FALSE(ev.logprobs.has_value());
}
