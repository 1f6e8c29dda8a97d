// loom bench --spec lookup,layers:8 -f prompt.txt --chat: the prompt's greedy continuation of
// -n tokens, decoded plainly and with each drafter, interleaved per repetition (plain, A, B,
// plain, A, B, ...). Reported per arm: decode t/s (first token to last), its paired ratio to
// plain with a bootstrap 95% CI, the acceptance rate (accepted / drafted), the mean tokens per
// verifying step (1 + accepted / steps), and whether its tokens equal plain decoding's (they
// must: greedy speculation is exact). Then the cost of a verify step of 1..draft_max + 2 rows
// against a 1-row step at the prompt's depth (the price of each drafted token). The JSON also
// carries the prompt's and the plain reply's token ids, to replay a drafter offline.
#include "cli/bench_spec.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fmt/format.h>

#include "backend/registry.h"
#include "bench/speculative.h"
#include "bench/stats.h"
#include "common/error.h"
#include "runtime/model_bundle.h"
#include "runtime/spec/source.h"

namespace loom::cli {

namespace {
struct Arm {
  std::string name;
  runtime::spec::Speculation speculation;
  std::vector<double> tps;
  int64_t drafted = 0, accepted = 0, steps = 0;
  bool identical = true;
};
}  // namespace

void run_spec_bench(const SpecBenchArgs& a) {
  std::string text = a.prompt;
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) loom::fail("cannot open {}", a.prompt_file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (text.empty()) loom::fail("bench --spec needs a prompt: -f FILE or --prompt TEXT");
  const auto bundle = runtime::ModelBundle::load(a.model, a.gguf);
  const auto prompt = a.chat ? bundle.encode_chat({{"user", text}}) : bundle.encode(text, true, false);
  runtime::RunOptions ro;
  ro.backend = a.backend;
  ro.threads = a.threads;
  ro.kv_elem = backend::parse_kv_elem(a.kv_type);
  ro.n_ctx = int32_t(prompt.size()) + a.tokens + 64;
  auto engine = bundle.open_engine(ro);
  std::vector<Arm> arms(1);
  arms[0].name = "plain";
  for (const auto& d : a.drafters)
    arms.push_back({d, {runtime::spec::open_draft_source(d, bundle, ro), a.draft_max}, {}, 0, 0, 0, true});
  runtime::SamplerParams greedy;
  greedy.temperature = 0;
  std::vector<int32_t> reference;
  for (int r = 0; r < a.warmup + a.reps; ++r)
    for (auto& arm : arms) {
      if (!a.quiet) {
        std::fprintf(stderr, "\r\033[K[rep %d%s] %s", r + 1 - a.warmup, r < a.warmup ? " warm-up" : "", arm.name.c_str());
        std::fflush(stderr);
      }
      const auto s = bench::measure_generation(*engine, prompt, a.tokens, greedy, arm.speculation);
      if (&arm == &arms[0] && reference.empty()) reference = s.tokens;
      arm.identical = arm.identical && s.tokens == reference;
      if (r < a.warmup) continue;
      arm.tps.push_back(s.decode_tps());
      arm.drafted += s.stats.drafted;
      arm.accepted += s.stats.draft_accepted;
      arm.steps += s.stats.verify_steps;
    }
  if (!a.quiet) std::fprintf(stderr, "\r\033[K[verify step cost]");
  // What a step of 1 + k rows costs against a 1-row step, here: the price drafting pays.
  const auto step_s = bench::verify_step_seconds(*engine, prompt, a.draft_max + 2, std::max(8, 4 * a.reps));
  if (!a.quiet) std::fprintf(stderr, "\r\033[K");

  nlohmann::json out = {{"model", a.model}, {"prompt_file", a.prompt_file}, {"prompt_tokens", prompt.size()},
                        {"generated", reference.size()}, {"threads", engine->threads()}, {"repetitions", a.reps},
                        {"draft_max", a.draft_max}, {"prompt_ids", prompt}, {"reference_ids", reference}};
  for (size_t r = 0; r < step_s.size(); ++r)
    out["verify_step"].push_back({{"rows", r + 1}, {"ms", 1e3 * step_s[r]}, {"vs_one_row", step_s[r] / step_s[0]}});
  for (const auto& arm : arms) {
    const auto s = bench::summarize(arm.tps);
    nlohmann::json j = {{"drafter", arm.name}, {"decode_tps", s.median}, {"decode_tps_stddev", s.stddev},
                        {"identical", arm.identical}};
    if (&arm != &arms[0]) {
      const auto r = bench::paired_ratio(arms[0].tps, arm.tps);
      j["ratio"] = {{"median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}}};
      j["acceptance"] = arm.drafted > 0 ? double(arm.accepted) / double(arm.drafted) : 0.0;
      j["mean_accepted_length"] = arm.steps > 0 ? 1.0 + double(arm.accepted) / double(arm.steps) : 1.0;
      j["drafted"] = arm.drafted;
      j["verify_steps"] = arm.steps;
    }
    out["arms"].push_back(j);
  }
  if (a.as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("model: %s; prompt %zu tokens%s; %zu tokens generated (greedy), %d repetitions, draft max %d\n\n",
              a.model.c_str(), prompt.size(), a.chat ? " (chat template)" : "", reference.size(), a.reps, a.draft_max);
  std::printf("| %-24s | %-14s | %-22s | %-10s | %-15s | %-9s |\n", "drafter", "decode t/s", "vs plain (95% CI)",
              "accepted", "tokens / step", "identical");
  std::printf("|--------------------------|----------------|------------------------|------------|-----------------|-----------|\n");
  for (const auto& j : out["arms"]) {
    const bool plain = !j.contains("ratio");
    const std::string ratio = plain ? "-"
                                    : fmt::format("{:.2f}x [{:.2f}, {:.2f}]", j["ratio"]["median"].get<double>(),
                                                  j["ratio"]["ci95"][0].get<double>(), j["ratio"]["ci95"][1].get<double>());
    const std::string acc = plain ? "-" : fmt::format("{:.1f}%", 100 * j["acceptance"].get<double>());
    const std::string len = plain ? "1" : fmt::format("{:.2f}", j["mean_accepted_length"].get<double>());
    std::printf("| %-24s | %-14s | %-22s | %-10s | %-15s | %-9s |\n", j["drafter"].get<std::string>().c_str(),
                fmt::format("{:.1f} ± {:.1f}", j["decode_tps"].get<double>(), j["decode_tps_stddev"].get<double>()).c_str(),
                ratio.c_str(), acc.c_str(), len.c_str(), j["identical"].get<bool>() ? "yes" : "NO");
  }
  std::printf("\nverify step (rows: ms, x a 1-row step):");
  for (const auto& v : out["verify_step"])
    std::printf(" %d: %.2f, x%.2f;", v["rows"].get<int>(), v["ms"].get<double>(), v["vs_one_row"].get<double>());
  std::printf("\n");
}

}  // namespace loom::cli
