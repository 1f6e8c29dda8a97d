#include "cli/files.h"
#include "cli/bench_constrained.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/model_bundle.h"
#include "text/constrain/constraint.h"

namespace loom::cli {

namespace {

namespace tc = text::constrain;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Run {
  int tokens = 0;
  double gen_seconds = 0, mask_seconds = 0;
  int64_t masks = 0, hits = 0;
};

// One request to its end; tokens after the first (the prefill's) are decode steps.
Run generate(runtime::Engine& e, const std::vector<int32_t>& prompt, int max_tokens,
             std::shared_ptr<tc::Constraint> c) {
  runtime::Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.cache_prefix = false;
  r.ignore_eog = !c;  // unconstrained: the same length whatever the model says
  r.constraint = c;
  const auto sub = e.submit(std::move(r));
  if (!sub.ok()) loom::fail("{}", sub.refused);
  for (;;) {
    for (auto& ev : e.step()) {
      if (ev.id != sub.id || ev.finish == runtime::Finish::none) continue;
      if (ev.finish == runtime::Finish::error) loom::fail("{}", ev.error);
      Run out;
      out.tokens = ev.stats.generated;
      out.gen_seconds = ev.stats.gen_seconds;
      if (c) {
        out.mask_seconds = c->mask_seconds();
        out.masks = c->masks();
        out.hits = c->cache_hits();
      }
      return out;
    }
  }
}

}  // namespace

void bench_constrained(const ConstrainedBenchArgs& a) {
  const auto bundle = runtime::ModelBundle::load(a.model, a.gguf);
  runtime::RunOptions ro;
  ro.threads = a.threads;
  ro.n_ctx = 1024;
  auto engine = bundle.open_engine(ro);
  const auto trie_t0 = Clock::now();
  const auto trie = tc::TokenTrie::of(bundle.tokenizer());
  const double trie_s = std::chrono::duration<double>(Clock::now() - trie_t0).count();
  std::vector<int32_t> prompt;
  try {
    prompt = bundle.encode_chat({{"user", "Reply with a JSON document."}});
  } catch (const loom::Error&) {
    prompt = bundle.encode("JSON:", true, false);
  }
  nlohmann::json rows = nlohmann::json::array();
  if (!a.as_json)
    std::printf("token trie: %zu nodes over %zu tokens, built in %.1f ms\n%-28s %9s %7s %12s %12s %8s %8s\n",
                trie->n_nodes(), trie->vocab_size(), trie_s * 1e3, "schema", "compile", "tokens", "mask/token",
                "decode step", "mask %", "cached");
  double sum_mask = 0, sum_step = 0;
  for (const auto& path : a.schemas) {
    const std::string text = read_file(path);
    std::vector<double> compile_s, mask_tok, step_tok;
    int tokens = 0;
    double hit_rate = 0;
    for (int rep = 0; rep < a.reps; ++rep) {
      const auto c = tc::compile(tc::SourceKind::json_schema, text);
      compile_s.push_back(c.compile_seconds);
      const int limit = c.max_bytes ? std::min<int>(a.max_tokens, int(*c.max_bytes) + 1) : a.max_tokens;
      const Run con = generate(*engine, prompt, limit, std::make_shared<tc::Constraint>(c.grammar, trie));
      const Run free = generate(*engine, prompt, std::max(con.tokens, 2), nullptr);
      tokens = con.tokens;
      mask_tok.push_back(con.mask_seconds / double(std::max<int64_t>(con.masks, 1)));
      // Decode steps only: the first token's time is the prefill's.
      step_tok.push_back(free.gen_seconds / double(std::max(free.tokens - 1, 1)));
      hit_rate = con.masks ? double(con.hits) / double(con.masks) : 0;
    }
    const double m = median(mask_tok), st = median(step_tok);
    sum_mask += m;
    sum_step += st;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    rows.push_back({{"schema", name}, {"compile_ms", median(compile_s) * 1e3}, {"tokens", tokens},
                    {"mask_ms_per_token", m * 1e3}, {"decode_step_ms", st * 1e3}, {"mask_pct_of_step", 100 * m / st},
                    {"mask_cache_hit_rate", hit_rate}});
    if (!a.as_json)
      std::printf("%-28s %7.2fms %7d %10.3fms %10.2fms %7.2f%% %7.0f%%\n", name.c_str(), median(compile_s) * 1e3, tokens,
                  m * 1e3, st * 1e3, 100 * m / st, 100 * hit_rate);
  }
  const double n = double(std::max<size_t>(a.schemas.size(), 1));
  if (a.as_json) {
    std::printf("%s\n", nlohmann::json{{"model", a.model}, {"trie_build_ms", trie_s * 1e3}, {"schemas", rows},
                                       {"mean_mask_ms_per_token", sum_mask / n * 1e3},
                                       {"mean_mask_pct_of_step", 100 * sum_mask / sum_step}}
                            .dump(1)
                            .c_str());
  } else {
    std::printf("mean over %zu schemas: mask %.3f ms/token = %.2f%% of the unconstrained decode step (%.2f ms)\n",
                a.schemas.size(), sum_mask / n * 1e3, 100 * sum_mask / sum_step, sum_step / n * 1e3);
  }
}

}  // namespace loom::cli
