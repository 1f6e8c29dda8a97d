// GGUF file -> `.loom` model program. One file per architecture family (llama.cpp, qwen2.cpp,
// ...), listed in registry.cpp; a new architecture is one new file plus one line there
// (docs/porting.md).
#pragma once
#include <string>
#include <vector>

#include "gguf/file.h"
#include "ir/module.h"

namespace port {

// Ports the file by its general.architecture. Unknown architecture, missing tensors or
// metadata, and weight types Loom cannot hold are loom::Errors naming the key or tensor.
struct PortOptions {
  // Record `gguf.sha256` (the whole file hashed, or taken from gguf::HashCache). A program that
  // is written out needs it to find and check its weights later; a GGUF run ported in memory is
  // bound to the very file it came from and skips it (a first run of a 400 MB file saves ~0.3 s).
  bool record_sha256 = true;
  // Positions the program may hold (dims T and P, kv.n_ctx); 0: the model's trained context
  // (GGUF <arch>.context_length). More than that is allowed, as llama.cpp allows it, and is a
  // choice recorded in the program: quality past the trained context is the model's business.
  int64_t n_ctx = 0;
};
ir::Module port(const gguf::File& f, const PortOptions& opts = {});

// Sets the positions a program may hold: the bounds of dims T and P and `kv.n_ctx`.
void set_context(ir::Module& m, int64_t n_ctx);

using Porter = ir::Module (*)(const gguf::File&);
struct Architecture {
  const char* name;  // GGUF general.architecture
  Porter port;
};
const std::vector<Architecture>& architectures();  // sorted by name
std::string supported_list();                       // "gemma3, llama, phi3, qwen2, qwen3"

// Where a program finds its weights: sets the module's `gguf.file` to the GGUF's path relative
// to the folder of `program_path` (the .loom file being written; "" or "-" for standard output:
// relative to the current directory, where a shell redirect puts it), so that
// runtime::load_model finds the file from any working directory. port() records the bare file
// name, i.e. a program written next to its GGUF.
void record_weights_path(ir::Module& m, const std::string& gguf_path, const std::string& program_path);

struct BindingOptions {
  bool hash_mismatch_is_error = true;  // false: a different gguf.sha256 is only a warning
  bool check_hash = true;              // false: tensors only (binding for a run: the loader checks the hash)
};
// Every weight's GGUF tensor exists with exactly the declared shape and element type, and the
// module's gguf.sha256 (when it has one) is the file's. Throws loom::Error listing every
// problem; returns the warnings (hash mismatch when only warning).
std::vector<std::string> check_bindings(const ir::Module& m, const gguf::File& f, BindingOptions opt = {});

}  // namespace port
