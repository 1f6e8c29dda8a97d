// The gates of `loom tune` against deliberately cheating candidates, each wrapping the real
// engine arm of a tiny random-weight model and cheating one way: every one must be rejected by
// the gate that defends against it, while the honest arm passes. The timing, quality and SLO
// decisions are tested on injected numbers, where the assertion is about the decision.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "synth/model.h"
#include "synth/shapes.h"
#include "tune/arm.h"
#include "tune/gates.h"
#include "tune/verdict.h"

namespace loom::tune {
namespace {

// One model file per test process, removed when the process ends (ctest runs each test in a
// process of its own: they used to leave one file each in the temporary directory).
struct TinyModel {
  std::string path =
      (std::filesystem::temp_directory_path() / ("loom_tune_gates_" + std::to_string(getpid()) + ".gguf")).string();
  TinyModel() {
    synth::SynthOptions o;
    o.seed = 7;
    o.type = gguf::TensorType::Q8_0;
    synth::write_model(synth::find_shape("tiny-llama"), o, path);
  }
  ~TinyModel() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::string tiny_model() {
  static const TinyModel model;
  return model.path;
}

std::unique_ptr<Arm> honest(int threads = 1) {
  ArmSpec s;
  s.program = tiny_model();
  s.threads = threads;
  s.n_ctx = 128;
  return open_engine_arm(s);
}

// Forwards everything to a real arm; cheats override one thing.
class Wrapped : public Arm {
 public:
  explicit Wrapped(std::unique_ptr<Arm> inner) : in_(std::move(inner)) {}
  void logits(std::span<const int32_t> t, std::span<float> out) override { in_->logits(t, out); }
  Timed timed_run(std::span<const int32_t> p, int g, bool w) override { return in_->timed_run(p, g, w); }
  int64_t vocab() const override { return in_->vocab(); }
  int threads() const override { return in_->threads(); }

