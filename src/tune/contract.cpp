#include "tune/contract.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"

namespace loom::tune {

using nlohmann::json;

std::string Contract::path_of(const std::string& rel) const {
  if (rel.empty() || rel[0] == '/') return rel;
  return (std::filesystem::path(dir) / rel).string();
}

namespace {

struct Reader {
  const json& j;
  std::string file;
  const json* at(const std::string& key, bool required) const {
    const json* cur = &j;
    std::stringstream ss(key);
    std::string part;
    while (std::getline(ss, part, '.')) {
      if (!cur->is_object() || !cur->contains(part)) {
        if (required) loom::fail("{}: missing field '{}'", file, key);
        return nullptr;
      }
      cur = &(*cur)[part];
    }
    return cur->is_null() && !required ? nullptr : cur;
  }
  template <typename T>
  void get(const std::string& key, T& out, bool required = false) const {
    const json* v = at(key, required);
    if (!v) return;
    try {
      out = v->get<T>();
    } catch (const json::exception&) {
      loom::fail("{}: field '{}' has the wrong type ({})", file, key, v->type_name());
    }
  }
};

}  // namespace

Contract parse_contract(const std::string& text, const std::string& dir, const std::string& filename) {
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    loom::fail("{}: not valid JSON: {}", filename, e.what());
  }
  Contract c;
  c.dir = dir;
  Reader r{j, filename};
  std::string version;
  r.get("schema_version", version, true);
  if (version.rfind("loom.tune_contract.v1", 0) != 0)
    loom::fail("{}: schema_version '{}' is not loom.tune_contract.v1", filename, version);
  r.get("model.gguf", c.gguf, true);
  r.get("model.sha256", c.gguf_sha256, true);
  r.get("program", c.program, true);
  r.get("backend", c.backend);
  r.get("threads", c.threads);
  r.get("timing.prompts", c.timing_prompts, true);
  r.get("timing.generate_tokens", c.generate_tokens);
  r.get("timing.pairs", c.pairs);
  r.get("timing.warmup", c.warmup);
  r.get("selection", c.selection);
  r.get("heldout", c.heldout);
  r.get("tolerances.rtol", c.rtol);
  r.get("tolerances.atol", c.atol);
  r.get("tolerances.quality_drop", c.quality_drop);
  double v = 0;
  if (r.at("slo.ttft_ms", false)) c.slo_ttft_ms = (r.get("slo.ttft_ms", v), v);
  if (r.at("slo.tpot_ms", false)) c.slo_tpot_ms = (r.get("slo.tpot_ms", v), v);
  r.get("min_gain", c.min_gain);
  r.get("cache_state", c.cache_state);
  r.get("budget.candidates", c.budget_candidates);
  r.get("budget.screen_pairs", c.screen_pairs);
  r.get("allow_unscored", c.allow_unscored);
  r.get("seed", c.seed);
  r.get("script.command", c.script_command);
  r.get("script.timing", c.script_timing);
  r.get("build.command", c.build_command);
  r.get("build.binary", c.build_binary);
  r.get("timing.min_reported_share", c.min_reported_share);

  if (c.gguf_sha256.size() != 64) loom::fail("{}: model.sha256 must be 64 hex digits", filename);
  if (c.threads < 1) loom::fail("{}: threads must be >= 1 (pinned for both arms), found {}", filename, c.threads);
  if (c.timing_prompts.empty()) loom::fail("{}: timing.prompts is empty", filename);
  if (c.pairs < 10) loom::fail("{}: timing.pairs must be at least 10, found {}", filename, c.pairs);
  if (c.generate_tokens < 0 || c.warmup < 0) loom::fail("{}: timing counts must not be negative", filename);
  if (!(c.rtol >= 0) || !(c.atol >= 0) || !(c.quality_drop >= 0))
    loom::fail("{}: tolerances must be non-negative numbers", filename);
  if (!(c.min_gain >= 0)) loom::fail("{}: min_gain must be >= 0, found {}", filename, c.min_gain);
  if (c.cache_state != "cold" && c.cache_state != "warm")
    loom::fail("{}: cache_state '{}': expected \"cold\" or \"warm\"", filename, c.cache_state);
  if (c.script_timing && c.script_command.empty())
    loom::fail("{}: script.timing is true but script.command is not set", filename);
  if (!c.build_command.empty() && c.build_binary.empty())
    loom::fail("{}: build.command is set but build.binary (where the build leaves loom) is not", filename);
  if (!c.build_binary.empty() && (c.build_binary[0] == '/' || c.build_binary.find("..") != std::string::npos))
    loom::fail("{}: build.binary '{}' must be a path inside the checkout (relative, no '..')", filename, c.build_binary);
  if (!(c.min_reported_share > 0 && c.min_reported_share <= 1))
    loom::fail("{}: timing.min_reported_share must be in (0, 1], found {}", filename, c.min_reported_share);
  if (c.budget_candidates < 0 || c.screen_pairs < 1) loom::fail("{}: budget must be >= 0 and screen_pairs >= 1", filename);
  return c;
}

