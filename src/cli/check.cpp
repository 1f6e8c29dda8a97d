// `loom check PROGRAM.loom`: parse and verify a model program; say what it holds or what is
// wrong (the error names file:line:col). `--print` writes the canonical text to stdout.
// `--backend NAME` also checks the schedule against the keys that backend declares (an unknown
// key or a value out of range names its line:col), `--keys` lists those keys, and `--explain`
// compiles the program with its weights and prints the plan's effective choices per op.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "backend/registry.h"
#include "cli/check.h"
#include "cli/verb.h"
#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "runtime/model_loader.h"

namespace loom::cli {

std::vector<CheckHook>& check_hooks() {
  static std::vector<CheckHook> hooks;
  return hooks;
}

namespace {

struct CheckArgs {
  std::string path;
  std::string backend;
  bool print = false, explain = false, keys = false;
};

void run_backend_checks(const CheckArgs& a, const ir::Module& m, const std::string& gguf) {
  const std::string name = a.backend.empty() ? "cpu" : a.backend;
  auto be = backend::make_backend(name);
  if (a.keys) {
    fmt::print("schedule keys of backend {}:\n", name);
    for (const auto& k : be->schedule_keys()) fmt::print("  {}\n", k.describe());
  }
  backend::check_schedule(m, be->schedule_keys(), name);
  if (!a.explain) return;
  const auto model = runtime::load_model(a.path, gguf);
  const auto ws = backend::WeightSource::bind(model.module, *model.file);
  const auto plan = be->compile(model.module, ws, {});
  for (const auto& line : plan->explain()) fmt::print("{}\n", line);
}

void run_check(const CheckArgs& a, const std::string& gguf) {
  std::ifstream in(a.path, std::ios::binary);
  if (!in) loom::fail("cannot open {}", a.path);
  std::stringstream ss;
  ss << in.rdbuf();
  const ir::Module m = ir::parse(ss.str(), a.path);
  ir::verify(m);
  for (const auto& w : ir::schedule_warnings(m)) fmt::print(stderr, "warning: {}: {}\n", a.path, w);
  for (const auto& h : check_hooks()) h.run(m, a.path);
  if (!a.backend.empty() || a.explain || a.keys) run_backend_checks(a, m, gguf);
  if (a.explain || a.keys) return;
  if (a.print) {
    fmt::print("{}", ir::print(m));
    return;
  }
  size_t ops = 0;
  for (const auto& f : m.funcs) ops += f.body.size();
  std::string dims;
  for (const auto& d : m.dims) dims += fmt::format("{}{} in [{}, {}]", dims.empty() ? "" : ", ", d.name, d.lo, d.hi);
  fmt::print("ok: {} ops, {} weights, {} funcs, dims {}\n", ops, m.weights.size(), m.funcs.size(),
             dims.empty() ? "none" : dims);
}

const RegisterVerb reg("check", [](CLI::App& root) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = root.add_subcommand("check", "Parse and verify a .loom model program");
  cmd->add_option("program", a->path, "the .loom file")->required();
  cmd->add_flag("--print", a->print, "print the program in canonical form instead of a summary");
  add_backend_option(*cmd, a->backend, "check the schedule against this backend's keys: " + backend::backend_choices());
  cmd->add_flag("--keys", a->keys, "list the schedule keys of the backend (default cpu)");
  cmd->add_flag("--explain", a->explain,
                "compile with the program's weights (found as `loom run` finds them, or --gguf) and print the "
                "effective choice per op: kernel and layout of each matmul, grouping, attention split, threads");
  for (const auto& h : check_hooks())
    if (h.add_flags) h.add_flags(*cmd);
  cmd->callback([a, cmd] {
    const CLI::Option* g = cmd->get_option_no_throw("--gguf");
    run_check(*a, g && g->count() ? g->as<std::string>() : std::string());
  });
});

}  // namespace
}  // namespace loom::cli
