#include "runtime/generator.h"

#include <chrono>

#include <fmt/format.h>

#include "common/error.h"
#include "text/stream_decoder.h"

namespace loom::runtime {

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
double rate(int32_t n, double s) { return s > 0 ? n / s : 0.0; }
}  // namespace

std::string GenerationStats::speed_line() const {
  return fmt::format("prompt: {} tokens, {:.1f} t/s | generation: {} tokens, {:.1f} t/s", prompt_tokens,
                     rate(prompt_tokens, prompt_seconds), generated, rate(generated, gen_seconds));
}

Generator::Generator(Session& session, Sampler& sampler, const text::Tokenizer& tok)
    : session_(session), sampler_(sampler), tok_(tok) {}

void Generator::reset() {
  history_.clear();
  session_.reset();
  sampler_.reset();
}

GenerationStats Generator::generate(const std::vector<int32_t>& prompt, int32_t max_tokens,
                                    const std::function<void(const std::string&)>& on_text) {
  if (prompt.empty()) loom::fail("empty prompt");
  GenerationStats st;
  size_t common = 0;
  while (common < history_.size() && common < prompt.size() && history_[common] == prompt[common]) ++common;
  if (common == prompt.size()) --common;  // the last prompt token must be evaluated for its logits
  session_.rollback(int32_t(common));
  history_.resize(common);
  st.reused_tokens = int32_t(common);
  const std::vector<int32_t> fresh(prompt.begin() + common, prompt.end());
  if (session_.position() + int64_t(fresh.size()) > session_.n_ctx())
    loom::fail("prompt of {} tokens does not fit the context of {} (raise -c)", prompt.size(), session_.n_ctx());

  auto t0 = std::chrono::steady_clock::now();
  auto logits = session_.prefill(fresh);
  history_.insert(history_.end(), fresh.begin(), fresh.end());
  for (int32_t t : fresh) sampler_.accept(t);
  st.prompt_tokens = int32_t(fresh.size());
  st.prompt_seconds = since(t0);

  text::StreamDecoder stream(tok_);
  t0 = std::chrono::steady_clock::now();
  for (int32_t i = 0; max_tokens < 0 || i < max_tokens; ++i) {
    const int32_t next = sampler_.sample(logits);
    sampler_.accept(next);
    ++st.generated;
    const bool stop = tok_.vocab().is_eog(next) || stops_.count(next);
    if (!stop) {
      const std::string piece = stream.push(next);
      if (!piece.empty()) on_text(piece);
    }
    if (session_.position() >= session_.n_ctx()) break;  // no room to feed it back
    logits = session_.decode(next);
    history_.push_back(next);
    if (stop) {
      st.stopped_by_eog = true;
      break;
    }
  }
  const std::string tail = stream.finish();
  if (!tail.empty()) on_text(tail);
  st.gen_seconds = since(t0);
  return st;
}

}  // namespace loom::runtime
