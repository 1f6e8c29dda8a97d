// A scriptable workload's verdict: a team's own command (the contract's `script.command`) run
// against each program writes a result JSON — `output_throughput` and a `quality_gate` object
// with `passed` plus its metrics, the shape existing custom-workload scripts of other
// optimizers emit — and the session holds the candidate to it as one more gate. A command that
// fails, or a result that is missing, unparseable, lacks either field or marks its gate skipped,
// fails closed.
#pragma once
#include <string>

#include "tune/contract.h"
#include "tune/gates.h"

namespace loom::tune {

// `exit_status` of the command; `result_text` the file's bytes (empty: none was written).
GateResult script_result_gate(int exit_status, const std::string& result_text);

// Runs the contract's script in `cwd` with LOOM_TUNE_PROGRAM (the program to measure) and
// LOOM_TUNE_RESULT (where to write the result, outside any worktree) set; output to `log`.
GateResult run_script_gate(const Contract& c, const std::string& cwd, const std::string& program,
                           const std::string& result_path, const std::string& log);

}  // namespace loom::tune
