#include "bench/peer.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

extern char** environ;

namespace bench {
namespace {

using nlohmann::json;

// A child process with its stdin and stdout on pipes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) loom::fail("bench peer: pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    // llama.cpp logs its whole load to stderr; keep the report readable unless asked.
    if (!std::getenv("LOOM_PEER_VERBOSE")) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) loom::fail("bench peer: cannot start '{}': {}", argv[0], std::strerror(rc));
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }
  ~Child() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == 0) {
        kill(pid_, SIGTERM);
        waitpid(pid_, &st, 0);
      }
    }
  }
  void send(const std::string& line) {
    std::fputs((line + "\n").c_str(), to_);
    std::fflush(to_);
  }
  // One line of output; throws when the child has exited.
  std::string receive(const std::string& what) {
    std::string line;
    int c;
    while ((c = std::fgetc(from_)) != EOF && c != '\n') line.push_back(char(c));
    if (c == EOF && line.empty()) loom::fail("bench peer exited while {}", what);
    return line;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

std::string peer_script() {
  if (const char* p = std::getenv("LOOM_PEER_SCRIPT")) return p;
  return std::string(LOOM_SOURCE_DIR) + "/scripts/peers/llama_cpp_peer.py";
}

class LlamaCppPython final : public Peer {
 public:
  explicit LlamaCppPython(const PeerOptions& o)
      : child_({"python3", peer_script(), o.model, "--threads", std::to_string(o.threads), "--ctx",
                std::to_string(o.n_ctx), "--batch", std::to_string(o.n_batch), "--ubatch",
                std::to_string(o.n_ubatch)}) {
    json ready = json::parse(child_.receive("loading the model"), nullptr, false);
    if (!ready.is_object() || !ready.value("ready", false)) loom::fail("bench peer: llama.cpp did not load {}", o.model);
    child_.send(R"({"op": "info"})");
    json info = json::parse(child_.receive("reporting its build"));
    describe_ = "llama-cpp-python " + info.value("version", "?") + " (" + info.value("system", "") + ")";
  }
  ~LlamaCppPython() override { child_.send(R"({"op": "quit"})"); }
  std::string name() const override { return "llama.cpp"; }
  std::string describe() const override { return describe_; }
  PeerTiming pp(int n, int depth) override { return ask("pp", n, depth); }
  PeerTiming tg(int n, int depth) override { return ask("tg", n, depth); }
  BatchedTiming batched(int n_seq, int pp, int tg) override {
    json r = request({{"op", "batched"}, {"n", n_seq}, {"pp", pp}, {"tg", tg}}, "batched");
    return {r.at("pp_seconds").get<double>(), r.at("tg_seconds").get<double>()};
  }

 private:
  json request(const json& req, const std::string& what) {
    child_.send(req.dump());
    json r = json::parse(child_.receive("running " + what), nullptr, false);
    if (!r.is_object() || r.contains("error"))
      loom::fail("bench peer: llama.cpp {} failed: {}", what, r.is_object() ? r["error"].dump() : "bad reply");
    return r;
  }
  PeerTiming ask(const char* op, int n, int depth) {
    json r = request({{"op", op}, {"n", n}, {"depth", depth}}, std::string(op) + std::to_string(n));
    PeerTiming t;
    t.seconds = r.at("seconds").get<double>();
    if (r.contains("token_seconds")) t.token_seconds = r["token_seconds"].get<std::vector<double>>();
    return t;
  }
  Child child_;
  std::string describe_;
};

// Runs `llama-bench ... -r 1 -o json` per repetition and reads avg_ns (llama-bench's own defaults
// otherwise: flash attention auto, its warm-up run, the depth filled before the timed part).
class LlamaBenchBinary final : public Peer {
 public:
  LlamaBenchBinary(std::string path, const PeerOptions& o) : path_(std::move(path)), o_(o) {
    if (!std::filesystem::exists(path_)) loom::fail("bench peer: no llama-bench at '{}'", path_);
  }
  std::string name() const override { return "llama.cpp"; }
  std::string describe() const override { return "llama-bench at " + path_; }
  PeerTiming pp(int n, int depth) override { return run(n, 0, depth); }
  PeerTiming tg(int n, int depth) override { return run(0, n, depth); }
  // llama-batched-bench from the same folder: -npl n_seq prompts of pp tokens in one batch
  // (one KV stream each, its default), then tg steps of one token per sequence; its jsonl line
  // gives both phases' seconds.
  BatchedTiming batched(int n_seq, int pp, int tg) override {
    const std::string tool = (std::filesystem::path(path_).parent_path() / "llama-batched-bench").string();
    if (!std::filesystem::exists(tool)) loom::fail("bench peer: no llama-batched-bench beside {}", path_);
    const int n_ctx = n_seq * (pp + tg) + 64;
    // The tool logs through a queue that a worker thread empties, and an exit right after the
    // last result can lose it (llama.cpp's common/log.cpp says so): a one-sequence run after the
    // measured one gives the worker that time; its own line is not used.
    const std::string text = run_tool(tool, fmt::format("-c {} -b 2048 -ub 512 -npp {} -ntg {} -npl {},1 -t {} --output-format jsonl",
                                                        n_ctx, pp, tg, n_seq, o_.threads));
    for (size_t at = text.find("{\"n_kv_max\""); at != std::string::npos; at = text.find("{\"n_kv_max\"", at + 1)) {
      json j = json::parse(text.substr(at, text.find('\n', at) - at), nullptr, false);
      if (j.is_object() && j.value("pl", 0) == n_seq) return {j.at("t_pp").get<double>(), j.at("t_tg").get<double>()};
    }
    loom::fail("bench peer: llama-batched-bench printed no result for {} sequences", n_seq);
  }

 private:
  PeerTiming run(int p, int g, int depth) {
    const std::string text = run_tool(path_, fmt::format("-p {} -n {} -d {} -r 1 -t {} -o json", p, g, depth, o_.threads));
    json j = json::parse(text, nullptr, false);
    if (!j.is_array() || j.empty()) loom::fail("bench peer: llama-bench printed no result");
    return {j[0].at("avg_ns").get<double>() / 1e9, {}};
  }
  // Runs `tool -m MODEL args` and returns what it printed (stdout; stderr too where asked).
  std::string run_tool(const std::string& tool, const std::string& args) {
    const std::string out =
        std::filesystem::temp_directory_path() / ("loom-peer-" + std::to_string(getpid()) + ".out");
    const bool both = tool != path_;  // llama-batched-bench logs its results through the same stream as the rest
    const std::string cmd = "'" + tool + "' -m '" + o_.model + "' " + args + " > '" + out + "' " + (both ? "2>&1" : "2>/dev/null");
    const int rc = std::system(cmd.c_str());
    std::ifstream in(out, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(out.c_str());
    if (rc != 0) loom::fail("bench peer: '{}' failed (exit {}): {}", cmd, rc, text.substr(text.size() > 400 ? text.size() - 400 : 0));
    return text;
  }
  std::string path_;
  PeerOptions o_;
};

}  // namespace

std::unique_ptr<Peer> make_peer(const std::string& spec, const PeerOptions& opts) {
  if (spec == "llama.cpp" || spec == "llama-cpp-python") return std::make_unique<LlamaCppPython>(opts);
  if (spec.find('/') != std::string::npos) return std::make_unique<LlamaBenchBinary>(spec, opts);
  loom::fail("unknown bench peer '{}' (use llama.cpp, or a path to a llama-bench binary)", spec);
}

}  // namespace bench
