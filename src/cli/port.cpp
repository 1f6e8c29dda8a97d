// `loom port MODEL.gguf [-o MODEL.loom]`: the model program of a GGUF file, verified, as text.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "cli/files.h"
#include "cli/check.h"
#include "cli/verb.h"
#include "common/error.h"
#include "gguf/file.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "port/port.h"

namespace {

struct PortArgs {
  std::string model;
  std::string out;
  int64_t n_ctx = 0;
};

void run_port(const PortArgs& a) {
  const gguf::File f = gguf::File::open(a.model);
  ir::Module m = port::port(f, {.n_ctx = a.n_ctx});
  port::record_weights_path(m, a.model, a.out);
  ir::verify(m);
  const std::string text = ir::print(m);
  if (!loom::cli::write_file_or_stdout(a.out, text)) return;
  size_t ops = 0;
  for (const auto& fn : m.funcs) ops += fn.body.size();
  std::fprintf(stderr, "loom port: wrote %s (%s, %zu weights, %zu ops)\n", a.out.c_str(),
               ir::attr_string(m.attrs, "arch").c_str(), m.weights.size(), ops);
}

loom::cli::RegisterVerb reg("port", [](CLI::App& root) {
  auto args = std::make_shared<PortArgs>();
  auto* cmd = root.add_subcommand("port", "write the .loom model program of a GGUF file (" + port::supported_list() + ")");
  cmd->add_option("model", args->model, "GGUF model file")->required();
  cmd->add_option("-o,--output", args->out, "output .loom file (default: standard output)");
  cmd->add_option("-c,--ctx", args->n_ctx,
                  "positions the program may hold (dims T, P; kv.n_ctx); 0: the model's trained context")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args] { run_port(*args); });
});

// `loom check PROGRAM.loom --gguf MODEL.gguf`: the program's weights against a file.
struct BindingArgs {
  std::string gguf;
  bool allow_hash_mismatch = false;
};
auto binding_args = std::make_shared<BindingArgs>();

loom::cli::RegisterCheckHook hook({
    [](CLI::App& check) {
      check.add_option("--gguf", binding_args->gguf,
                       "check every weight binding (tensor, shape, type) and gguf.sha256 against this GGUF file");
      check.add_flag("--allow-hash-mismatch", binding_args->allow_hash_mismatch,
                     "with --gguf: a different gguf.sha256 is a warning, not an error");
    },
    [](const ir::Module& m, const std::string& program) {
      if (binding_args->gguf.empty()) return;
      const gguf::File f = gguf::File::open(binding_args->gguf);
      const auto warnings = port::check_bindings(m, f, {!binding_args->allow_hash_mismatch});
      for (const auto& w : warnings) fmt::print(stderr, "warning: {}: {}\n", program, w);
      fmt::print(stderr, "bindings ok: {} weights match {}\n", m.weights.size(), binding_args->gguf);
    },
});

}  // namespace