 protected:
  std::unique_ptr<Arm> in_;
};

// Partial computation: only the last row is written (what a decode-only shortcut produces).
struct PartialArm : Wrapped {
  using Wrapped::Wrapped;
  void logits(std::span<const int32_t> t, std::span<float> out) override {
    std::vector<float> all(out.size());
    in_->logits(t, all);
    const size_t V = size_t(vocab());
    std::copy(all.end() - long(V), all.end(), out.end() - long(V));
  }
};

// Stale buffers: the first call's output is returned for every later call.
struct StaleArm : Wrapped {
  using Wrapped::Wrapped;
  std::vector<float> first;
  void logits(std::span<const int32_t> t, std::span<float> out) override {
    if (first.empty()) {
      first.resize(out.size());
      in_->logits(t, first);
    }
    std::copy(first.begin(), first.begin() + long(std::min(first.size(), out.size())), out.begin());
  }
};

// Inputs mutated: the candidate scribbles on the caller's tokens.
struct MutatingArm : Wrapped {
  using Wrapped::Wrapped;
  void logits(std::span<const int32_t> t, std::span<float> out) override {
    in_->logits(t, out);
    const_cast<int32_t&>(t[0]) = (t[0] + 1) % int32_t(vocab());
  }
};

// Outputs cached across repeated identical inputs: a repeated timed prompt costs nothing.
struct CachingArm : Wrapped {
  using Wrapped::Wrapped;
  std::map<std::vector<int32_t>, Timed> seen;
  int hits = 0;
  Timed timed_run(std::span<const int32_t> p, int g, bool w) override {
    std::vector<int32_t> key(p.begin(), p.end());
    if (auto it = seen.find(key); it != seen.end()) {
      ++hits;
      Timed t = it->second;
      t.prefill_seconds = t.decode_seconds = 1e-9;
      return t;
    }
    return seen[key] = in_->timed_run(p, g, w);
  }
};

// Numbers nudged: one logit per row off by 0.5 (a "faster" approximation).
struct NudgedArm : Wrapped {
  using Wrapped::Wrapped;
  void logits(std::span<const int32_t> t, std::span<float> out) override {
    in_->logits(t, out);
    for (size_t i = 0; i < out.size(); i += size_t(vocab())) out[i] += 0.5f;
  }
};

// Threads behind the gate's back: says 1, starts a helper thread for every timed run.
struct SpawningArm : Wrapped {
  using Wrapped::Wrapped;
  Timed timed_run(std::span<const int32_t> p, int g, bool w) override {
    std::atomic<bool> done{false};
    std::thread helper([&] {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // as long as the sampler needs to see it
    Timed t = in_->timed_run(p, g, w);
    done = true;
    helper.join();
    return t;
  }
};

// Under-reports its time: says each timed run took half of what it did (work hidden outside
// the timed region, as a child process that lies about its timings does).
struct HalfTimeArm : Wrapped {
  using Wrapped::Wrapped;
  Timed timed_run(std::span<const int32_t> p, int g, bool w) override {
    Timed t = in_->timed_run(p, g, w);
    t.prefill_seconds /= 2;
    t.decode_seconds /= 2;
    t.untimed_seconds /= 2;
    return t;
  }
};

// Dies in its timed runs (an arm whose process crashed): the gate it was measuring for fails.
struct DyingArm : Wrapped {
  using Wrapped::Wrapped;
  Timed timed_run(std::span<const int32_t>, int, bool) override { throw std::runtime_error("arm process died (signal 9)"); }
};

std::vector<Observation> xyx(Arm& arm, uint64_t seed) {
  const auto in = fresh_inputs(seed, 2, 12, arm.vocab());
  return {observe(arm, in[0]), observe(arm, in[1]), observe(arm, in[0])};
}

Contract contract() {
  Contract c;
  c.threads = 1;
  c.pairs = 10;
  c.warmup = 1;
  c.generate_tokens = 2;
  c.min_gain = 0.02;
  return c;
}

GateInputs inputs() {
  GateInputs in;
  in.timing_lengths = {8, 12};
  in.seed = 99;
  return in;
}

TEST(TuneGates, HonestArmPassesStructuralRepeatAndNumerical) {
  auto a = honest(), b = honest();
  const auto oa = xyx(*a, 1), ob = xyx(*b, 1);
  EXPECT_TRUE(structural_gate(ob).passed);
  EXPECT_TRUE(repeat_input_gate(ob[0], ob[1], ob[2]).passed);
  EXPECT_TRUE(numerical_gate(oa, ob, 1e-3, 1e-2).passed);
}

TEST(TuneGates, PartialComputationLeavesPoisonAndFailsStructural) {
  PartialArm cheat(honest());
  const auto g = structural_gate(xyx(cheat, 2));
  EXPECT_FALSE(g.passed) << g.detail;
  EXPECT_GT(g.metrics["non_finite_or_unwritten"].get<size_t>(), 0u);
}

TEST(TuneGates, StaleOutputFailsRepeatInput) {
  StaleArm cheat(honest());
  const auto o = xyx(cheat, 3);
  EXPECT_TRUE(structural_gate(o).passed);  // every element written: only the repeat check sees it
  const auto g = repeat_input_gate(o[0], o[1], o[2]);
  EXPECT_FALSE(g.passed) << g.detail;
}

TEST(TuneGates, MutatedInputFailsStructural) {
  MutatingArm cheat(honest());
  const auto g = structural_gate(xyx(cheat, 4));
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.metrics["inputs_mutated"].get<size_t>(), 3u);
}

TEST(TuneGates, NudgedNumbersFailNumerical) {
  auto base = honest();
  NudgedArm cheat(honest());
  const auto g = numerical_gate(xyx(*base, 5), xyx(cheat, 5), 1e-3, 1e-2);
  EXPECT_FALSE(g.passed);
  EXPECT_GT(g.metrics["violations"].get<size_t>(), 0u);
  EXPECT_TRUE(numerical_gate(xyx(*base, 5), xyx(cheat, 5), 0, 0.6).passed);  // within a looser contract
}

TEST(TuneGates, OutputCacheNeverHitsBecauseTimedInputsAreFresh) {
  auto base = honest();
  CachingArm cheat(honest());
  const auto c = contract();
  const auto t = time_pair(*base, cheat, c, inputs(), c.pairs, process_threads());
  EXPECT_EQ(cheat.hits, 0) << "the timing gate repeated an input";
  EXPECT_EQ(t.b_tps.size(), size_t(c.pairs));
  // The control: the same cheat on repeated inputs would show an absurd speed-up.
  const auto again = fresh_inputs(1, 1, 8, cheat.vocab())[0];
  cheat.timed_run(again, 2, false);
  EXPECT_LT(cheat.timed_run(again, 2, false).seconds(), 1e-6);
}

// cache_state "warm": the prompt's prefix is fed before the clock starts, so a timed run counts
// one prompt token, and the pair loop hands the flag to both arms.
TEST(TuneGates, WarmCacheTimesOnlyTheLastPromptToken) {
  auto arm = honest();
  const auto prompt = fresh_inputs(3, 1, 24, arm->vocab())[0];
  const Timed cold = arm->timed_run(prompt, 2, false), warm = arm->timed_run(prompt, 2, true);
  EXPECT_EQ(cold.prompt_tokens, 24);
  EXPECT_EQ(warm.prompt_tokens, 1);
  EXPECT_EQ(warm.generated_tokens, 2);
  struct Recorder : Wrapped {
    using Wrapped::Wrapped;
    int warm = 0, cold = 0;
    Timed timed_run(std::span<const int32_t> p, int g, bool w) override {
      ++(w ? warm : cold);
      return in_->timed_run(p, g, w);
    }
  };
  auto c = contract();
  c.cache_state = "warm";
  Recorder a(honest()), b(honest());
  time_pair(a, b, c, inputs(), c.pairs, process_threads());
  EXPECT_EQ(a.cold + b.cold, 0);
  EXPECT_GE(b.warm, c.pairs);
}

TEST(TuneGates, HiddenThreadsFailTheThreadsGate) {
  auto base = honest();
  const int before = process_threads();
  SpawningArm cheat(honest());
  const auto c = contract();
  const auto t = time_pair(*base, cheat, c, inputs(), c.pairs, before);
  const auto g = threads_gate(c.threads, cheat.threads(), t.extra_threads);
  EXPECT_FALSE(g.passed) << g.detail;
  // A hidden pool: an engine on 2 threads that reports the contract's 1.
  const int before2 = process_threads();
  struct Liar : Wrapped {
    using Wrapped::Wrapped;
    int threads() const override { return 1; }
  } pool(honest(2));
  const auto t2 = time_pair(*base, pool, c, inputs(), c.pairs, before2);
  EXPECT_FALSE(threads_gate(c.threads, pool.threads(), t2.extra_threads).passed);
  // The honest arm on the contract's thread count passes.
  const int before3 = process_threads();
  auto ok = honest();
  const auto t3 = time_pair(*base, *ok, c, inputs(), c.pairs, before3);
  EXPECT_TRUE(threads_gate(c.threads, ok->threads(), t3.extra_threads).passed);
}

TEST(TuneGates, CheatsAreRevertedByJudge) {
  auto base = honest();
  const auto c = contract();
  for (int kind = 0; kind < 4; ++kind) {
    std::unique_ptr<Arm> cheat;
    if (kind == 0) cheat = std::make_unique<PartialArm>(honest());
    if (kind == 1) cheat = std::make_unique<StaleArm>(honest());
    if (kind == 2) cheat = std::make_unique<MutatingArm>(honest());
    if (kind == 3) cheat = std::make_unique<NudgedArm>(honest());
    const auto v = judge(*base, *base, *cheat, c, inputs(), process_threads());
    EXPECT_FALSE(v.keep) << kind;
    // The gates after the failing one are recorded as not run, never as passed.
    bool failed = false;
    for (const auto& g : v.gates) {
      if (failed) {
        EXPECT_FALSE(g.passed) << g.name;
      }
      failed = failed || !g.passed;
    }
    EXPECT_TRUE(failed);
  }
}

TEST(TuneGates, UnderReportedTimeFailsTheTimingAudit) {
  auto base = honest();
  auto c = contract();
  c.generate_tokens = 16;  // runs long enough that the caller's clock resolves them well
  HalfTimeArm liar(honest());
  // Its rate looks about twice as fast: without the audit, the timing gate would keep it. Beside
  // other work one timing's interval of 10 pairs can get wide (1.97 [0.80, 2.49] beside three
  // busy loops on 2 cores), so the liar is timed up to three times: the audit fails it every
  // time, and the timing gate keeps it in one of them.
  bool timing_gate_keeps = false;
  for (int run = 0; run < 3 && !timing_gate_keeps; ++run) {
    const auto t = time_pair(*base, liar, c, inputs(), c.pairs, process_threads());
    const auto g = timing_audit_gate(t, c.min_reported_share, false);
    EXPECT_FALSE(g.passed) << g.detail;
    EXPECT_LT(g.metrics["reported_share"].get<double>(), 0.75);
    timing_gate_keeps = timing_gate(t.a_tps, t.b_tps, 0.3, 10).passed;
  }
  EXPECT_TRUE(timing_gate_keeps);
  const auto v = judge(*base, *base, liar, c, inputs(), process_threads());
  EXPECT_FALSE(v.keep);
  // The honest arm's account covers its calls.
  auto ok = honest();
  const auto th = time_pair(*base, *ok, c, inputs(), c.pairs, process_threads());
  const auto gh = timing_audit_gate(th, c.min_reported_share, false);
  EXPECT_TRUE(gh.passed) << gh.detail;
  EXPECT_FALSE(timing_audit_gate(PairedTiming{}, 0.75, false).passed);  // nothing measured: fails closed
}

// Moves half of each cold run's time into its "untimed" share: a cold run has no untimed
// prefix to hide it in, so the audit does not credit it.
TEST(TuneGates, ColdRunsGetNoCreditForUntimedTime) {
  struct Shifter : Wrapped {
    using Wrapped::Wrapped;
    Timed timed_run(std::span<const int32_t> p, int g, bool w) override {
      Timed t = in_->timed_run(p, g, w);
      t.untimed_seconds += (t.prefill_seconds + t.decode_seconds) / 2;
      t.prefill_seconds /= 2;
      t.decode_seconds /= 2;
      return t;
    }
  };
  auto base = honest();
  auto c = contract();
  c.generate_tokens = 16;
  Shifter cheat(honest());
  const auto t = time_pair(*base, cheat, c, inputs(), c.pairs, process_threads());
  EXPECT_FALSE(timing_audit_gate(t, c.min_reported_share, false).passed);
  // Warm, the prefix is its own report: such a shift is not seen (docs/tune.md, "Not done yet").
  EXPECT_TRUE(timing_audit_gate(t, c.min_reported_share, true).passed);
}

TEST(TuneGates, AnArmThatDiesFailsItsGateAndJudgeReturns) {
  auto base = honest();
  DyingArm dying(honest());
  auto c = contract();
  c.allow_unscored = true;  // no selection set here: the quality gate lets it through to the timed runs
  const auto v = judge(*base, *base, dying, c, inputs(), process_threads());
  EXPECT_FALSE(v.keep);
  const auto timing = std::find_if(v.gates.begin(), v.gates.end(), [](const GateResult& g) { return g.name == "timing"; });
  ASSERT_NE(timing, v.gates.end());
  EXPECT_FALSE(timing->passed);
  EXPECT_NE(timing->detail.find("signal 9"), std::string::npos) << timing->detail;
  for (const char* later : {"threads", "timing_audit", "slo"}) {
    const auto g = std::find_if(v.gates.begin(), v.gates.end(), [&](const GateResult& x) { return x.name == later; });
    ASSERT_NE(g, v.gates.end()) << later;
    EXPECT_FALSE(g->passed) << later;  // recorded as not run, never as passed
  }
}

TEST(TuneGates, TimingDecisionFromInjectedPairs) {
  const std::vector<double> a(10, 100.0);
  std::vector<double> fast, marginal, noisy;
  for (int i = 0; i < 10; ++i) {
    fast.push_back(110 + (i % 3));
    marginal.push_back(101 + (i % 2));  // a 1-2 % gain: inside min_gain 2 %
    noisy.push_back(i % 2 ? 140 : 70);  // a wide spread: the CI reaches below 1
  }
  EXPECT_TRUE(timing_gate(a, fast, 0.02, 10).passed);
  EXPECT_FALSE(timing_gate(a, marginal, 0.02, 10).passed);
  EXPECT_FALSE(timing_gate(a, noisy, 0.02, 10).passed);
  EXPECT_FALSE(timing_gate(a, a, 0.0, 10).passed);  // no gain: lower bound 1 is not > 1
  const std::vector<double> a9(9, 100.0), f9(9, 150.0);
  const auto g = timing_gate(a9, f9, 0.02, 10);
  EXPECT_FALSE(g.passed) << "fewer than 10 pairs must fail closed";
  EXPECT_FALSE(timing_gate(a, fast, 0.2, 10).passed);  // the contract's min_gain decides
}

TEST(TuneGates, QualityDecision) {
  Quality base{-2.0, 100, {1, 2, 3}}, worse{-2.1, 100, {1, 2, 4}}, same{-2.0, 100, {1, 2, 3}};
  EXPECT_TRUE(quality_gate(base, same, 0, false).passed);
  EXPECT_FALSE(quality_gate(base, worse, 0, false).passed);
  EXPECT_TRUE(quality_gate(base, worse, 0.2, false).passed);
  EXPECT_NEAR(quality_gate(base, worse, 0.2, false).metrics["greedy_agreement"].get<double>(), 2.0 / 3, 1e-12);
  EXPECT_FALSE(quality_gate(std::nullopt, std::nullopt, 0, false).passed);  // no signal: fails closed
  const auto allowed = quality_gate(std::nullopt, std::nullopt, 0, true);
  EXPECT_TRUE(allowed.passed);
  EXPECT_FALSE(allowed.metrics["scored"].get<bool>());
}

TEST(TuneGates, SloDecision) {
  Contract c;
  std::vector<Timed> runs(5);
  for (auto& r : runs) r = {0.050, 0.040, 8, 4};  // TTFT 50 ms, TPOT 10 ms
  EXPECT_TRUE(slo_gate(c, runs).passed);  // none declared
  c.slo_ttft_ms = 60;
  c.slo_tpot_ms = 12;
  EXPECT_TRUE(slo_gate(c, runs).passed);
  c.slo_tpot_ms = 9;
  EXPECT_FALSE(slo_gate(c, runs).passed);
  EXPECT_FALSE(slo_gate(c, {}).passed);  // declared but not measured: fails closed
}

}  // namespace
}  // namespace loom::tune
