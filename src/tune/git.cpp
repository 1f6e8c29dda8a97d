#include "tune/git.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/error.h"

extern char** environ;

namespace loom::tune {

namespace {

int spawn_wait(const std::vector<std::string>& argv, const std::string& cwd, int out_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) loom::fail("cannot start '{}': {}", argv[0], std::strerror(rc));
  return pid;
}

int wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd) {
  int p[2];
  if (pipe(p) != 0) loom::fail("pipe failed");
  const pid_t pid = spawn_wait(argv, cwd, p[1]);
  close(p[1]);
  CommandResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) r.output.append(buf, size_t(n));
  close(p[0]);
  r.status = wait_status(pid);
  return r;
}

int run_shell(const std::string& command, const std::string& cwd, const std::string& log_path) {
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) loom::fail("cannot write {}", log_path);
  const pid_t pid = spawn_wait({"/bin/sh", "-c", command}, cwd, fd);
  close(fd);
  return wait_status(pid);
}

std::string git(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"git", "-C", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv, dir);
  std::string cmd = "git";
  for (const auto& a : args) cmd += " " + a;
  if (r.status != 0) loom::fail("{} (in {}) failed: {}", cmd, dir, r.output);
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' ')) r.output.pop_back();
  return r.output;
}

}  // namespace loom::tune