Contract load_contract(const std::string& dir) {
  const auto path = (std::filesystem::path(dir) / kContractFile).string();
  std::ifstream in(path);
  if (!in) loom::fail("cannot open the contract {} (write one with `loom tune init {}`)", path, dir);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_contract(ss.str(), dir, path);
}

std::string example_contract(const std::string& gguf, const std::string& sha256, const std::string& program) {
  return fmt::format(R"({{
  // loom tune contract (docs/tune.md). Every threshold a gate applies comes from this file.
  "schema_version": "loom.tune_contract.v1",
  // The weights the session is pinned to: a file whose SHA-256 differs is refused.
  "model": {{ "gguf": {}, "sha256": "{}" }},
  // The program the session may change (its schedule), relative to this directory.
  "program": {},
  "backend": "cpu",
  // Threads for both arms of every comparison; a candidate never changes it.
  "threads": 1,
  "timing": {{
    // Timed runs use fresh random tokens of each prompt's length (the same for A and B of a
    // pair, new for every pair), so an output cache cannot make a candidate look faster.
    "prompts": ["The quick brown fox jumps over the lazy dog.", "Once upon a time"],
    "generate_tokens": 8,   // greedy decode steps after each prompt
    "pairs": 10,            // paired interleaved A/B repetitions; at least 10
    "warmup": 1
  }},
  // Selection texts score candidates (mean log-likelihood per token, greedy agreement);
  // held-out texts are scored once, at close, on the final program only.
  "selection": ["The capital of France is Paris.", "Water boils at one hundred degrees."],
  "heldout": ["A journey of a thousand miles begins with a single step."],
  "tolerances": {{
    "rtol": 0.001, "atol": 0.01,   // |candidate - baseline| <= atol + rtol * |baseline|, every logit
    "quality_drop": 0.0            // selection log-likelihood may not fall below baseline - this
  }},
  // Latency objectives (null: none); checked on the candidate's timed runs (medians).
  "slo": {{ "ttft_ms": null, "tpot_ms": null }},
  // Keep only when the paired bootstrap 95% CI of the speed ratio has its lower bound > 1 + min_gain.
  "min_gain": 0.02,
  // "cold": every timed run prefills its whole prompt on a fresh sequence; "warm": all but the
  // prompt's last token is in the cache first, untimed, as a prefix-cache hit leaves it.
  "cache_state": "cold",
  // Built-in search: at most this many schedule points, screened with screen_pairs pairs each;
  // the better half goes through every gate (successive halving).
  "budget": {{ "candidates": 8, "screen_pairs": 3 }},
  // A candidate with no quality signal (no selection texts) is kept only when this is true.
  "allow_unscored": false,
  "seed": 1,
  // A workload that also holds the engine's source (optional): a candidate may then edit the
  // source as well as the program. "command" runs through /bin/sh at the top of a fresh
  // checkout of each tree (the baseline's, every candidate's, the final one at close: a clean
  // build, nothing kept from an earlier build; the environment passes through, so a command
  // using ccache sets CCACHE_BASEDIR=$PWD to share it across checkouts) and must leave an
  // executable loom at "binary" (relative to that checkout); a failed build reverts the
  // candidate. Each arm is then that binary, run as a child process with its model loaded.
  // "build": {{ "command": "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build --target loom",
  //             "binary": "build/bin/loom" }},
  // A scriptable workload (optional): a command run in each program's checkout with
  // LOOM_TUNE_PROGRAM and LOOM_TUNE_RESULT set, which writes {{"output_throughput": N,
  // "quality_gate": {{"passed": true, ...}}}} to $LOOM_TUNE_RESULT; one more gate, failing closed.
  // With "timing": true the workload is the script's: the timing gate pairs its
  // output_throughput (current program, then candidate, interleaved, `timing.pairs` rounds, each
  // run's quality gate passing) instead of the engine's own timed runs.
  "script": {{ "command": null, "timing": false }}
}}
)",
                     json(gguf).dump(), sha256, json(program).dump());
}

}  // namespace loom::tune
