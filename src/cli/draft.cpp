// `loom draft MODEL --layers K -o draft.loom`: a draft program for speculative decoding,
// derived from the model's own program (port/draft_program.h: its first K layers, exiting
// through the final norm and the shared output head). The result is a `.loom` file bound to
// the same GGUF, usable as `--spec draft:draft.loom` (or derived on the fly with --spec layers:K).
#include <cstdio>
#include <fstream>

#include "cli/files.h"
#include "cli/verb.h"
#include "common/error.h"
#include "gguf/file.h"
#include "ir/text.h"
#include "port/draft_program.h"
#include "port/port.h"
#include "runtime/model_loader.h"

namespace {

struct DraftArgs {
  std::string model, gguf, out;
  int64_t layers = 0;
};

bool is_gguf(const std::string& p) { return p.size() >= 5 && p.compare(p.size() - 5, 5, ".gguf") == 0; }

void run_draft(const DraftArgs& a) {
  ir::Module target;
  std::string weights;
  if (is_gguf(a.model)) {
    const gguf::File f = gguf::File::open(a.model);
    target = port::port(f);  // with gguf.sha256: the draft finds and checks its weights later
    weights = a.model;
  } else {
    auto lm = loom::runtime::load_model(a.model, a.gguf);
    target = std::move(lm.module);
    weights = lm.file->path();
  }
  ir::Module m = port::draft_program(target, a.layers);
  port::record_weights_path(m, weights, a.out);
  const std::string text = ir::print(m);
  if (!loom::cli::write_file_or_stdout(a.out, text)) return;
  std::fprintf(stderr, "loom draft: wrote %s (%lld of the target's layers, %zu weights, bound to %s)\n", a.out.c_str(),
               (long long)a.layers, m.weights.size(), weights.c_str());
}

loom::cli::RegisterVerb reg("draft", [](CLI::App& root) {
  auto a = std::make_shared<DraftArgs>();
  auto* cmd = root.add_subcommand("draft", "write a draft program for speculative decoding: the model's first K layers");
  cmd->add_option("model", a->model, "model .gguf or .loom program")->required();
  cmd->add_option("--gguf", a->gguf, "weights for a .loom program");
  cmd->add_option("--layers", a->layers, "decoder layers the draft keeps (1 .. the model's - 1)")->required();
  cmd->add_option("-o,--output", a->out, "output .loom file (default: standard output)");
  cmd->callback([a] { run_draft(*a); });
});

}  // namespace
