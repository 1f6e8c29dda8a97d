// loom bench: llama-bench's pp/tg measurements plus TTFT, per-token latency percentiles and
// peak memory, optionally side by side with llama.cpp on the same file, interleaved A/B with
// a paired bootstrap confidence interval on the speed ratio. --parallel N[,M…] measures
// instead llama-batched-bench's aggregate speeds of N concurrent sequences on the engine
// (bench/measure.h): S_PP = N·pp / t_pp and S_TG = generated tokens / t_tg. Beside each
// figure: the device's energy over loom's measured runs (NVML board energy for cuda, RAPL for
// the CPU, or why it is unreadable) and, on a GPU, the backend's peak device allocation.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/ceiling.h"
#include "bench/machine.h"
#include "bench/measure.h"
#include "bench/paired.h"
#include "bench/peer.h"
#include "bench/stats.h"
#include "build_info.h"
#include "backend/registry.h"
#include "cli/bench_serve.h"
#include "cli/bench_spec.h"
#include "cli/bench_constrained.h"
#include "cli/verb.h"
#include "common/error.h"
#include "quant/simd/kernels.h"
#include "runtime/model_bundle.h"

namespace {

using nlohmann::json;

struct BenchArgs {
  std::string model, gguf, vs, backend = "cpu", kv_type = "f16";
  std::vector<int> pp{512}, tg{128}, parallel;
  int depth = 0, reps = 5, threads = 0, warmup = 1, n_batch = 512;
  bool as_json = false, quiet = false, ceiling = false;
  std::vector<std::string> schemas;  // --json-schema: the structured-output mode (bench_constrained.h)
};

// --ceiling: the machine's limits for this file (see bench/ceiling.h), measured after the runs.
// tg's bytes per token are the weights plus the KV rows a token reads at the bench's depth;
// the int8 peak is the best probe, or the best rate a measured prefill implied when that was
// higher (a peak some kernel exceeded was not the machine's).
// On a device with memory of its own (cuda) the decode ceiling is that memory's copy rate and
// no int8 peak is probed (the host's would say nothing of it): no pp ceiling there.
struct Ceiling {
  bench::Work work;
  double bandwidth_gbs = 0, int8_gops = 0, probe_gops = 0;
  bool device_copy = false;  // bandwidth_gbs is the device's copy rate, not the host's read rate
  double tg_bytes(int depth, int n) const { return work.decode_bytes_at(depth, n); }
  double tg_tps(int depth, int n) const { return tg_bytes(depth, n) > 0 ? bandwidth_gbs * 1e9 / tg_bytes(depth, n) : 0; }
  double pp_tps() const { return work.ops > 0 ? int8_gops * 1e9 / work.ops : 0; }
};

Ceiling measure_ceiling(const loom::runtime::LoadedModel& model, int threads, loom::backend::KvElem kv_elem,
                        loom::backend::DeviceMeter& meter) {
  Ceiling c;
  c.work = bench::work_per_token(model.module, *model.file, kv_elem);
  if (const auto gbs = meter.copy_gbs()) {
    c.bandwidth_gbs = *gbs;
    c.device_copy = true;
    return c;
  }
  // Over a buffer the size of one token's weights: a file that fits the last-level cache is
  // read from it, not from DRAM, and so is this buffer.
  const size_t bytes = std::max<size_t>(size_t(64) << 20, size_t(c.work.decode_bytes));
  c.bandwidth_gbs = bench::measure_read_bandwidth(bytes, threads, 9);  // best of 9: a shared host is noisy
  c.probe_gops = c.int8_gops = bench::measure_int8_peak_gops(threads);
  return c;
}

struct Test {
  std::string kind;  // "pp" | "tg" | "parallel"
  int n = 0;         // tokens; parallel: sequences
  int pp = 0, tg = 0;  // parallel: tokens per sequence
  std::vector<double> loom_pp_tps, peer_pp_tps;  // parallel: S_PP per repetition (the t/s vectors hold S_TG)
  std::vector<double> loom_tps, peer_tps;       // per repetition
  std::vector<double> loom_sec, loom_tok_sec;   // prefill seconds (TTFT) / per-token seconds
  std::vector<double> peer_tok_sec;
  double joules = 0, energy_seconds = 0, energy_tokens = 0;  // over loom's measured repetitions
  bool energy_read = true;
};

Test make_test(std::string kind, int n, int pp = 0, int tg = 0) {
  Test t;
  t.kind = std::move(kind);
  t.n = n;
  t.pp = pp;
  t.tg = tg;
  return t;
}

void progress(const BenchArgs& a, const std::string& what) {
  if (a.quiet) return;
  std::fprintf(stderr, "\r\033[K%s", what.c_str());
  std::fflush(stderr);
}

json summary_json(const bench::Summary& s, double scale = 1) {
  return {{"n", s.n},           {"median", s.median * scale}, {"mean", s.mean * scale},
          {"stddev", s.stddev * scale}, {"min", s.min * scale}, {"max", s.max * scale},
          {"p50", s.p50 * scale}, {"p95", s.p95 * scale}, {"p99", s.p99 * scale}};
}

std::string fmt_tps(const std::vector<double>& v) {
  if (v.empty()) return "-";
  auto s = bench::summarize(v);
  return fmt::format("{:.1f} ± {:.1f}", s.median, s.stddev);
}

std::string test_name(const Test& t) {
  if (t.kind == "parallel") return fmt::format("pp{}+tg{} x{}", t.pp, t.tg, t.n);
  return t.kind + std::to_string(t.n);
}

void run_bench(const BenchArgs& a) {
  if (!a.schemas.empty())
    return loom::cli::bench_constrained({a.model, a.gguf, a.schemas, a.reps, a.threads,
                                         a.tg.empty() ? 128 : std::max(a.tg.front(), 2), a.as_json});
  loom::runtime::RunOptions ro;
  ro.threads = a.threads;
  ro.n_batch = a.n_batch;
  int max_pos = a.depth;
  std::vector<Test> tests;
  if (a.parallel.empty()) {
    for (int n : a.pp) max_pos = std::max(max_pos, a.depth + n);
    for (int n : a.tg) max_pos = std::max(max_pos, a.depth + n);
    for (int n : a.pp) tests.push_back(make_test("pp", n));
    for (int n : a.tg) tests.push_back(make_test("tg", n));
  } else {
    if (a.depth > 0) loom::fail("--parallel measures from an empty cache; drop --depth");
    for (int n : a.parallel)
      for (int pp : a.pp)
        for (int tg : a.tg) {
          tests.push_back(make_test("parallel", n, pp, tg));
          max_pos = std::max(max_pos, pp + tg + 1);
          ro.max_seqs = std::max(ro.max_seqs, n);
        }
    if (tests.empty()) loom::fail("--parallel needs -p and -n of at least one token each");
  }
  ro.n_ctx = max_pos + 1;
  const auto bundle = loom::runtime::ModelBundle::load(a.model, a.gguf, ro.n_ctx);
  const auto& model = bundle.model();
  ro.backend = a.backend;
  ro.kv_elem = loom::backend::parse_kv_elem(a.kv_type);
  auto engine = bundle.open_engine(ro);
  const int threads = engine->threads();

  std::unique_ptr<bench::Peer> peer;
  if (!a.vs.empty()) {
    progress(a, "starting peer " + a.vs + " …");
    peer = bench::make_peer(a.vs, {model.file->path(), threads, std::max(max_pos + 1, 512), 2048, 512});
  }

  const auto meter = loom::backend::make_device_meter(a.backend);
  // The energy of loom's part of a repetition (the peer's runs are outside the two readings).
  auto metered = [&](Test& t, bool warm, auto&& measure) {
    const auto e0 = meter->energy_joules();
    auto s = measure();
    const auto e1 = meter->energy_joules();
    if (!warm) {
      if (e0 && e1) t.joules += *e1 - *e0;
      else t.energy_read = false;
    }
    return s;
  };
  const int total = int(tests.size()) * (a.reps + a.warmup);
  int step = 0;
  uint64_t seed = 42;
  for (auto& t : tests) {
    // Loom (A) then the peer (B) in every round, on the same token counts: bench/paired.h,
    // the loop `loom tune`'s timing gate runs too. The values kept are filled in by the arms.
    const auto show = [&](int round, int) {
      const int r = round - a.warmup;
      progress(a, fmt::format("[{}/{}] {} rep {}{}", ++step, total, test_name(t), r + 1, r < 0 ? " (warm-up)" : ""));
    };
    bench::PairedArm loom_arm, peer_arm;
    if (t.kind == "parallel") {
      loom_arm = [&](int r, bool warm) {
        const auto s =
            metered(t, warm, [&] { return bench::measure_parallel(*engine, t.n, t.pp, t.tg, seed + uint64_t(r + a.warmup)); });
        if (warm) return 0.0;
        t.energy_seconds += s.pp_seconds + s.tg_seconds;
        t.energy_tokens += double(s.tg_tokens);
        t.loom_tps.push_back(double(s.tg_tokens) / s.tg_seconds);
        t.loom_pp_tps.push_back(double(s.pp_tokens) / s.pp_seconds);
        return t.loom_tps.back();
      };
      if (peer)
        peer_arm = [&](int, bool warm) {
          const auto p = peer->batched(t.n, t.pp, t.tg);
          if (warm) return 0.0;
          t.peer_tps.push_back(double(t.n) * t.tg / p.tg_seconds);
          t.peer_pp_tps.push_back(double(t.n) * t.pp / p.pp_seconds);
          return t.peer_tps.back();
        };
    } else {
      // The next pair starts where this one ended.
      loom_arm = [&](int r, bool warm) {
        const uint64_t sd = seed + uint64_t(r + a.warmup);
        const bench::Sample s = metered(t, warm, [&] {
          return t.kind == "pp" ? bench::measure_pp(*engine, t.n, a.depth, sd) : bench::measure_tg(*engine, t.n, a.depth, sd);
        });
        if (warm) return 0.0;
        t.energy_seconds += s.seconds;
        t.energy_tokens += t.n;
        t.loom_tps.push_back(t.n / s.seconds);
        t.loom_sec.push_back(s.seconds);
        t.loom_tok_sec.insert(t.loom_tok_sec.end(), s.token_seconds.begin(), s.token_seconds.end());
        return t.loom_tps.back();
      };
      if (peer)
        peer_arm = [&](int, bool warm) {
          const auto p = t.kind == "pp" ? peer->pp(t.n, a.depth) : peer->tg(t.n, a.depth);
          if (warm) return 0.0;
          t.peer_tps.push_back(t.n / p.seconds);
          t.peer_tok_sec.insert(t.peer_tok_sec.end(), p.token_seconds.begin(), p.token_seconds.end());
          return t.peer_tps.back();
        };
    }
    bench::run_paired(a.warmup, a.reps, loom_arm, peer_arm, show);
  }
  std::optional<Ceiling> ceil;
  if (a.ceiling) {
    progress(a, "measuring the ceiling: the device's copy rate, or the host's read bandwidth and int8 peak …");
    try {
      ceil = measure_ceiling(model, threads, ro.kv_elem, *meter);
    } catch (const std::exception& e) {  // the runs' figures are still reported
      std::fprintf(stderr, "loom bench: --ceiling not measured: %s\n", e.what());
    }
    for (const auto& t : tests)
      if (ceil && t.kind == "pp" && !ceil->device_copy)
        for (const auto* v : {&t.loom_tps, &t.peer_tps})
          if (!v->empty()) ceil->int8_gops = std::max(ceil->int8_gops, bench::quantile(*v, 1.0) * ceil->work.ops / 1e9);
  }
  progress(a, "");
  if (!a.quiet) std::fprintf(stderr, "\r\033[K");

  const double rss_mib = double(bench::peak_rss_bytes()) / (1 << 20);
  json out = {{"model", model.file->path()},
              {"model_bytes", model.file->size()},
              {"arch", model.module.name},
              {"backend", a.backend},
              {"threads", threads},
              {"isa", loom::quant::simd::isa_name()},
              {"build", {{"version", LOOM_VERSION}, {"commit", LOOM_GIT_COMMIT}, {"compiler", LOOM_COMPILER}}},
              {"cpu", bench::cpu_model()},
              {"depth", a.depth},
              {"kv_type", a.kv_type},
              {"repetitions", a.reps},
              {"peak_rss_mib", rss_mib}};
  if (peer) out["peer"] = peer->describe();
  out["energy_device"] = meter->device();
  const auto peak_device = meter->peak_bytes();
  if (peak_device) out["peak_device_mib"] = *peak_device / (1 << 20);
  // Joules per token and mean power over loom's measured repetitions of a test (for parallel
  // tests the time covers prefill and generation, the tokens are the generated ones).
  auto energy_json = [&](const Test& t) -> json {
    if (!t.energy_read || t.energy_seconds <= 0)
      return "unavailable: " + (meter->why_no_energy().empty() ? std::string("counter read failed") : meter->why_no_energy());
    if (t.joules <= 0) return "unavailable: the energy counter did not advance over the measured runs (too short for its resolution)";
    if (a.depth > 0 && t.kind != "parallel")
      return "unavailable: at --depth the counter's window also holds the prefill that fills the cache";
    return {{"joules_per_token", t.joules / t.energy_tokens}, {"mean_power_w", t.joules / t.energy_seconds}};
  };
  auto energy_text = [&](const Test& t) -> std::string {
    if (!t.energy_read || t.energy_seconds <= 0 || t.joules <= 0 || (a.depth > 0 && t.kind != "parallel"))
      return "unavailable";
    return fmt::format("{:.3f} J/tok, {:.0f} W", t.joules / t.energy_tokens, t.joules / t.energy_seconds);
  };
  if (ceil) {
    const auto or_null = [&](double v) { return ceil->device_copy ? json(nullptr) : json(v); };
    out["ceiling"] = {{"decode_bytes_per_token", ceil->work.decode_bytes}, {"ops_per_token", ceil->work.ops},
                      {"bandwidth", ceil->device_copy ? "device copy (read + write)" : "host read"},
                      {"read_bandwidth_gbs", ceil->bandwidth_gbs}, {"int8_peak_gops", or_null(ceil->int8_gops)},
                      {"int8_probe_gops", or_null(ceil->probe_gops)}, {"pp_tps", or_null(ceil->pp_tps())}};
    for (const auto& t : tests)
      if (t.kind == "tg") {
        const double bytes = ceil->tg_bytes(a.depth, t.n), tps = bench::quantile(t.loom_tps, 0.5);
        out["ceiling"]["tg"].push_back({{"test", "tg" + std::to_string(t.n)},
                                        {"bytes_per_token", bytes},
                                        {"kv_bytes_per_token", bytes - ceil->work.decode_bytes},
                                        {"tps", ceil->tg_tps(a.depth, t.n)},
                                        {"loom_achieved_gbs", tps * bytes / 1e9},
                                        {"loom_of_ceiling", tps / ceil->tg_tps(a.depth, t.n)}});
      }
  }
  for (const auto& t : tests) {
    json j = {{"test", test_name(t)}, {"loom_tps", summary_json(bench::summarize(t.loom_tps))}, {"energy", energy_json(t)}};
    if (t.kind == "parallel") {
      j["sequences"] = t.n;
      j["pp"] = t.pp;
      j["tg"] = t.tg;
      j["loom_pp_tps"] = summary_json(bench::summarize(t.loom_pp_tps));
      if (peer) j["peer_pp_tps"] = summary_json(bench::summarize(t.peer_pp_tps));
    }
    if (t.kind == "pp") j["ttft_ms"] = summary_json(bench::summarize(t.loom_sec), 1e3);
    if (!t.loom_tok_sec.empty()) j["token_ms"] = summary_json(bench::summarize(t.loom_tok_sec), 1e3);
    if (peer) {
      j["peer_tps"] = summary_json(bench::summarize(t.peer_tps));
      if (!t.peer_tok_sec.empty()) j["peer_token_ms"] = summary_json(bench::summarize(t.peer_tok_sec), 1e3);
      auto r = bench::paired_ratio(t.peer_tps, t.loom_tps);
      j["ratio"] = {{"median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}}, {"pairs", r.pairs}};
    }
    out["tests"].push_back(j);
  }
  if (a.as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("model: %s (%.1f MiB), backend %s, %d threads, ISA %s, loom %s (%s)\n", model.file->path().c_str(),
              double(model.file->size()) / (1 << 20), a.backend.c_str(), threads, loom::quant::simd::isa_name(),
              LOOM_VERSION, LOOM_GIT_COMMIT);
  if (peer) std::printf("peer:  %s\n", peer->describe().c_str());
  std::printf("\n| %-16s | %-16s | %-16s | %-22s | %-10s | %-24s | %-22s |\n", "test", "loom t/s", peer ? "llama.cpp t/s" : "",
              peer ? "loom/peer (95% CI)" : "", "TTFT ms", "token ms P50/P95/P99", "energy (loom)");
  std::printf("|------------------|------------------|------------------|------------------------|------------|--------------------------|------------------------|\n");
  for (const auto& t : tests) {
    std::string ratio, ttft = "-", lat = "-";
    if (peer) {
      auto r = bench::paired_ratio(t.peer_tps, t.loom_tps);
      ratio = fmt::format("{:.2f}x [{:.2f}, {:.2f}]", r.median, r.ci_lo, r.ci_hi);
    }
    if (t.kind == "pp") ttft = fmt::format("{:.1f}", bench::quantile(t.loom_sec, 0.5) * 1e3);
    if (!t.loom_tok_sec.empty()) {
      auto s = bench::summarize(t.loom_tok_sec);
      lat = fmt::format("{:.2f}/{:.2f}/{:.2f}", s.p50 * 1e3, s.p95 * 1e3, s.p99 * 1e3);
    }
    if (t.kind == "parallel") {
      lat = "S_PP " + fmt_tps(t.loom_pp_tps) + (peer ? " vs " + fmt_tps(t.peer_pp_tps) : std::string());
      ttft = "-";
    }
    std::printf("| %-16s | %-16s | %-16s | %-22s | %-10s | %-24s | %-22s |\n", test_name(t).c_str(),
                fmt_tps(t.loom_tps).c_str(), peer ? fmt_tps(t.peer_tps).c_str() : "", ratio.c_str(), ttft.c_str(),
                lat.c_str(), energy_text(t).c_str());
  }
  std::printf("\npeak RSS %.1f MiB%s; %d repetitions after %d warm-up, depth %d; t/s as median ± stddev\n", rss_mib,
              peak_device ? fmt::format(", peak device memory {:.1f} MiB", *peak_device / (1 << 20)).c_str() : "",
              a.reps, a.warmup, a.depth);
  std::printf("energy: %s%s\n", meter->device().c_str(),
              meter->why_no_energy().empty() ? "" : (": unavailable, " + meter->why_no_energy()).c_str());
  if (!a.parallel.empty())
    std::printf("pp+tg xN: N sequences at once (llama-batched-bench -npp -ntg -npl); t/s is S_TG, all sequences'"
                " generated tokens per second; S_PP their prompt tokens per second\n");
  if (!ceil) return;
  for (const auto& t : tests) {
    if (t.kind != "tg") continue;
    const double limit = ceil->tg_tps(a.depth, t.n), kv_mib = (ceil->tg_bytes(a.depth, t.n) - ceil->work.decode_bytes) / (1 << 20);
    std::string of_peer;
    if (peer && !t.peer_tps.empty()) of_peer = fmt::format(", llama.cpp {:.0f}%", 100 * bench::quantile(t.peer_tps, 0.5) / limit);
    const std::string rate = ceil->device_copy
                                 ? fmt::format("{:.1f} GB/s device copy (read + write, 1 GiB)", ceil->bandwidth_gbs)
                                 : fmt::format("{:.1f} GB/s read ({} threads, buffer of that size)", ceil->bandwidth_gbs, threads);
    const double tps = bench::quantile(t.loom_tps, 0.5);
    std::printf("ceiling tg%d: (%.1f MiB of weights + %.1f MiB of %s KV at depth %d) per token / %s = %.1f t/s; loom %.0f%%"
                " (%.1f GB/s)%s\n",
                t.n, ceil->work.decode_bytes / (1 << 20), kv_mib, a.kv_type.c_str(), a.depth, rate.c_str(), limit,
                100 * tps / limit, tps * ceil->tg_bytes(a.depth, t.n) / 1e9, of_peer.c_str());
  }
  for (const auto& t : tests) {
    if (t.kind != "pp") continue;
    if (ceil->device_copy) {
      std::printf("ceiling pp%d: not measured on this device (no int8 tensor-core probe)\n", t.n);
      continue;
    }
    const double limit = ceil->pp_tps();
    std::string of_peer;
    if (peer && !t.peer_tps.empty()) of_peer = fmt::format(", llama.cpp {:.0f}%", 100 * bench::quantile(t.peer_tps, 0.5) / limit);
    const std::string peak = ceil->int8_gops > ceil->probe_gops
                                 ? fmt::format("{:.0f} GOPS int8 (a measured prefill's; the probe reached {:.0f})", ceil->int8_gops,
                                               ceil->probe_gops)
                                 : fmt::format("{:.0f} GOPS int8 peak", ceil->int8_gops);
    std::printf("ceiling pp%d: %.2f GOP per token / %s (%d threads) = %.0f t/s; loom %.0f%%%s\n", t.n, ceil->work.ops / 1e9,
                peak.c_str(), threads, limit, 100 * bench::quantile(t.loom_tps, 0.5) / limit, of_peer.c_str());
  }
}

std::vector<int> parse_list(const std::string& s, const char* flag) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      int x = std::stoi(item);
      if (x < 0) throw std::out_of_range("negative");
      if (x > 0) v.push_back(x);
    } catch (const std::exception&) {
      loom::fail("{}: '{}' is not a token count", flag, item);
    }
  }
  return v;
}

loom::cli::RegisterVerb reg("bench", [](CLI::App& root) {
  auto a = std::make_shared<BenchArgs>();
  auto pp = std::make_shared<std::string>("512"), tg = std::make_shared<std::string>("128");
  auto* c = root.add_subcommand("bench", "Measure prompt processing and generation speed (optionally vs llama.cpp); "
                                         "`loom bench serve` load-tests a server");
  c->add_option("-m,--model", a->model, "model.gguf or model.loom (required unless `serve`)");
  c->add_option("--gguf", a->gguf, "weights for a .loom program");
  c->add_option("-p,--pp", *pp, "prompt lengths, comma-separated (0 to skip)")->capture_default_str();
  c->add_option("-n,--tg", *tg, "generation lengths, comma-separated (0 to skip)")->capture_default_str();
  c->add_option("-d,--depth", a->depth, "tokens already in the KV cache")->capture_default_str();
  c->add_option("-r,--reps", a->reps, "repetitions")->capture_default_str()->check(CLI::Range(1, 1000));
  c->add_option("--warmup", a->warmup, "warm-up repetitions (not counted)")->capture_default_str();
  c->add_option("-t,--threads", a->threads, "threads (0: the program's schedule, else all cores)");
  c->add_option("-b,--batch", a->n_batch, "most tokens per prefill step")->capture_default_str();
  auto par = std::make_shared<std::string>();
  c->add_option("--parallel", *par,
                "sequences decoded at once, comma-separated: llama-batched-bench's aggregate S_TG / S_PP with "
                "-p/-n tokens per sequence (its -npl, -npp, -ntg)");
  loom::cli::add_backend_option(*c, a->backend);
  c->add_option("--kv-type", a->kv_type, "Loom's KV cache storage: f16, f32 or q8_0 (the peer keeps its default)")
      ->capture_default_str();
  c->add_option("--vs", a->vs, "peer on the same file: llama.cpp (llama-cpp-python) or a path to llama-bench");
  c->add_flag("--ceiling", a->ceiling, "also measure read bandwidth and int8 peak: the tg and pp ceilings for this file");
  c->add_flag("--json", a->as_json, "machine-readable output");
  c->add_option("--json-schema", a->schemas,
                "structured-output mode: per JSON Schema file, compile time and mask time per token vs the decode step "
                "(generation up to -n tokens)");
  c->add_flag("-q,--quiet", a->quiet, "no progress line");
  // Speculative decoding: decode t/s of one real prompt, plain and with each drafter.
  auto sp = std::make_shared<loom::cli::SpecBenchArgs>();
  auto drafters = std::make_shared<std::string>();
  c->add_option("--spec", *drafters,
                "compare speculative decoding with plain decoding on a prompt (-f): drafters, comma-separated "
                "(lookup, draft:PATH, layers:K); -n is the tokens generated");
  c->add_option("--draft-max", sp->draft_max, "with --spec: most draft tokens per step")->capture_default_str();
  c->add_option("-f,--file", sp->prompt_file, "with --spec: the prompt, from a file");
  c->add_option("--prompt", sp->prompt, "with --spec: the prompt text");
  c->add_flag("--chat", sp->chat, "with --spec: wrap the prompt in the chat template as a user turn");
  auto* serve = loom::cli::add_bench_serve(*c);
  c->callback([a, pp, tg, par, serve, sp, drafters] {
    if (serve->parsed()) return;  // `loom bench serve` ran instead
    if (a->model.empty()) loom::fail("loom bench: --model is required (or `loom bench serve --url URL`)");
    if (!drafters->empty()) {
      std::stringstream ss(*drafters);
      for (std::string d; std::getline(ss, d, ',');)
        if (!d.empty()) sp->drafters.push_back(d);
      sp->model = a->model, sp->gguf = a->gguf, sp->backend = a->backend, sp->kv_type = a->kv_type;
      sp->reps = a->reps, sp->warmup = a->warmup, sp->threads = a->threads;
      sp->as_json = a->as_json, sp->quiet = a->quiet;
      const auto n = parse_list(*tg, "--tg");
      if (n.size() != 1) loom::fail("--spec measures one generation length: give -n N");
      sp->tokens = n[0];
      loom::cli::run_spec_bench(*sp);
      return;
    }
    a->pp = parse_list(*pp, "--pp");
    a->tg = parse_list(*tg, "--tg");
    a->parallel = parse_list(*par, "--parallel");
    if (a->pp.empty() && a->tg.empty()) loom::fail("nothing to measure: both --pp and --tg are 0");
    run_bench(*a);
  });
});

}  // namespace
