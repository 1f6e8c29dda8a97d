#include "bench/speculative.h"

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

}  // namespace bench
