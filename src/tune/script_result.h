// A scriptable workload's verdict: a team's own command (the contract's `script.command`) run
// against each program writes a result JSON — `output_throughput` and a `quality_gate` object
// with `passed` plus its metrics, the shape existing custom-workload scripts of other
// optimizers emit — and the session holds the candidate to it as one more gate. A command that
// fails, or a result that is missing, unparseable, lacks either field or marks its gate skipped,
// fails closed.
#pragma once
#include <string>
#include <vector>

#include "tune/contract.h"
#include "tune/gates.h"

namespace loom::tune {

// `exit_status` of the command; `result_text` the file's bytes (empty: none was written).
GateResult script_result_gate(int exit_status, const std::string& result_text);

// Runs the contract's script in `cwd` with LOOM_TUNE_PROGRAM (the program to measure) and
// LOOM_TUNE_RESULT (where to write the result, outside any worktree) set; output to `log`.
// `loom`: the loom binary built from the program's source tree (a workload with a `build`
// section), handed over as LOOM_TUNE_LOOM; empty: not set.
GateResult run_script_gate(const Contract& c, const std::string& cwd, const std::string& program,
                           const std::string& result_path, const std::string& log, const std::string& loom = {});

// A script-timed workload's pairs: `warmup` + `pairs` rounds, each running the script on
// `a_program` then `b_program`; a round's rate is its output_throughput. Any run whose gate
// fails (command, result, or its quality gate) throws loom::Error naming the run: no rate is
// taken from a run that did not pass.
struct ScriptPairs {
  std::vector<double> a, b;
};
ScriptPairs script_pairs(const Contract& c, const std::string& cwd, const std::string& a_program,
                         const std::string& b_program, const std::string& result_dir, const std::string& log,
                         int pairs, const std::string& a_loom = {}, const std::string& b_loom = {});

}  // namespace loom::tune
