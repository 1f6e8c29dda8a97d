// Each sampling rule on hand-made logits, and reproducibility of the seeded draw.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "runtime/sampler.h"

using namespace loom::runtime;

namespace {
std::vector<Candidate> cands(std::vector<float> l) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < l.size(); ++i) c.push_back({int32_t(i), l[i]});
  return c;
}
std::set<int32_t> ids(const std::vector<Candidate>& c) {
  std::set<int32_t> s;
  for (auto& x : c) s.insert(x.id);
  return s;
}
SamplerParams greedy() {
  SamplerParams p;
  p.temperature = 0;
  return p;
}
}  // namespace

TEST(Sampler, GreedyIsArgmax) {
  Sampler s(greedy());
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.f, -2.f, 2.9f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{5.f, 5.f, 1.f}), 0);  // ties: lowest id
}

TEST(Sampler, TopK) {
  auto c = cands({1, 5, 3, 4, 2});
  Sampler::top_k(c, 2);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, TopP) {
  // probabilities ~ 0.665, 0.245, 0.090 for logits 2, 1, 0.
  auto c = cands({0, 2, 1});
  Sampler::top_p(c, 0.8f);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1, 2}));
  auto d = cands({0, 2, 1});
  Sampler::top_p(d, 0.5f);
  EXPECT_EQ(ids(d), (std::set<int32_t>{1}));
}

TEST(Sampler, MinP) {
  // relative probabilities exp(l - max): 1, e^-1 = .37, e^-3 = .05
  auto c = cands({3, 2, 0});
  Sampler::min_p(c, 0.1f);
  EXPECT_EQ(ids(c), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, RepeatPresenceFrequencyPenalties) {
  SamplerParams p = greedy();
  p.repeat_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  s.accept(0);
  s.accept(0);
  s.accept(2);
  auto c = cands({4, 1, -1, 3});
  s.apply_penalties(c);
  EXPECT_FLOAT_EQ(c[0].logit, 4 / 2.f - 2 * 0.25f - 0.5f);  // seen twice
  EXPECT_FLOAT_EQ(c[1].logit, 1);                            // unseen
  EXPECT_FLOAT_EQ(c[2].logit, -1 * 2.f - 0.25f - 0.5f);      // negative: multiplied
  EXPECT_EQ(s.sample(std::vector<float>{4, 1, -1, 3}), 3);   // the penalty moves the argmax
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  SamplerParams p = greedy();
  p.repeat_penalty = 10.f;
  p.penalty_last_n = 2;
  Sampler s(p);
  s.accept(0);
  s.accept(1);
  s.accept(2);  // 0 left the window
  EXPECT_EQ(s.sample(std::vector<float>{3, 2.9f, 2.8f}), 0);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  // At a very low temperature the draw is the argmax whatever the seed.
  SamplerParams p;
  p.temperature = 0.01f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 1.2f, 0.9f}), 1);
  }
  // At a high temperature every token of three near-equal ones shows up.
  p.temperature = 5.f;
  p.seed = 7;
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(s.sample(std::vector<float>{1.0f, 1.2f, 0.9f}));
  EXPECT_EQ(seen.size(), 3u);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 2;
  auto draw = [&](uint64_t seed) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, RngIsPlatformIndependent) {
  // xoshiro256** 1.0 (Blackman & Vigna) with its state filled by four splitmix64 outputs from the
  // seed, and doubles from the top 53 bits. The constants come from an independent Python
  // implementation of the authors' reference C code (tests/runtime/xoshiro_reference.py: exact
  // integer arithmetic), so a build that differs in any bit on any platform fails here.
  const std::vector<std::pair<uint64_t, std::vector<uint64_t>>> want = {
      {0, {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull, 0x6aa594f1262d2d2cull,
           0xbba5ad4a1f842e59ull, 0xffef8375d9ebcacaull}},
      {12345, {0xbe6a36374160d49bull, 0x214aaa0637a688c6ull, 0xf69d16de9954d388ull, 0x0c60048c4e96e033ull,
               0x8e2076aeed51c648ull, 0x02bbcc1c1fc50f84ull}},
      {~0ull, {0x8f5520d52a7ead08ull, 0xc476a018caa1802dull, 0x81de31c0d260469eull, 0xbf658d7e065f3c2full,
               0x913593fda1bca32aull, 0xbb535e93941ba525ull}},
  };
  for (const auto& [seed, outputs] : want) {
    Rng r(seed);
    for (size_t i = 0; i < outputs.size(); ++i) EXPECT_EQ(r.next(), outputs[i]) << "seed " << seed << " output " << i;
  }
  Rng far(0);
  uint64_t v = 0;
  for (int i = 0; i < 1000; ++i) v = far.next();
  EXPECT_EQ(v, 0x7aac8c483a2edd2full) << "seed 0, 1000th output";
  Rng u(42);
  for (double w : {0x1.5780b2e0c2ec0p-4, 0x1.84136619b444ep-2, 0x1.5c2ea66473c93p-1, 0x1.d9715a8e0766cp-1})
    EXPECT_EQ(u.uniform(), w);
}

