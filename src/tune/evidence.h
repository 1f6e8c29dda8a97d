// The evidence bundle a session closes with, and its verification (`loom evidence verify`).
//
//   session_breakdown.json  schema "loom.session_breakdown.v1" (docs/tune.md)
//   pin_ledger.json         what the numbers depend on (pin_ledger.h)
//   acceptance_ledger.json  every gate of every candidate and of the close, go / no-go
//   diffs/NNN.diff          the diff of each kept change, in order
//   provenance.json         an in-toto Statement v1 with a SLSA v1 provenance predicate
//   logs/                   the session log (and the agent's output)
//   digests.json            SHA-256 of every file above
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::tune {

inline constexpr const char* kBreakdownSchema = "loom.session_breakdown.v1";

// Writes digests.json over every file under `bundle` (except itself).
void seal_bundle(const std::string& bundle);

// Problems found (empty: verified): digests, schema major version, and the ledger's
// consistency (a kept entry passed every gate, a failed gate reverted, the unscored count,
// each kept diff present with its digest, the provenance subject is the final program).
std::vector<std::string> verify_bundle(const std::string& bundle);

// The in-toto statement for the final program.
nlohmann::json provenance_statement(const std::string& program_name, const std::string& program_sha256,
                                    const nlohmann::json& pins, const nlohmann::json& invocation);

}  // namespace loom::tune
