// The close of a session: held-out quality once on the final program, the final program timed
// against the baseline, a clean rebuild from a fresh checkout of the final commit, a rollback
// drill to the baseline commit, and the evidence bundle.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "tune/digest.h"
#include "tune/evidence.h"
#include "tune/git.h"
#include "tune/session_state.h"

namespace loom::tune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json quality_json(const std::optional<Quality>& q) {
  return q ? json{{"mean_loglik", q->mean_loglik}, {"tokens", q->tokens}} : json(nullptr);
}

// A fresh detached checkout of `commit`, opened and checked against `expected` outputs.
// With `time_against` (the session's final program), the rebuilt program is also timed, paired,
// against that arm, and gated one way: a rebuild measurably slower than it — the CI's upper bound
// below both 1 - min_gain (the smallest difference the session counts) and the lower bound of the
// baseline timed against itself (the noise this session measured) — does not reproduce its
// timings, when a second timing, of the rebuild opened again, on fresh inputs, confirms it. An
// interval that merely misses 1 is recorded, not failed: an A/A interval on a loaded machine
// misses 1 more often than 5% of the time, and a close must not fail on noise.
GateResult fresh_checkout_gate(SessionState& s, const std::string& name, const std::string& commit,
                               const std::vector<float>& expected, const std::string& what, Arm* time_against = nullptr) {
  const std::string path = s.dir + "/" + name;
  GateResult g{name};
  try {
    std::string binary;  // the rebuilt loom, for a source workload; empty: this process
    if (s.from_source()) {
      // The source too is built again, with the contract's command, in this fresh checkout.
      const auto b = build_source(s.c, s.manifest["workload"], commit, path, s.dir + "/evidence/logs/build-" + name + ".log");
      g.metrics = {{"commit", commit}, {"build", b.to_json()}};
      if (!b.ok) loom::fail("{}", b.detail);
      binary = b.binary;
    } else {
      if (fs::exists(path)) git(s.manifest["workload"], {"worktree", "remove", "--force", path});
      git(s.manifest["workload"], {"worktree", "add", "-q", "--detach", path, commit});
    }
    const auto open_rebuilt = [&] { return s.open(s.program_in(path), binary, name); };
    auto arm = open_rebuilt();
    const auto got = reference_outputs(*arm, s);
    g.passed = got.size() == expected.size() && std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0;
    g.metrics["commit"] = commit;
    g.metrics["values"] = got.size();
    g.detail = g.passed ? what + ": outputs reproduced bit for bit" : what + ": outputs differ";
    if (time_against && g.passed) {
      double floor = 1.0 - s.c.min_gain;
      const json self = s.manifest.value("baseline", json::object()).value("self_timing", json::object());
      if (self.contains("ci95") && self["ci95"].is_array() && !self["ci95"].empty() && self["ci95"][0].is_number())
        floor = std::min(floor, self["ci95"][0].get<double>());
      // One paired timing: its record, and whether it reads measurably slower.
      const auto timed = [&](uint64_t salt) {
        const auto t = time_pair(*time_against, *arm, s.c, s.gate_inputs(salt), s.c.pairs, process_threads());
        const auto r = bench::paired_ratio(t.a_tps, t.b_tps);
        const json m = {{"pairs", r.pairs}, {"ratio_median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}},
                        {"ci_holds_1", r.ci_lo <= 1 && 1 <= r.ci_hi}, {"fails_below", floor},
                        {"final_tps", t.a_tps}, {"rebuilt_tps", t.b_tps}};
        return std::pair{m, r.ci_hi < floor};
      };
      const auto said = [](const json& m) {
        return fmt::format("ratio {:.4f} [{:.4f}, {:.4f}]", m["ratio_median"].get<double>(), m["ci95"][0].get<double>(),
                           m["ci95"][1].get<double>());
      };
      auto [first, slower] = timed(7777);
      g.metrics["rebuilt_vs_final"] = first;
      g.detail += "; timed against the session's final program: " + said(first);
      // The confirmation, by an arm of the rebuild opened again (its memory laid out anew): a
      // process's speed on a tiny model depends on where its buffers landed. Measured on a 2-core
      // host: one 10-pair interval of an in-process rebuild identical to the final program fell
      // below the floor in 2 of 75 sessions; child processes of one binary and program, pinned to
      // one CPU and timed side by side, ran at levels 15-35% apart that held for the process's
      // life (and moved when a larger batch reallocated its arena). A rebuild that truly drifts
      // reads slower both times.
      if (slower) {
        arm.reset();
        arm = open_rebuilt();
        auto [again, still] = timed(7778);
        g.metrics["confirmation"] = again;
        g.detail += "; again, reopened, on fresh inputs: " + said(again);
        slower = still;
      }
      g.detail += slower ? fmt::format(": measurably slower twice (upper bound below {:.4f}: 1 - min_gain, or the "
                                       "baseline's own A/A lower bound if lower), so the final timings are not "
                                       "reproduced", floor)
                  : first["ci_holds_1"].get<bool>() ? ""
                                                    : " (outside 1, not measurably slower twice: recorded)";
      g.passed = !slower;
    }
  } catch (const std::exception& e) {
    g.detail = what + ": " + e.what();
  }
  remove_checkout(s.manifest["workload"], path);
  return g;
}

}  // namespace

