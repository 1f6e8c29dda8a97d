// The out-of-process arm: a loom binary built from a candidate's source (tune/source_build.h)
// runs `tune-arm`, which keeps the program's model loaded and serves the same EngineArm the
// in-process session uses (tune/arm_server.h). The gates see an Arm like any other; a child
// that dies fails the call it was answering with its exit status and the tail of its stderr,
// and the next call starts it again (the baseline's arm outlives a crash of its child).
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "common/error.h"
#include "tune/arm.h"
#include "tune/source_build.h"

extern char** environ;

namespace loom::tune {

namespace {

using nlohmann::json;

constexpr int kAnswerTimeoutMs = 600 * 1000;

// The threads of `pid` and of every process below it: a child that hands its work to processes
// of its own (a wrapper, a worker pool of processes) is counted whole. Two small reads per
// process (its stat line's thread count, its main thread's children), since the gate's watcher
// samples this while the arm is being timed.
int tree_threads(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return 0;
  // Fields after the command name (which may hold spaces, so parsed from its closing ')'):
  // state is field 3, num_threads field 20.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  int n = 0;
  for (int k = 3; k <= 20 && rest >> field; ++k)
    if (k == 20) n = std::atoi(field.c_str());
  std::ifstream children(fmt::format("/proc/{}/task/{}/children", pid, pid));
  for (pid_t child; children >> child;) n += tree_threads(child);
  return n;
}

// The CPUs every arm process runs on: the last `threads` of those `allowed`, the same for every
// arm, so that a paired timing compares two arms on the same cores. Left to the scheduler, a
// one-thread arm stays on the core it started on, and cores do not run at one speed: on a 2-vCPU
// host two processes of the same binary and program, timed against each other in 40 pairs, read
// 0.84-1.20 (medians of 3 runs); pinned to one CPU, 0.95-1.02 (8 runs); pinned to the two
// different CPUs, 0.75 and 1.33 in the same minute, then 1.00 (the vCPUs' speeds drift).
cpu_set_t arm_cpus(const cpu_set_t& allowed, int threads) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  cpu_set_t out;
  CPU_ZERO(&out);
  const size_t n = std::clamp<size_t>(size_t(std::max(threads, 1)), 1, cpus.size());
  for (size_t i = cpus.size() - n; i < cpus.size(); ++i) CPU_SET(cpus[i], &out);
  return out;
}

class ProcessArm final : public Arm {
 public:
  ProcessArm(ArmSpec spec, std::string binary, std::string log)
      : spec_(std::move(spec)), binary_(std::move(binary)), log_(std::move(log)) {
    start();
  }
  ~ProcessArm() override { stop(); }

  void logits(std::span<const int32_t> tokens, std::span<float> out) override {
    const json head = call({{"op", "logits"}, {"tokens", std::vector<int32_t>(tokens.begin(), tokens.end())}});
    const size_t bytes = head.at("bytes").get<size_t>();
    if (bytes != out.size() * sizeof(float)) {
      stop();
      loom::fail("arm process {}: {} bytes of logits for a buffer of {}", binary_, bytes, out.size() * sizeof(float));
    }
    read_exact(out.data(), bytes);
    // The caller checks its input afterwards: hand back what the child's arm left in it.
    if (head.contains("tokens_after")) {
      const auto after = head["tokens_after"].get<std::vector<int32_t>>();
      auto* given = const_cast<int32_t*>(tokens.data());
      for (size_t i = 0; i < std::min(after.size(), tokens.size()); ++i) given[i] = after[i];
    }
  }

  Timed timed_run(std::span<const int32_t> prompt, int generate, bool warm) override {
    const json r = call({{"op", "timed_run"},
                         {"prompt", std::vector<int32_t>(prompt.begin(), prompt.end())},
                         {"generate", generate},
                         {"warm", warm}});
    Timed t;
    t.prefill_seconds = r.at("prefill_seconds").get<double>();
    t.decode_seconds = r.at("decode_seconds").get<double>();
    t.untimed_seconds = r.at("untimed_seconds").get<double>();
    t.prompt_tokens = r.at("prompt_tokens").get<int>();
    t.generated_tokens = r.at("generated_tokens").get<int>();
    return t;
  }

  int64_t vocab() const override { return vocab_; }
  int threads() const override { return threads_; }
  std::optional<int> own_threads() const override { return pid_ < 0 ? 0 : tree_threads(pid_); }

