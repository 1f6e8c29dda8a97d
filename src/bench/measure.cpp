#include "bench/measure.h"

#include <chrono>
#include <set>

#include "common/error.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_tokens(int n, int64_t vocab, uint64_t& state) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: reproducible
    x = int32_t((state >> 33) % uint64_t(vocab));
  }
  return t;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Sample measure_pp(loom::runtime::Engine& e, int n, int depth, uint64_t seed) {
  loom::runtime::DirectSequence s(e);
  if (depth > 0) s.feed(random_tokens(depth, e.vocab_size(), seed));
  auto toks = random_tokens(n, e.vocab_size(), seed);
  auto t0 = Clock::now();
  s.feed(toks);
  return {since(t0), {}};
}

Sample measure_tg(loom::runtime::Engine& e, int n, int depth, uint64_t seed) {
  loom::runtime::DirectSequence s(e);
  if (depth > 0) s.feed(random_tokens(depth, e.vocab_size(), seed));
  auto toks = random_tokens(n, e.vocab_size(), seed);
  Sample out;
  out.token_seconds.reserve(size_t(n));
  std::vector<float> logits;  // one buffer for every token's logits, as llama-bench keeps one
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto ti = Clock::now();
    s.feed(std::span<const int32_t>(&toks[size_t(i)], 1), logits);
    out.token_seconds.push_back(since(ti));
  }
  out.seconds = since(t0);
  return out;
}

ParallelSample measure_parallel(loom::runtime::Engine& e, int n_seq, int pp, int tg, uint64_t seed) {
  using namespace loom::runtime;
  if (!e.idle()) loom::fail("bench: the engine is busy");
  std::set<RequestId> ids, started;
  for (int i = 0; i < n_seq; ++i) {
    Request r;
    r.prompt = random_tokens(pp, e.vocab_size(), seed);
    r.sampling.temperature = 0;  // greedy: no sampling cost beyond an argmax
    r.max_tokens = tg + 1;       // the first from the prompt's logits, then tg decode steps
    r.ignore_eog = true;
    r.cache_prefix = false;      // random prompts: nothing to share, nothing to keep
    auto sub = e.submit(std::move(r));
    if (!sub.ok()) loom::fail("bench --parallel {}: {}", n_seq, sub.refused);
    ids.insert(sub.id);
  }
  ParallelSample out;
  const auto t0 = Clock::now();
  int64_t ev_pp = 0;
  Clock::time_point t_pp;
  size_t finished = 0;
  while (finished < ids.size()) {
    for (const auto& ev : e.step()) {
      if (!ids.count(ev.id)) continue;
      if (ev.finish == Finish::error) loom::fail("bench --parallel: {}", ev.error);
      if (ev.finish != Finish::none) ++finished;
      started.insert(ev.id);
    }
    if (t_pp == Clock::time_point{} && started.size() == ids.size()) {
      t_pp = Clock::now();
      ev_pp = e.evaluated_tokens();
    }
    if (e.idle() && finished < ids.size()) loom::fail("bench --parallel: the engine stopped early");
  }
  out.pp_seconds = std::chrono::duration<double>(t_pp - t0).count();
  out.tg_seconds = since(t_pp);
  out.pp_tokens = int64_t(n_seq) * pp;
  out.tg_tokens = e.evaluated_tokens() - ev_pp;
  return out;
}

}  // namespace bench