// sample_top over a row's largest entries (backend::top_logits, what Plan::run_top gives) must
// pick what sample() picks from the whole row, draw for draw, under each chain that reads no
// more than candidates_needed() of them; rows have planted ties at the cut and at the top.
TEST(Sampler, TopEntriesGiveTheWholeRowsToken) {
  auto params = [](float temp, int32_t k, float p, float min_p, uint64_t seed) {
    SamplerParams s;
    s.temperature = temp, s.top_k = k, s.top_p = p, s.min_p = min_p, s.seed = seed;
    return s;
  };
  const std::vector<SamplerParams> chains = {params(0, 40, 0.95f, 0.05f, 1), params(0.8f, 40, 0.95f, 0.05f, 2),
                                             params(1.5f, 5, 1.0f, 0.0f, 3), params(0.3f, 64, 0.5f, 0.1f, 4),
                                             params(1.0f, 1, 1.0f, 0.0f, 5)};
  uint32_t x = 7;
  auto next = [&] { return (x = x * 1664525u + 1013904223u) >> 8; };
  for (const auto& sp : chains) {
    Sampler whole(sp), top(sp);
    const int32_t k = top.candidates_needed();
    ASSERT_GE(k, 1);
    for (int draw = 0; draw < 200; ++draw) {
      std::vector<float> row(500);
      for (auto& v : row) v = float(int(next() % 4000) - 2000) / 400.f;  // coarse: many equal values
      if (draw % 3 == 0) row[next() % 500] = row[next() % 500] = 9.f;    // a tie at the top
      auto t = std::vector<loom::backend::TopLogit>(size_t(k));
      loom::backend::top_logits(row, k, t.data());
      std::vector<Candidate> c;
      for (const auto& e : t) c.push_back({e.id, e.logit});
      ASSERT_EQ(top.sample_top(c), whole.sample(row)) << "temperature " << sp.temperature << " top_k " << sp.top_k
                                                      << " draw " << draw;
    }
  }
}

TEST(Sampler, CandidatesNeededOnlyWhereTheCutDecides) {
  SamplerParams p;
  p.temperature = 0;
  EXPECT_EQ(Sampler(p).candidates_needed(), 1);
  p.temperature = 0.8f, p.top_k = 40;
  EXPECT_EQ(Sampler(p).candidates_needed(), 40);
  p.top_k = 0;  // top-p over the whole vocabulary
  EXPECT_EQ(Sampler(p).candidates_needed(), 0);
  p.top_k = 40, p.repeat_penalty = 1.1f;  // a penalty can lift a token from below the cut
  EXPECT_EQ(Sampler(p).candidates_needed(), 0);
  p.penalty_last_n = 0;  // ... unless it looks at no tokens
  EXPECT_EQ(Sampler(p).candidates_needed(), 40);
  p.temperature = 0, p.penalty_last_n = 64, p.repeat_penalty = 1.0f, p.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(p).candidates_needed(), 0);
}