 private:
  void start() {
    signal(SIGPIPE, SIG_IGN);  // a dead child must fail a call, not end this process
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) loom::fail("pipe failed: {}", std::strerror(errno));
    const int err = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err < 0) loom::fail("cannot write {}", log_);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
    const std::vector<std::string> argv{binary_,  "tune-arm",           "--program", spec_.program,
                                        "--gguf", spec_.gguf,           "--backend", spec_.backend,
                                        "--threads", std::to_string(spec_.threads), "--n-ctx", std::to_string(spec_.n_ctx)};
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // The child inherits the spawning thread's CPUs: this thread takes the arms' CPUs for the
    // spawn and its own back after it (the child and whatever it starts stay on them).
    cpu_set_t mine;
    const bool pin = sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) > 0;
    if (pin) {
      const cpu_set_t arm = arm_cpus(mine, spec_.threads);
      sched_setaffinity(0, sizeof arm, &arm);
    }
    const int rc = posix_spawn(&pid_, binary_.c_str(), &fa, nullptr, args.data(), environ);
    if (pin) sched_setaffinity(0, sizeof mine, &mine);
    posix_spawn_file_actions_destroy(&fa);
    ::close(to[0]);
    ::close(from[1]);
    ::close(err);
    if (rc != 0) {
      ::close(to[1]);
      ::close(from[0]);
      pid_ = -1;
      loom::fail("cannot start the arm process {}: {}", binary_, std::strerror(rc));
    }
    in_ = to[1];
    out_ = from[0];
    buf_.clear();
    try {
      const json hello = read_reply();
      vocab_ = hello.at("vocab").get<int64_t>();
      threads_ = hello.at("threads").get<int>();
    } catch (...) {
      stop();  // a failed hello: the child could not open the program
      throw;
    }
  }

  // Closes the child's input (it exits at the end of input), then waits; a child that does not
  // exit within a few seconds is killed. Returns its exit description.
  std::string stop() {
    if (pid_ < 0) return exit_;
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    in_ = out_ = -1;
    int st = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    pid_t got = 0;
    while ((got = waitpid(pid_, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (got == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
    }
    pid_ = -1;
    exit_ = WIFSIGNALED(st) ? fmt::format("killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)))
                            : fmt::format("exit status {}", WEXITSTATUS(st));
    return exit_;
  }

  [[noreturn]] void died(const std::string& what) {
    // Give the child a moment to finish dying so its status and last words are known.
    const std::string how = stop();
    loom::fail("arm process {} {} ({}); the tail of its stderr ({}):\n{}", binary_, what, how, log_, log_tail(log_, 1500));
  }

  json call(const json& req) {
    if (pid_ < 0) {
      // The child died answering an earlier call (which failed with its error): start it again.
      ++restarts_;
      std::ofstream(log_, std::ios::app) << "loom tune: restarting the arm process (restart " << restarts_ << ")\n";
      start();
    }
    const std::string line = req.dump() + "\n";
    const char* p = line.data();
    size_t n = line.size();
    while (n > 0) {
      const ssize_t w = ::write(in_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) died("stopped reading its requests");
      p += w;
      n -= size_t(w);
    }
    return read_reply();
  }

  json read_reply() {
    std::string line;
    for (;;) {
      if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        break;
      }
      fill();
    }
    json r;
    try {
      r = json::parse(line);
    } catch (const json::exception&) {
      stop();
      loom::fail("arm process {}: an answer that is not JSON: {}", binary_, line.substr(0, 200));
    }
    if (!r.value("ok", false)) {
      const std::string error = r.value("error", "no error given");
      loom::fail("arm process {}: {}", binary_, error);
    }
    return r;
  }

  void fill() {
    char chunk[1 << 16];
    for (;;) {
      // A child that hangs must fail its call, not stall the session: no answer within this long
      // (far beyond any timed run or logits call a contract asks for) kills it.
      pollfd p{out_, POLLIN, 0};
      const int ready = ::poll(&p, 1, kAnswerTimeoutMs);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        kill(pid_, SIGKILL);
        died(fmt::format("gave no answer within {} s", kAnswerTimeoutMs / 1000));
      }
      const ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) died("died before answering");
      buf_.append(chunk, size_t(n));
      return;
    }
  }

  void read_exact(void* dst, size_t bytes) {
    char* d = static_cast<char*>(dst);
    while (bytes > 0) {
      if (buf_.empty()) fill();
      const size_t k = std::min(bytes, buf_.size());
      std::memcpy(d, buf_.data(), k);
      buf_.erase(0, k);
      d += k;
      bytes -= k;
    }
  }

  ArmSpec spec_;
  std::string binary_, log_, exit_, buf_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int64_t vocab_ = 0;
  int threads_ = 0, restarts_ = 0;
};

}  // namespace

std::unique_ptr<Arm> open_process_arm(const ArmSpec& spec, const std::string& binary, const std::string& log_path) {
  return std::make_unique<ProcessArm>(spec, binary, log_path);
}

}  // namespace loom::tune
