// A tune session (docs/tune.md): the workload repository's contract, a git worktree of its
// own on branch loom-tune/<id>, a baseline, candidates from the producers judged by every gate
// (keep = a commit whose message carries the gate results; revert = the worktree reset), and a
// close that scores the held-out set once, checks a clean rebuild, drills a rollback and
// writes the evidence bundle. Its manifest (SESSION/manifest.json) is rewritten after every
// decision, so `loom tune resume` continues where an interrupted session stopped.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tune/pin_ledger.h"

namespace loom::tune {

struct SessionOptions {
  std::string workload;     // the workload repository (its checkout is never modified)
  std::string session_dir;  // empty: <workload>.tune/<id>
  std::string agent;        // --agent CMD; empty: none
  bool search = true;       // the built-in schedule search
  std::optional<int> budget;  // overrides the contract's budget.candidates
  BuildIdentity build;
};

// Runs a session to its close; returns the session directory.
std::string run_session(const SessionOptions& o);
// Continues the session in `session_dir` from its manifest (decided candidates are not retried).
std::string resume_session(const std::string& session_dir, const BuildIdentity& build);
// Applies the session's kept commits to the original checkout (fast-forward), only when the
// session closed with every close gate passed and its bundle verifies. Returns what it did.
std::string accept_session(const std::string& session_dir);

}  // namespace loom::tune
