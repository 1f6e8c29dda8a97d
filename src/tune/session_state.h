// What a running session holds, shared by its run loop (session.cpp) and its close (close.cpp).
#pragma once
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tune/arm.h"
#include "tune/contract.h"
#include "tune/gates.h"
#include "tune/session.h"
#include "tune/source_build.h"
#include "tune/verdict.h"

namespace loom::tune {

struct SessionState {
  SessionOptions opts;
  Contract c;                 // read from the original checkout; c.dir is that checkout
  std::string id, dir, worktree, branch, base_commit;
  nlohmann::json manifest;    // manifest.json: written after every decision
  std::ofstream log;

  std::unique_ptr<Arm> baseline, current;
  std::optional<Quality> baseline_quality, current_quality;
  std::vector<std::vector<int32_t>> timing_tokens, selection_tokens;
  int kept = 0;
  // A workload that builds the engine from source (contract `build`): the binary the baseline's
  // arm runs, and the fresh checkouts the baseline, the current program and the candidate under
  // judgement were built in (removed when their arm is dropped). Empty: in-process arms.
  std::string baseline_binary, baseline_build_dir, current_binary, current_build_dir, candidate_binary,
      candidate_build_dir;
  bool from_source() const { return !c.build_command.empty(); }

  std::string program_in(const std::string& root) const { return root + "/" + c.program; }
  std::string baseline_program() const { return dir + "/baseline/program.loom"; }
  ArmSpec spec(const std::string& program) const;
  // An arm on `program`: in this process, or, given a built `binary`, in a child process of
  // that binary whose stderr goes to evidence/logs/arm-<tag>.log.
  std::unique_ptr<Arm> open(const std::string& program, const std::string& binary = {}, const std::string& tag = {}) const;
  // The contract's build of `commit` in the fresh checkout SESSION/builds/<tag> (its log
  // evidence/logs/build-<tag>.log).
  SourceBuild build_tree(const std::string& commit, const std::string& tag) const;
  GateInputs gate_inputs(uint64_t salt) const;
  // One side of a timing: an arm, the program file it was opened on and the loom binary that
  // runs it (a source workload's build; empty: this process).
  struct Side {
    Arm& arm;
    std::string program, loom;
  };
  Side baseline_side() { return {*baseline, baseline_program(), baseline_binary}; }
  Side current_side() { return {*current, current_program_file(), current_binary}; }
  // The contract's timing of side B against side A: the workload script's output_throughput
  // pairs when script.timing is set, else the engine's paired timed runs. `tag` names the
  // script's result folder.
  std::pair<std::vector<double>, std::vector<double>> timed_pairs(const Side& a, const Side& b, uint64_t salt,
                                                                 const std::string& tag);
  // The worktree HEAD's program as a file of its own (the candidate's edits stay in the worktree).
  std::string current_program_file() const;
  void say(const std::string& line);
  void save_manifest() const;
  nlohmann::json& entries() { return manifest["entries"]; }
};

// The close: held-out quality once, final vs baseline timing, clean rebuild, rollback drill,
// the evidence bundle. Returns whether every close gate passed.
bool close_session(SessionState& s);

// Baseline outputs on the timing and selection prompts, concatenated (the reference outputs).
std::vector<float> reference_outputs(Arm& arm, const SessionState& s);

}  // namespace loom::tune
