#include "tune/source_build.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tune/digest.h"
#include "tune/git.h"

namespace loom::tune {

namespace fs = std::filesystem;
using nlohmann::json;

std::string log_tail(const std::string& path, size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return all.size() > max_bytes ? "..." + all.substr(all.size() - max_bytes) : all;
}

json SourceBuild::to_json() const {
  return {{"commit", commit},
          {"exit_status", exit_status},
          {"ok", ok},
          {"binary_sha256", ok ? json(binary_sha256) : json(nullptr)},
          {"log", log}};
}

std::string snapshot_commit(const std::string& worktree, const std::string& scratch_index) {
  const auto with_index = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{"env", "GIT_INDEX_FILE=" + scratch_index, "git", "-C", worktree};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_command(argv, worktree);
    if (r.status != 0) loom::fail("snapshot of {} failed: {}", worktree, r.output);
    while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' ')) r.output.pop_back();
    return r.output;
  };
  fs::remove(scratch_index);
  with_index({"read-tree", "HEAD"});
  with_index({"add", "-A"});
  const std::string tree = with_index({"write-tree"});
  fs::remove(scratch_index);
  return git(worktree, {"-c", "user.name=loom tune", "-c", "user.email=loom-tune@localhost", "commit-tree", tree, "-p",
                        "HEAD", "-m", "loom tune: a candidate's tree, for its clean build (not a decision)"});
}

void remove_checkout(const std::string& repo, const std::string& dir) {
  if (dir.empty()) return;
  try {
    git(repo, {"worktree", "remove", "--force", dir});
  } catch (const std::exception&) {
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  try {
    git(repo, {"worktree", "prune"});
  } catch (const std::exception&) {
  }
}

SourceBuild build_source(const Contract& c, const std::string& repo, const std::string& commit, const std::string& dir,
                         const std::string& log) {
  SourceBuild b;
  b.commit = commit;
  b.dir = dir;
  b.log = log;
  b.binary = (fs::path(dir) / c.build_binary).string();
  try {
    remove_checkout(repo, dir);
    fs::create_directories(fs::path(dir).parent_path());
    git(repo, {"worktree", "add", "-q", "--detach", dir, commit});
  } catch (const std::exception& e) {
    b.detail = std::string("could not check the tree out for a clean build: ") + e.what();
    return b;
  }
  const std::string& command = c.build_command;
  std::ofstream(log, std::ios::app) << "$ " << c.build_command << "    # in " << dir << " at " << commit << "\n";
  try {
    b.exit_status = run_shell(command, dir, log);
  } catch (const std::exception& e) {
    b.detail = std::string("the build command did not start: ") + e.what();
    return b;
  }
  const bool executable = fs::is_regular_file(b.binary) && access(b.binary.c_str(), X_OK) == 0;
  b.ok = b.exit_status == 0 && executable;
  if (b.ok) {
    b.binary_sha256 = sha256_file(b.binary);
    b.detail = fmt::format("`{}` built {} in a fresh checkout (sha256 {})", c.build_command, c.build_binary,
                           b.binary_sha256.substr(0, 16));
  } else {
    b.detail = fmt::format("`{}` in a fresh checkout of {}: {}; the tail of its log ({}):\n{}", c.build_command,
                           commit.substr(0, 12),
                           b.exit_status != 0 ? fmt::format("exit status {}", b.exit_status)
                                              : fmt::format("exit status 0 but no executable at {}", c.build_binary),
                           log, log_tail(log, 1500));
  }
  return b;
}

}  // namespace loom::tune
