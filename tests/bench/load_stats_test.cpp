// The serving benchmark's statistics on known event timelines: TTFT, TPOT, ITL and E2E as the
// definitions say, percentiles, goodput counting under each SLO, failures counted and never
// dropped; and the seeded request set and Poisson arrivals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/arrivals.h"
#include "bench/load_stats.h"
#include "bench/request_set.h"
#include "common/error.h"

namespace {

// A completed request: sent at `sent`, content chunks at `chunks`, last byte at `last`.
bench::RequestTimeline done(double sent, std::vector<double> chunks, double last, int64_t usage_tokens = -1) {
  bench::RequestTimeline t;
  t.ok = true;
  t.done = true;
  t.sent = sent;
  t.first_content = chunks.front();
  t.content_times = std::move(chunks);
  t.last_byte = last;
  t.usage_completion_tokens = usage_tokens;
  return t;
}

bench::RequestTimeline failed(double sent, double last, std::string why) {
  bench::RequestTimeline t;
  t.sent = sent;
  t.last_byte = last;
  t.error = std::move(why);
  return t;
}

TEST(LoadStats, OneRequestsFiguresFollowTheDefinitions) {
  // Sent at 1.0; chunks at 1.5, 1.6, 1.8, 2.1; last byte 2.2; the server's usage says 5 tokens
  // (the last chunk carried two).
  const auto m = bench::request_metrics(done(1.0, {1.5, 1.6, 1.8, 2.1}, 2.2, 5));
  EXPECT_DOUBLE_EQ(m.ttft, 0.5);
  EXPECT_DOUBLE_EQ(m.e2e, 1.2);
  EXPECT_EQ(m.output_tokens, 5);
  EXPECT_TRUE(m.tokens_from_usage);
  EXPECT_NEAR(m.tpot, (1.2 - 0.5) / 4, 1e-12);
  ASSERT_EQ(m.itl.size(), 3u);
  EXPECT_NEAR(m.itl[0], 0.1, 1e-12);
  EXPECT_NEAR(m.itl[1], 0.2, 1e-12);
  EXPECT_NEAR(m.itl[2], 0.3, 1e-12);
  // Without usage the chunks are counted.
  const auto c = bench::request_metrics(done(1.0, {1.5, 1.6, 1.8, 2.1}, 2.2));
  EXPECT_EQ(c.output_tokens, 4);
  EXPECT_FALSE(c.tokens_from_usage);
  EXPECT_NEAR(c.tpot, 0.7 / 3, 1e-12);
  // One token: no TPOT, and a TPOT bound does not fail it.
  const auto one = bench::request_metrics(done(0, {0.3}, 0.3, 1));
  EXPECT_LT(one.tpot, 0);
  EXPECT_TRUE(bench::meets(one, {0, 0.001, 0}));
}

TEST(LoadStats, SloBoundsEachDecide) {
  const auto m = bench::request_metrics(done(0, {0.8, 0.85, 0.9}, 1.0, 3));  // TTFT 0.8, TPOT 0.1, E2E 1.0
  EXPECT_TRUE(bench::meets(m, {}));
  EXPECT_TRUE(bench::meets(m, {0.8, 0.1, 1.0}));  // bounds are inclusive
  EXPECT_FALSE(bench::meets(m, {0.79, 0, 0}));
  EXPECT_FALSE(bench::meets(m, {0, 0.099, 0}));
  EXPECT_FALSE(bench::meets(m, {0, 0, 0.99}));
  EXPECT_EQ(bench::Slo{}.str(), "none declared");
  EXPECT_EQ((bench::Slo{1, 0.05, 0}.str()), "TTFT ≤ 1000 ms, TPOT ≤ 50 ms");
}

TEST(LoadStats, SummaryCountsGoodputAndFailures) {
  std::vector<bench::RequestTimeline> ts;
  // Ten requests over [0, 10]: request i is sent at i, first content after 0.1·(i+1) s, then
  // 9 more chunks 0.05 s apart (10 tokens by usage), last byte with the last chunk.
  for (int i = 0; i < 10; ++i) {
    std::vector<double> chunks;
    const double first = i + 0.1 * (i + 1);
    for (int k = 0; k < 10; ++k) chunks.push_back(first + 0.05 * k);
    ts.push_back(done(i, chunks, chunks.back(), 10));
    ts.back().usage_prompt_tokens = 7;
  }
  ts.push_back(failed(3, 3.5, "HTTP 429: busy"));
  ts.push_back(failed(4, 4.1, "HTTP 429: busy"));
  ts.push_back(failed(5, 9.0, "the connection broke while reading the reply"));
  const bench::Slo slo{0.55, 0.06, 0};  // TTFT ≤ 0.55 s: requests 0..4 (0.1 … 0.5 s) meet it
  const auto s = bench::summarize_load(ts, 2, slo);
  EXPECT_EQ(s.sent, 13u);
  EXPECT_EQ(s.completed, 10u);
  EXPECT_EQ(s.failed, 3u);
  EXPECT_EQ(s.not_sent, 2u);
  ASSERT_EQ(s.errors.size(), 2u);
  EXPECT_EQ(s.errors[0], (std::pair<std::string, size_t>{"HTTP 429: busy", 2}));
  EXPECT_EQ(s.output_tokens, 100);
  EXPECT_EQ(s.prompt_tokens, 70);
  EXPECT_EQ(s.tokens_from_usage, 10u);
  // The span runs from the first send (0) to the last byte: request 9's last chunk at
  // 9 + 1.0 + 0.45 = 10.45.
  EXPECT_NEAR(s.duration_s, 10.45, 1e-9);
  EXPECT_NEAR(s.request_throughput, 10 / 10.45, 1e-9);
  EXPECT_NEAR(s.output_token_throughput, 100 / 10.45, 1e-9);
  EXPECT_EQ(s.met_slo, 5u);
  EXPECT_NEAR(s.goodput, 5 / 10.45, 1e-9);
  EXPECT_LE(s.goodput, s.request_throughput);
  // TTFTs are 0.1 … 1.0: linear-interpolated percentiles of that set.
  EXPECT_NEAR(s.ttft.p50, 0.55, 1e-9);
  EXPECT_NEAR(s.ttft.p95, 0.1 + 0.9 * 0.95, 1e-9);
  EXPECT_NEAR(s.ttft.p99, 0.1 + 0.9 * 0.99, 1e-9);
  EXPECT_NEAR(s.tpot.p50, 0.05, 1e-9);  // (E2E − TTFT) / 9 = 0.45 / 9
  EXPECT_EQ(s.itl.n, 90u);
  EXPECT_NEAR(s.itl.p99, 0.05, 1e-9);
  EXPECT_NEAR(s.e2e.p50, 0.55 + 0.45, 1e-9);

  // No SLO declared: goodput is not a number to report, and nothing is counted as meeting one.
  const auto none = bench::summarize_load(ts, 0, {});
  EXPECT_EQ(none.met_slo, 0u);
  EXPECT_FALSE(none.slo.any());
  // Everything failed: no rates from nothing, no percentiles.
  const auto bad = bench::summarize_load({failed(0, 1, "x")}, 0, slo);
  EXPECT_EQ(bad.completed, 0u);
  EXPECT_EQ(bad.request_throughput, 0);
  EXPECT_EQ(bad.ttft.n, 0u);
}

TEST(RequestSet, SeededDeterministicAndPrefixStable) {
  bench::SyntheticSpec spec;
  spec.seed = 7;
  spec.prompt_words = bench::LengthDist::parse("uniform:5:9", "p");
  spec.output_tokens = bench::LengthDist::parse("normal:32:4", "o");
  spec.system_words = 6;
  const auto a = bench::synthetic_requests(spec, 20), b = bench::synthetic_requests(spec, 20);
  const auto head = bench::synthetic_requests(spec, 5);
  const auto warm = bench::synthetic_requests(spec, 5, uint64_t(1) << 32);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].messages, b[i].messages);
    EXPECT_EQ(a[i].max_tokens, b[i].max_tokens);
    ASSERT_EQ(a[i].messages.size(), 2u);
    EXPECT_EQ(a[i].messages[0], a[0].messages[0]);  // the shared system prompt
    const auto user = a[i].messages[1]["content"].get<std::string>();
    const auto words = std::count(user.begin(), user.end(), ' ') + 1;
    EXPECT_GE(words, 5);
    EXPECT_LE(words, 9);
    EXPECT_GE(a[i].max_tokens, 1);
    if (i < head.size()) {
      EXPECT_EQ(head[i].prompt, a[i].prompt);
    }
    for (const auto& w : warm) EXPECT_NE(w.prompt, a[i].prompt);
  }
  spec.seed = 8;
  EXPECT_NE(bench::synthetic_requests(spec, 1)[0].prompt, a[0].prompt);
  for (const char* bad : {"0", "-3", "x", "uniform:9:5", "uniform:1", "normal:a:b", "3.5", "lognormal:1:2"})
    EXPECT_THROW(bench::LengthDist::parse(bad, "--prompt-words"), loom::Error) << bad;
}

TEST(Arrivals, PoissonGapsAreSeededExponential) {
  const auto t = bench::poisson_send_times(20000, 4.0, 3);
  EXPECT_EQ(t, bench::poisson_send_times(20000, 4.0, 3));
  EXPECT_NE(t, bench::poisson_send_times(20000, 4.0, 4));
  EXPECT_EQ(t[0], 0);
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / double(gaps.size());
  // Exponential with mean 0.25 s: the sample mean of 19999 gaps is within 4 standard errors
  // (0.25 / sqrt(19999) ≈ 0.0018), and the share of gaps above the mean is e^-1.
  EXPECT_NEAR(mean, 0.25, 4 * 0.25 / std::sqrt(19999.0));
  const double above = double(std::count_if(gaps.begin(), gaps.end(), [](double g) { return g > 0.25; })) / double(gaps.size());
  EXPECT_NEAR(above, std::exp(-1.0), 4 * std::sqrt(0.2325 / 19999.0));
  EXPECT_THROW(bench::poisson_send_times(3, 0, 1), loom::Error);
}

}  // namespace
