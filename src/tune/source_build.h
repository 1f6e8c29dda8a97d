// Building the engine from a workload's source (contract `build`): every tree is built in a
// fresh detached checkout of its own — the baseline's commit, each candidate's state (a
// snapshot commit of the worktree, on no branch), the final commit at close — so nothing a
// previous build left behind can make a later one pass (a clean build, the first gate).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "tune/contract.h"

namespace loom::tune {

struct SourceBuild {
  std::string commit, dir, binary, log;  // dir: the fresh checkout; binary: dir/build.binary
  int exit_status = -1;
  bool ok = false;                       // exited 0 and left an executable at `binary`
  std::string binary_sha256;             // when ok
  std::string detail;                    // what happened; on failure the tail of the build log
  nlohmann::json to_json() const;
};

// A commit of the worktree as it stands (tracked and untracked files, ignored ones excluded),
// made through a scratch index so the worktree, its index and its branch stay as they are.
std::string snapshot_commit(const std::string& worktree, const std::string& scratch_index);

// Checks `commit` of `repo` out at `dir` (a fresh directory: an existing one is removed first)
// and runs the contract's build command there through /bin/sh, its output appended to `log`.
// The environment passes through unchanged (a command that wants ccache hits across fresh
// checkouts sets CCACHE_BASEDIR=$PWD itself). Never throws for a failed build.
SourceBuild build_source(const Contract& c, const std::string& repo, const std::string& commit, const std::string& dir,
                         const std::string& log);

// The last `max_bytes` of a log file ("..." before a cut), for an error that quotes it.
std::string log_tail(const std::string& path, size_t max_bytes);

// Removes a checkout made by build_source (no error when it is already gone).
void remove_checkout(const std::string& repo, const std::string& dir);

}  // namespace loom::tune
