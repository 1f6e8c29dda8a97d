#include "tune/script_result.h"

#include <fmt/format.h>

#include <filesystem>

#include "bench/paired.h"
#include "common/error.h"
#include "tune/digest.h"
#include "tune/git.h"

namespace loom::tune {

using nlohmann::json;

GateResult script_result_gate(int exit_status, const std::string& result_text) {
  GateResult g{"script"};
  if (exit_status != 0) {
    g.detail = fmt::format("the workload script exited with status {}", exit_status);
    return g;
  }
  if (result_text.empty()) {
    g.detail = "the workload script wrote no result";
    return g;
  }
  json r;
  try {
    r = json::parse(result_text);
  } catch (const json::exception& e) {
    g.detail = std::string("the result is not JSON: ") + e.what();
    return g;
  }
  if (!r.is_object() || !r.contains("output_throughput") || !r["output_throughput"].is_number() ||
      !(r["output_throughput"].get<double>() > 0)) {
    g.detail = "the result has no positive number output_throughput";
    return g;
  }
  const json* q = r.contains("quality_gate") ? &r["quality_gate"] : nullptr;
  if (!q || !q->is_object() || !q->contains("passed") || !(*q)["passed"].is_boolean()) {
    g.detail = "the result has no quality_gate object with a boolean passed";
    return g;
  }
  g.metrics = {{"output_throughput", r["output_throughput"]}, {"quality_gate", *q}};
  if (q->value("skipped", false)) {
    g.detail = "the script's quality gate was skipped (fails closed)";
    return g;
  }
  g.passed = (*q)["passed"].get<bool>();
  g.detail = fmt::format("output_throughput {}; the script's quality gate {}", r["output_throughput"].dump(),
                         g.passed ? "passed" : "failed");
  return g;
}

GateResult run_script_gate(const Contract& c, const std::string& cwd, const std::string& program,
                           const std::string& result_path, const std::string& log, const std::string& loom) {
  std::filesystem::remove(result_path);
  const std::string built = loom.empty() ? "" : "LOOM_TUNE_LOOM='" + loom + "' ";
  const int rc = run_shell(built + "LOOM_TUNE_PROGRAM='" + program + "' LOOM_TUNE_RESULT='" + result_path + "' " +
                               c.script_command,
                           cwd, log);
  std::string text;
  if (std::filesystem::exists(result_path)) text = read_text(result_path);
  return script_result_gate(rc, text);
}

ScriptPairs script_pairs(const Contract& c, const std::string& cwd, const std::string& a_program,
                         const std::string& b_program, const std::string& result_dir, const std::string& log,
                         int pairs, const std::string& a_loom, const std::string& b_loom) {
  std::filesystem::create_directories(result_dir);
  const auto one = [&](const std::string& program, const char* arm, int round) {
    const auto g = run_script_gate(c, cwd, program, fmt::format("{}/{}-{}.json", result_dir, arm, round), log,
                                   std::string(arm) == "current" ? a_loom : b_loom);
    if (!g.passed) loom::fail("script timing, {} run of round {}: {}", arm, round, g.detail);
    return g.metrics["output_throughput"].get<double>();
  };
  const auto run = bench::run_paired(
      c.warmup, pairs, [&](int r, bool) { return one(a_program, "current", r); },
      [&](int r, bool) { return one(b_program, "candidate", r); });
  return {run.a, run.b};
}

}  // namespace loom::tune
