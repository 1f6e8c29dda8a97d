// loom-fast-bench: a small measuring program for the CPU backends (not a test).
//   loom-fast-bench MODEL [--backend cpu|cpu-ref] [--threads N] [--reps R] [--pp N] [--tg N]
//       pp: one N-token prefill from an empty cache (best and median of R runs);
//       tg: N single-token decode steps after a one-token prompt (best and median of R runs).
//   --depth D: pp and tg after a D-token context instead (prefilled once, 512 tokens a step);
//       each run prefills or decodes positions D.. again, and the step times are reported too (fastest and median
//       over all runs: on a shared machine the fastest step is the steadiest figure), and the
//       process's CPU time per step (with --threads 1, the figure a busy machine disturbs least).
//   loom-fast-bench MODEL --logits "t0 t1 ..." OUT.f32 [--backend ...]
//       every position's logits of one prefill, row-major f32, for comparisons with llama.cpp.
//   --profile prints time per step kind (fast backend only: its `profile` schedule key).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "common/error.h"
#include "../backend/kv_fixture.h"
#include "runtime/model_loader.h"

using namespace loom;
using Clock = std::chrono::steady_clock;

// The process's CPU time: with --threads 1 a step's work, whatever else shares the machine
// (with more threads it includes the pool's spinning).
static double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: loom-fast-bench MODEL [--backend B] [--threads N] [--reps R] [--pp N] [--tg N] [--depth D] [--logits TOKENS OUT] [--profile]\n");
    return 2;
  }
  std::string model_path = argv[1], backend_name = "cpu", logit_tokens, logit_out;
  int threads = 2, reps = 3, pp = 512, tg = 128, depth = 0;
  bool profile = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : (loom::fail("{} needs a value", a), std::string()); };
    if (a == "--backend") backend_name = next();
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--pp") pp = std::stoi(next());
    else if (a == "--tg") tg = std::stoi(next());
    else if (a == "--depth") depth = std::stoi(next());
    else if (a == "--logits") logit_tokens = next(), logit_out = next();
    else if (a == "--profile") profile = true;
    else loom::fail("unknown argument {}", a);
  }
  auto model = runtime::load_model(model_path);
  if (profile) model.module.schedule.push_back({"", "", {{"profile", true}}, {}});
  auto ws = backend::WeightSource::bind(model.module, *model.file);
  auto plan = backend::make_backend(backend_name)->compile(model.module, ws, {threads});
  const int64_t V = plan->vocab_size();
  const int32_t n_ctx = std::max(2048, (depth + std::max(pp, tg) + 1 + 255) / 256 * 256);
  auto fresh_cache = [&] { return loom::testing::TestKv(*plan, backend::KvElem::f16, n_ctx, 1, 256); };

  if (!logit_tokens.empty()) {
    std::vector<int32_t> toks;
    std::istringstream in(logit_tokens);
    for (int32_t t; in >> t;) toks.push_back(t);
    auto kv = fresh_cache();
    std::vector<float> out(toks.size() * V);
    kv.run(*plan, backend::StepBatch::sequence(toks, 0, true), out.data());
    FILE* f = std::fopen(logit_out.c_str(), "wb");
    if (!f) loom::fail("cannot write {}", logit_out);
    std::fwrite(out.data(), sizeof(float), out.size(), f);
    std::fclose(f);
    return 0;
  }

  std::vector<float> logits(size_t(std::max(pp, 1)) * V);
  std::vector<int32_t> prompt(pp);
  for (int i = 0; i < pp; ++i) prompt[i] = int32_t((i * 7919 + 13) % std::min<int64_t>(V, 32000));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto kv = fresh_cache();
  kv.run(*plan, backend::StepBatch::sequence({1, 2, 3, 4}, 0), logits.data());  // warm-up
  // The first n tokens of a context, 512 a step: the cache a run at depth starts from.
  auto fill_context = [&](loom::testing::TestKv& kv, int32_t n) {
    for (int32_t p = 0; p < n; p += 512) {
      std::vector<int32_t> chunk;
      for (int32_t i = p; i < std::min(n, p + 512); ++i) chunk.push_back(int32_t((i * 7919 + 13) % std::min<int64_t>(V, 32000)));
      kv.run(*plan, backend::StepBatch::sequence(chunk, p), logits.data());
    }
  };
  if (pp > 0) {
    std::vector<double> tps, cpu;
    auto kv = fresh_cache();
    fill_context(kv, depth);
    for (int r = 0; r < reps; ++r) {
      if (depth == 0) kv = fresh_cache();
      const auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      kv.run(*plan, backend::StepBatch::sequence(prompt, depth), logits.data());
      cpu.push_back(cpu_seconds() - c0);
      tps.push_back(pp / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("%s pp%d at depth %d: best %.1f t/s, median %.1f t/s (%d runs, %d threads); CPU time fastest %.1f ms, "
                "median %.1f ms\n",
                backend_name.c_str(), pp, depth, *std::max_element(tps.begin(), tps.end()), median(tps), reps,
                plan->threads(), *std::min_element(cpu.begin(), cpu.end()) * 1e3, median(cpu) * 1e3);
  }
  if (tg > 0) {
    std::vector<double> tps, steps, cpu;
    auto kv = fresh_cache();
    const int32_t start = std::max(depth, 1);
    fill_context(kv, start);  // once: each run decodes after it
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      int32_t tok = 1;
      for (int i = 0; i < tg; ++i) {
        const auto s0 = Clock::now();
        const double c0 = cpu_seconds();
        kv.run(*plan, backend::StepBatch::sequence({tok}, start + i), logits.data());
        cpu.push_back(cpu_seconds() - c0);
        steps.push_back(std::chrono::duration<double>(Clock::now() - s0).count());
        tok = int32_t(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
      }
      tps.push_back(tg / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("%s tg%d at depth %d: best %.1f t/s, median %.1f t/s (%d runs, %d threads); step fastest %.2f ms, "
                "median %.2f ms; CPU time per step fastest %.2f ms, median %.2f ms\n",
                backend_name.c_str(), tg, start, *std::max_element(tps.begin(), tps.end()), median(tps), reps,
                plan->threads(), *std::min_element(steps.begin(), steps.end()) * 1e3, median(steps) * 1e3,
                *std::min_element(cpu.begin(), cpu.end()) * 1e3, median(cpu) * 1e3);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "loom-fast-bench: %s\n", e.what());
  return 1;
}
