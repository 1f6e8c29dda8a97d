// A candidate change and the producers that propose them, behind one interface: the built-in
// search over the backend's declared schedule keys, and an external agent command. Either way
// the candidate is what it leaves in the session worktree (the diff), nothing it says.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tune/contract.h"

namespace loom::tune {

struct Candidate {
  std::string producer;     // "search" | "agent"
  std::string description;  // e.g. `matmul = {layout = "rows"}`
  nlohmann::json point;     // what was tried, machine-readable
  // Edits the worktree (program file or project files). Throws loom::Error when it cannot.
  std::function<void(const std::string& worktree)> apply;
};

class CandidateProducer {
 public:
  virtual ~CandidateProducer() = default;
  virtual std::string name() const = 0;
  // The candidates to try from the worktree's current state (read fresh after every keep).
  virtual std::vector<Candidate> propose(const Contract& c, const std::string& worktree) = 0;
};

// One-at-a-time points around the current schedule: every declared key except those the
// contract pins (threads) or that only diagnose (dump_dir, profile), each at the values it does
// not already hold (booleans flipped, choices, integers at range ends and x0.5 / x2).
std::unique_ptr<CandidateProducer> make_schedule_search(int budget);
// Runs `command` through /bin/sh in the worktree once, with LOOM_TUNE_BRIEF naming a brief file.
std::unique_ptr<CandidateProducer> make_agent(std::string command, std::string log_path);

}  // namespace loom::tune
