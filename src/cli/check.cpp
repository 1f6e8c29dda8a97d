// `loom check PROGRAM.loom`: parse and verify a model program; say what it holds or what is
// wrong (the error names file:line:col). `--print` writes the canonical text to stdout.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/check.h"
#include "cli/verb.h"
#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

namespace loom::cli {

std::vector<CheckHook>& check_hooks() {
  static std::vector<CheckHook> hooks;
  return hooks;
}

namespace {

struct CheckArgs {
  std::string path;
  bool print = false;
};

void run_check(const CheckArgs& a) {
  std::ifstream in(a.path, std::ios::binary);
  if (!in) loom::fail("cannot open {}", a.path);
  std::stringstream ss;
  ss << in.rdbuf();
  const ir::Module m = ir::parse(ss.str(), a.path);
  ir::verify(m);
  for (const auto& w : ir::schedule_warnings(m)) fmt::print(stderr, "warning: {}: {}\n", a.path, w);
  for (const auto& h : check_hooks()) h.run(m, a.path);
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
  for (const auto& h : check_hooks())
    if (h.add_flags) h.add_flags(*cmd);
  cmd->callback([a] { run_check(*a); });
});

}  // namespace
}  // namespace loom::cli
