// Opening a model for execution: a GGUF file (ported to a program in memory) or a `.loom`
// program (parsed and verified) plus the GGUF that holds its weights.
//
// Finding the weights of a `.loom` program, in order:
//   1. `gguf` given explicitly (--gguf FILE);
//   2. the module attribute `gguf.file`, a path relative to the .loom file's folder (`loom port -o`
//      records it so; port::record_weights_path);
//   3. `<stem>.gguf` next to the .loom file (model.loom -> model.gguf);
//   4. any *.gguf next to it whose SHA-256 equals the module's `gguf.sha256`.
// When the module records `gguf.sha256`, the file chosen must match it (a program ported from
// one file never silently runs on another).
#pragma once
#include <memory>
#include <string>

#include "gguf/file.h"
#include "ir/module.h"

namespace loom::runtime {

struct LoadedModel {
  std::unique_ptr<gguf::File> file;  // the weights (and tokenizer metadata)
  ir::Module module;
  std::string origin;                // "ported from …" / "parsed from …", for messages
};

// `min_ctx`: positions the caller will ask for. A GGUF is ported with a context of at least
// that many (past its trained context if asked: llama.cpp allows it too, with a warning on
// stderr); a `.loom` program keeps the bound it states, and the engine refuses more.
LoadedModel load_model(const std::string& path, const std::string& gguf_override = "", int64_t min_ctx = 0);

}  // namespace loom::runtime
