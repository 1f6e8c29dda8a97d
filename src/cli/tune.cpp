// `loom tune init DIR`, `loom tune run DIR`, `loom tune resume SESSION`, `loom accept SESSION`
// and `loom evidence verify BUNDLE`: the governed optimization session (src/tune/, docs/tune.md).
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "build_info.h"
#include "cli/verb.h"
#include "common/error.h"
#include "tune/contract.h"
#include "tune/digest.h"
#include "tune/evidence.h"
#include "tune/session.h"

namespace loom::cli {

namespace {

namespace fs = std::filesystem;

tune::BuildIdentity build_identity() { return {LOOM_VERSION, LOOM_GIT_COMMIT, LOOM_COMPILER, LOOM_BUILD_FLAGS}; }

void init(const std::string& dir, const std::string& gguf, std::string program) {
  if (!fs::is_directory(dir)) loom::fail("{}: not a directory", dir);
  const auto path = fs::path(dir) / tune::kContractFile;
  if (fs::exists(path)) loom::fail("{} exists; it is not overwritten", path.string());
  if (program.empty())
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".loom") program = e.path().filename().string();
  if (program.empty()) loom::fail("{}: no .loom program (write one with `loom port MODEL.gguf -o {}/model.loom`)", dir, dir);
  const std::string sha = tune::sha256_file(gguf.empty() || gguf[0] == '/' ? gguf : (fs::path(dir) / gguf).string());
  tune::write_text(path.string(), tune::example_contract(gguf, sha, program));
  // Read back: what init writes must be a valid contract.
  tune::load_contract(dir);
  fmt::print("wrote {} (program {}, model sha256 {})\n", path.string(), program, sha);
}

void print_summary(const std::string& session_dir) {
  fmt::print("session: {}\nevidence: {}/evidence (loom evidence verify {}/evidence)\n", session_dir, session_dir,
             session_dir);
}

const RegisterVerb reg_tune("tune", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("tune", "Governed optimization session: candidates kept only when every gate passes");
  cmd->require_subcommand(1);

  auto* in = cmd->add_subcommand("init", "Write a commented example contract (loom-tune.json) into a workload directory");
  auto dir = std::make_shared<std::string>();
  auto gguf = std::make_shared<std::string>();
  auto program = std::make_shared<std::string>();
  in->add_option("DIR", *dir, "the workload directory (a git repository)")->required();
  in->add_option("--gguf", *gguf, "the model's weights (relative to DIR or absolute)")->required();
  in->add_option("--program", *program, "the .loom program in DIR (default: the one there)");
  in->callback([dir, gguf, program] { init(*dir, *gguf, *program); });

  auto o = std::make_shared<tune::SessionOptions>();
  auto budget = std::make_shared<int>(-1);
  auto no_search = std::make_shared<bool>(false);
  auto* run = cmd->add_subcommand("run", "Run a session on a workload repository (in a git worktree of its own)");
  run->add_option("DIR", o->workload, "the workload repository with loom-tune.json")->required();
  run->add_option("--agent", o->agent, "a command run in the worktree (through /bin/sh) whose diff is a candidate");
  run->add_flag("--no-search", *no_search, "no built-in schedule search (only --agent)");
  run->add_option("--budget", *budget, "schedule points to try (default: the contract's budget.candidates)");
  run->add_option("--session", o->session_dir, "the session directory (default DIR.tune/<id>)");
  run->callback([o, budget, no_search] {
    o->search = !*no_search;
    if (*budget >= 0) o->budget = *budget;
    o->build = build_identity();
    print_summary(tune::run_session(*o));
  });

  auto session = std::make_shared<std::string>();
  auto* res = cmd->add_subcommand("resume", "Continue an interrupted session from its manifest");
  res->add_option("SESSION", *session, "the session directory")->required();
  res->callback([session] { print_summary(tune::resume_session(*session, build_identity())); });
});

const RegisterVerb reg_accept("accept", [](CLI::App& root) {
  auto session = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand("accept", "Apply a closed tune session's kept commits to the original checkout");
  cmd->add_option("SESSION", *session, "the session directory")->required();
  cmd->callback([session] { fmt::print("{}\n", tune::accept_session(*session)); });
});

const RegisterVerb reg_evidence("evidence", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("evidence", "Evidence bundles of tune sessions");
  cmd->require_subcommand(1);
  auto bundle = std::make_shared<std::string>();
  auto* v = cmd->add_subcommand("verify", "Re-check a bundle's digests and its acceptance ledger");
  v->add_option("BUNDLE", *bundle, "the bundle directory (SESSION/evidence)")->required();
  v->callback([bundle] {
    const auto problems = tune::verify_bundle(*bundle);
    if (!problems.empty()) {
      for (const auto& p : problems) fmt::print(stderr, "evidence: {}\n", p);
      loom::fail("{}: {} problem(s); the bundle does not verify", *bundle, problems.size());
    }
    fmt::print("ok: {} verifies (digests, schema, ledger)\n", *bundle);
  });
});

}  // namespace
}  // namespace loom::cli
