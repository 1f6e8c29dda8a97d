// The pin ledger: everything a session's numbers depend on, recorded at the baseline so that a
// reader can tell whether a later run is comparable (and `loom evidence verify` can re-check
// the digests it names).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "tune/contract.h"

namespace loom::tune {

// What the running loom binary knows of itself (the CLI fills it from build_info.h).
struct BuildIdentity {
  std::string version, commit, compiler, flags;
};

// `program_path`: the baseline program; `workload_commit`: the workload repository's HEAD.
nlohmann::json pin_ledger(const Contract& c, const BuildIdentity& build, const std::string& program_path,
                          const std::string& workload_commit, int arm_threads);

}  // namespace loom::tune
