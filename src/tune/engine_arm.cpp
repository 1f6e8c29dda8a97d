// The real arm: a .loom program compiled for a backend and run through runtime::Engine.
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "runtime/model_bundle.h"
#include "tune/arm.h"

namespace loom::tune {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class EngineArm final : public Arm {
 public:
  explicit EngineArm(const ArmSpec& spec)
      : bundle_(runtime::ModelBundle::load(spec.program, spec.gguf, spec.n_ctx)) {
    runtime::RunOptions ro;
    ro.backend = spec.backend;
    ro.threads = spec.threads;
    ro.n_ctx = spec.n_ctx;
    engine_ = bundle_.open_engine(ro);
  }

  void logits(std::span<const int32_t> tokens, std::span<float> out) override {
    const auto l = engine_->evaluate(tokens);
    if (l.size() != out.size()) loom::fail("arm: {} logits for a buffer of {}", l.size(), out.size());
    std::memcpy(out.data(), l.data(), l.size() * sizeof(float));
  }

  Timed timed_run(std::span<const int32_t> prompt, int generate, bool warm) override {
    Timed t;
    const auto called = Clock::now();
    runtime::DirectSequence seq(*engine_);
    if (warm && prompt.size() > 1) {
      seq.feed(prompt.first(prompt.size() - 1));
      prompt = prompt.last(1);
    }
    auto start = Clock::now();
    t.untimed_seconds = std::chrono::duration<double>(start - called).count();
    std::vector<float> last;  // one buffer for every token's logits, as loom bench keeps one
    seq.feed(prompt, last);
    t.prefill_seconds = since(start);
    t.prompt_tokens = int(prompt.size());
    start = Clock::now();
    for (int i = 0; i < generate; ++i) {
      int32_t best = 0;
      for (size_t k = 1; k < last.size(); ++k)
        if (last[k] > last[size_t(best)]) best = int32_t(k);
      seq.feed(std::span<const int32_t>(&best, 1), last);
      ++t.generated_tokens;
    }
    t.decode_seconds = since(start);
    return t;
  }

  int64_t vocab() const override { return engine_->vocab_size(); }
  int threads() const override { return engine_->threads(); }

 private:
  runtime::ModelBundle bundle_;
  std::unique_ptr<runtime::Engine> engine_;
};

}  // namespace

std::unique_ptr<Arm> open_engine_arm(const ArmSpec& spec) { return std::make_unique<EngineArm>(spec); }

std::vector<std::vector<int32_t>> tokenize_for(const ArmSpec& spec, const std::vector<std::string>& texts,
                                               size_t min_tokens) {
  const auto bundle = runtime::ModelBundle::load(spec.program, spec.gguf, spec.n_ctx);
  std::vector<std::vector<int32_t>> out;
  for (const auto& text : texts) {
    out.push_back(bundle.encode(text, true, false));
    if (out.back().size() < min_tokens) loom::fail("tune: '{}' has fewer than {} tokens", text, min_tokens);
    if (out.back().size() > size_t(spec.n_ctx)) loom::fail("tune: '{}' is longer than {} tokens", text, spec.n_ctx);
  }
  return out;
}

}  // namespace loom::tune
