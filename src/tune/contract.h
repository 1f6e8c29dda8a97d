// The contract of a tune session: what is measured, on which inputs, and what a candidate must
// show to be kept. It lives in the workload repository as `loom-tune.json` (JSON with // comments;
// `loom tune init` writes a commented example). Every threshold a gate applies comes from here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::tune {

struct Contract {
  std::string dir;          // the workload directory (paths below are relative to it)
  std::string gguf;         // model weights; relative or absolute
  std::string gguf_sha256;  // required: the weights the session is pinned to
  std::string program;      // the .loom program, inside the repository
  std::string backend = "cpu";
  int threads = 1;          // pinned for both arms; a candidate never changes it
  std::vector<std::string> timing_prompts;
  int generate_tokens = 8;  // greedy decode tokens after each timed prompt
  int pairs = 10;           // paired A/B repetitions of the timing gate (>= 10)
  int warmup = 1;
  std::vector<std::string> selection, heldout;
  double rtol = 1e-3, atol = 1e-2;
  double quality_drop = 0;  // selection mean log-likelihood may fall by at most this
  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  double min_gain = 0.02;   // the timing CI's lower bound must exceed 1 + min_gain
  std::string cache_state = "cold";  // "cold": a fresh sequence per timed run; "warm": its prefix cached (tune/arm.h)
  int budget_candidates = 8;
  int screen_pairs = 3;     // successive halving: the first round's pairs per point
  bool allow_unscored = false;
  uint64_t seed = 1;        // fresh inputs are drawn from (seed, session id)
  std::string script_command;  // a scriptable workload's command (tune/script_result.h); empty: none
  bool script_timing = false;  // the timing gate pairs the script's output_throughput (a workload of that kind)
  // A candidate that edits the engine's source (tune/source_build.h): `build.command` runs
  // through /bin/sh at the top of a fresh checkout of the tree and must leave an executable
  // loom at `build.binary` (relative to that checkout); the arms then run that binary out of
  // process (tune/process_arm.h). Empty command: the arms run in this process (a program-only
  // workload).
  std::string build_command, build_binary;
  // The timing audit: the share of the caller's wall-clock time of a timed run that the arm's
  // own report (timed region plus the untimed warm prefix) must account for; below it, time is
  // being hidden outside the timed region (a run that under-reports its own duration).
  double min_reported_share = 0.75;

  std::string path_of(const std::string& rel) const;  // rel against dir unless absolute
};

inline constexpr const char* kContractFile = "loom-tune.json";

// Reads DIR/loom-tune.json; throws loom::Error naming the field that is missing or wrong.
Contract load_contract(const std::string& dir);
Contract parse_contract(const std::string& text, const std::string& dir, const std::string& filename);

// The commented example `loom tune init` writes.
std::string example_contract(const std::string& gguf, const std::string& sha256, const std::string& program);

}  // namespace loom::tune
