// The git operations a session needs, through the git command (a workload is an ordinary
// repository; its own hooks and configuration apply). Each throws loom::Error with git's
// message when git fails.
#pragma once
#include <string>
#include <vector>

namespace loom::tune {

struct CommandResult {
  int status = 0;
  std::string output;  // stdout and stderr together
};

// Runs argv (no shell) in `cwd`; output captured.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd);
// Runs a shell command line in `cwd` (the --agent command), its output appended to `log_path`.
int run_shell(const std::string& command, const std::string& cwd, const std::string& log_path);

// `git -C dir args...`; returns stdout trimmed; throws on a non-zero exit.
std::string git(const std::string& dir, const std::vector<std::string>& args);

}  // namespace loom::tune
