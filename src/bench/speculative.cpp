#include "bench/speculative.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace bench {

GenerationSample measure_generation(loom::runtime::Engine& e, const std::vector<int32_t>& prompt, int max_tokens,
                                    const loom::runtime::SamplerParams& sampling,
                                    const loom::runtime::spec::Speculation& speculation) {
  loom::runtime::Request r;
  r.prompt = prompt;
  r.sampling = sampling;
  r.max_tokens = max_tokens;
  r.cache_prefix = false;  // every arm reads the prompt itself: no arm profits from another's cache
  r.speculation = speculation;
  const auto sub = e.submit(std::move(r));
  if (!sub.ok()) loom::fail("bench: {}", sub.refused);
  GenerationSample out;
  for (;;) {
    for (auto& ev : e.step()) {
      if (ev.id != sub.id) continue;
      if (ev.token >= 0) out.tokens.push_back(ev.token);
      if (ev.finish == loom::runtime::Finish::error) loom::fail("bench: {}", ev.error);
      if (ev.finish != loom::runtime::Finish::none) {
        out.stats = ev.stats;
        return out;
      }
    }
    if (e.idle()) loom::fail("bench: the engine went idle before the request ended");
  }
}

std::vector<double> verify_step_seconds(loom::runtime::Engine& e, const std::vector<int32_t>& context, int max_rows,
                                        int reps) {
  using Clock = std::chrono::steady_clock;
  loom::runtime::DirectSequence seq(e);
  seq.feed(context);
  const int32_t at = seq.position();
  std::vector<std::vector<double>> times(size_t(std::max(0, max_rows)));
  std::vector<float> logits;  // one buffer for every step: the step is timed, not a fresh logits vector
  logits.reserve(size_t(std::max(0, max_rows)) * size_t(e.vocab_size()));
  for (int r = 0; r < reps; ++r)
    for (int rows = 1; rows <= max_rows; ++rows) {
      // Rows after the context's last token: the context's own tokens, as drafts from it would be.
      std::vector<int32_t> toks(context.end() - std::min<ptrdiff_t>(rows, ptrdiff_t(context.size())), context.end());
      toks.resize(size_t(rows), context.back());
      const auto t0 = Clock::now();
      seq.feed(toks, logits, 0);
      times[size_t(rows - 1)].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      seq.rollback(at);
    }
  std::vector<double> out;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    out.push_back(t.empty() ? 0.0 : t[t.size() / 2]);
  }
  return out;
}

}  // namespace bench