bool close_session(SessionState& s) {
  std::vector<GateResult> close;
  const std::string final_commit = git(s.worktree, {"rev-parse", "HEAD"});
  const std::string final_program = s.program_in(s.worktree);
  // Held-out: scored now, once, on the final program (and the baseline, for the comparison);
  // never seen by a gate during selection.
  std::optional<Quality> held_base, held_final;
  if (!s.c.heldout.empty()) {
    const auto texts = tokenize_for(s.spec(s.baseline_program()), s.c.heldout, 2);
    held_base = score_quality(*s.baseline, texts);
    held_final = score_quality(*s.current, texts);
  }
  GateResult held = quality_gate(held_base, held_final, s.c.quality_drop, s.c.allow_unscored);
  held.name = "heldout_quality";
  close.push_back(held);

  json final_timing = nullptr;
  if (s.kept > 0) {
    const auto [ta, tb] = s.timed_pairs(s.baseline_side(), s.current_side(), 9999, "final");
    const auto r = bench::paired_ratio(ta, tb);
    final_timing = {{"pairs", r.pairs}, {"ratio_median", r.median}, {"ci95", {r.ci_lo, r.ci_hi}},
                    {"tps_median", bench::quantile(tb, 0.5)}, {"source", s.c.script_timing ? "script" : "engine"}};
  }
  const auto final_outputs = reference_outputs(*s.current, s);
  close.push_back(fresh_checkout_gate(s, "clean_rebuild", final_commit, final_outputs,
                                      "a fresh checkout of the final commit, compiled again", s.current.get()));
  const auto base_outputs = reference_outputs(*s.baseline, s);
  close.push_back(fresh_checkout_gate(s, "rollback_drill", s.base_commit, base_outputs,
                                      "the baseline commit checked out again and health-checked"));
  bool all = true;
  for (const auto& g : close) all = all && g.passed;

  // The bundle. Out-of-process arms end first, so that nothing writes to their logs once sealed.
  s.current.reset();
  s.baseline.reset();
  const std::string ev = s.dir + "/evidence";
  fs::create_directories(ev);
  const json& pins = s.manifest["pins"];
  write_text(ev + "/pin_ledger.json", pins.dump(2) + "\n");
  json ledger = {{"schema_version", "loom.acceptance_ledger.v1"}, {"candidates", json::array()}, {"close", json::array()}};
  for (const auto& e : s.entries())
    ledger["candidates"].push_back({{"id", e["id"]}, {"decision", e["decision"]}, {"gates", e["gates"]}});
  for (const auto& g : close) ledger["close"].push_back(g.to_json());
  write_text(ev + "/acceptance_ledger.json", ledger.dump(2) + "\n");
  int unscored = 0;
  for (const auto& e : s.entries()) unscored += e["decision"] == "keep" && e["unscored"].get<bool>();
  const std::string final_sha = sha256_file(final_program);
  const auto& b = s.manifest["baseline"];
  json breakdown = {
      {"schema_version", kBreakdownSchema},
      {"session", {{"id", s.id}, {"branch", s.branch}, {"base_commit", s.base_commit}, {"final_commit", final_commit},
                   {"producers", {{"search", s.manifest["options"]["search"]}, {"agent", s.manifest["options"]["agent"]}}},
                   {"budget", s.manifest["options"]["budget"]}}},
      {"workload", {{"dir", s.manifest["workload"]}, {"program", s.c.program}, {"model_sha256", s.c.gguf_sha256},
                    {"backend", s.c.backend}, {"threads", s.c.threads}, {"contract_sha256", pins["workload"]["contract_sha256"]},
                    {"cache_state", s.c.cache_state}, {"min_gain", s.c.min_gain}, {"pairs", s.c.pairs},
                    {"build", s.from_source() ? json{{"command", s.c.build_command}, {"binary", s.c.build_binary}}
                                              : json(nullptr)}}},
      {"baseline", {{"program_sha256", pins["program"]["sha256"]}, {"tps_median", b["tps_median"]},
                    {"self_timing", b["self_timing"]}, {"selection_quality", b["selection_quality"]},
                    {"heldout_quality", quality_json(held_base)},
                    {"reference_outputs_sha256", b["reference_outputs_sha256"]}}},
      {"final", {{"program_sha256", final_sha}, {"commit", final_commit}, {"kept", s.kept},
                 {"vs_baseline", final_timing},
                 {"gain_pct", final_timing.is_null() ? json(nullptr) : json((final_timing["ratio_median"].get<double>() - 1) * 100)},
                 {"selection_quality", quality_json(s.current_quality)}, {"heldout_quality", quality_json(held_final)},
                 {"summary", s.kept == 0 ? "the baseline is already the best point found: nothing kept"
                                         : fmt::format("{} change(s) kept", s.kept)}}},
      {"optimizations", {{"entries", s.entries()}}},
      {"validation", {{"unscored_keep_count", unscored}, {"close_gates_passed", all},
                      {"close", ledger["close"]}}},
  };
  write_text(ev + "/session_breakdown.json", breakdown.dump(2) + "\n");
  const json invocation = {{"session", s.id}, {"workload", s.manifest["workload"]}, {"base_commit", s.base_commit},
                           {"options", s.manifest["options"]}};
  write_text(ev + "/provenance.json", provenance_statement(s.c.program, final_sha, pins, invocation).dump(2) + "\n");
  s.say(fmt::format("closed: {}; close gates {}", breakdown["final"]["summary"].get<std::string>(),
                    all ? "passed" : "FAILED"));
  s.log.close();
  seal_bundle(ev);
  return all;
}

}  // namespace loom::tune
