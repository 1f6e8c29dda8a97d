#include "tune/verdict.h"

#include <atomic>
#include <tuple>
#include <thread>

#include "bench/paired.h"

namespace loom::tune {

using nlohmann::json;

json Verdict::to_json() const {
  json g = json::array();
  for (const auto& x : gates) g.push_back(x.to_json());
  return {{"gates", g}, {"decision", keep ? "keep" : "revert"}, {"unscored", unscored}};
}

PairedTiming time_pair(Arm& a, Arm& b, const Contract& c, const GateInputs& in, int pairs, int threads_before) {
  PairedTiming out;
  std::atomic<bool> stop{false};
  std::atomic<int> seen{0}, running{0};  // running: 0 none, 1 A, 2 B
  // An arm in a process of its own is counted there (its main thread and whatever it starts);
  // an in-process arm by this process's threads beyond those alive before it opened.
  const bool own_process = b.own_threads().has_value();
  const auto threads_now = [&] { return own_process ? b.own_threads().value_or(0) : process_threads(); };
  // While A runs: A's own process where it has one (see below).
  const bool a_own_process = a.own_threads().has_value();
  const auto threads_of_a = [&] { return a_own_process ? a.own_threads().value_or(0) : threads_now(); };
  // Samples the threads while B runs: a candidate that starts workers behind the contract's
  // back shows them here even when it joins them before returning. The sampling costs the run
  // it watches, so A's runs are sampled the same way (and the count dropped): sampled during B's
  // runs only, a baseline timed against itself read 0.936 [0.925, 0.957] on a 2-core host
  // (in-process, every 200 us). Another process's /proc entries are read every 2 ms, not 200 us:
  // at 200 us the reads slowed the child they watched (0.85-0.92 A/A). So it is the running
  // arm's entries that are read, A's during A's runs as B's during B's: reading B's only left
  // the reads' cost on B alone whenever the arms were two processes.
  std::thread watcher([&] {
    while (!stop.load()) {
      if (const int r = running.load()) {
        const int n = r == 2 ? threads_now() : threads_of_a();
        if (r == 2) seen = std::max(seen.load(), n);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(own_process ? 2000 : 200));
    }
  });
  const auto input = [&](int round) {
    const size_t k = size_t(round + c.warmup) % in.timing_lengths.size();
    return fresh_inputs(in.seed * 1000003 + uint64_t(round + c.warmup), 1, in.timing_lengths[k], a.vocab())[0];
  };
  const bool warm_cache = c.cache_state == "warm";
  const auto rate = [](const Timed& t) { return (t.prompt_tokens + t.generated_tokens) / t.seconds(); };
  try {
    const auto run = bench::run_paired(
        c.warmup, pairs,
        [&](int r, bool warm) {
          const auto prompt = input(r);
          running = 1;
          const auto called = std::chrono::steady_clock::now();
          const Timed t = a.timed_run(prompt, c.generate_tokens, warm_cache);
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
          running = 0;
          if (!warm) {
            out.a_runs.push_back(t);
            out.a_wall_seconds.push_back(wall);
          }
          return rate(t);
        },
        [&](int r, bool warm) {
          const auto prompt = input(r);
          running = 2;
          const auto called = std::chrono::steady_clock::now();
          const Timed t = b.timed_run(prompt, c.generate_tokens, warm_cache);
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
          running = 0;
          // Persistent workers are visible at any time, however short the run was.
          seen = std::max(seen.load(), threads_now());
          if (!warm) {
            out.b_runs.push_back(t);
            out.b_wall_seconds.push_back(wall);
          }
          return rate(t);
        });
    out.a_tps = run.a;
    out.b_tps = run.b;
  } catch (...) {
    stop = true;
    watcher.join();
    throw;
  }
  stop = true;
  watcher.join();
  out.extra_threads = own_process ? std::max(0, seen.load() - 1 /*its main thread*/)
                                  : std::max(0, seen.load() - 1 /*the watcher*/ - threads_before);
  return out;
}

Verdict judge(Arm& baseline, Arm& current, Arm& candidate, const Contract& c, const GateInputs& in, int threads_before) {
  Verdict v;
  const auto pass = [&](GateResult g) {
    v.gates.push_back(std::move(g));
    return v.gates.back().passed;
  };
  // An arm that throws (a child process that died, an engine error) fails the gate it was
  // measuring for, with its error; the session goes on to the next candidate.
  const auto guarded = [&](const char* name, const std::string& who, auto&& gate) {
    try {
      return pass(gate());
    } catch (const std::exception& e) {
      return pass({name, false, who + " failed to run: " + e.what()});
    }
  };
  const auto finish = [&]() {
    for (const char* name : {"structural", "repeat_input", "numerical", "quality", "threads", "timing_audit", "timing", "slo"}) {
      bool seen = false;
      for (const auto& g : v.gates) seen = seen || g.name == name;
      if (!seen) v.gates.push_back({name, false, "not run: an earlier gate failed", json::object()});
    }
    return v;
  };
  // Fresh inputs, different for every candidate: the outputs compared are computed now, by
  // both arms, never looked up. X, Y, X for the repeat check; the numerical gate uses X and Y.
  const int len = *std::max_element(in.timing_lengths.begin(), in.timing_lengths.end());
  const auto fresh = fresh_inputs(in.seed, 2, len, current.vocab());
  std::vector<Observation> cand, base;
  try {
    cand.push_back(observe(candidate, fresh[0]));
    cand.push_back(observe(candidate, fresh[1]));
    cand.push_back(observe(candidate, fresh[0]));
  } catch (const std::exception& e) {
    pass({"structural", false, std::string("the candidate failed to run: ") + e.what()});
    return finish();
  }
  if (!pass(structural_gate(cand))) return finish();
  if (!pass(repeat_input_gate(cand[0], cand[1], cand[2]))) return finish();
  if (!guarded("numerical", "the baseline", [&] {
        base.push_back(observe(baseline, fresh[0]));
        base.push_back(observe(baseline, fresh[1]));
        return numerical_gate(base, {cand[0], cand[1]}, c.rtol, c.atol);
      }))
    return finish();
  if (!guarded("quality", "the candidate", [&] {
        if (!in.selection.empty()) v.quality = score_quality(candidate, in.selection);
        v.unscored = !v.quality;
        return quality_gate(in.baseline_quality, v.quality, c.quality_drop, c.allow_unscored);
      }))
    return finish();
  PairedTiming t;
  try {
    t = time_pair(current, candidate, c, in, c.pairs, threads_before);
  } catch (const std::exception& e) {
    pass({"timing", false, std::string("the timed runs (current program, then candidate) failed: ") + e.what()});
    return finish();
  }
  v.a_tps = t.a_tps;
  v.b_tps = t.b_tps;
  v.candidate_runs = t.b_runs;
  const bool threads_ok = pass(threads_gate(c.threads, candidate.threads(), t.extra_threads));
  const bool audit_ok = pass(timing_audit_gate(t, c.min_reported_share, c.cache_state == "warm"));
  bool timing_ok = false;
  if (in.script_timing) {
    try {
      std::tie(v.a_tps, v.b_tps) = in.script_timing();
      GateResult g = timing_gate(v.a_tps, v.b_tps, c.min_gain, 10);
      g.detail = "the script's output_throughput: " + g.detail;
      g.metrics["source"] = "script";
      timing_ok = pass(std::move(g));
    } catch (const std::exception& e) {
      timing_ok = pass({"timing", false, std::string("the workload script: ") + e.what()});
    }
  } else {
    timing_ok = pass(timing_gate(t.a_tps, t.b_tps, c.min_gain, 10));
  }
  const bool slo_ok = pass(slo_gate(c, t.b_runs));
  v.keep = threads_ok && audit_ok && timing_ok && slo_ok;
  return v;
}

}  // namespace loom::tune
