// Each `loom` verb lives in its own cli/<verb>.cpp and registers itself here, so adding a
// verb never edits a central switch.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "backend/registry.h"

namespace loom::cli {

// The backend a verb runs on: --backend NAME, also spelled --device NAME (as llama.cpp's users
// and the CUDA issue write it: `loom run --device cuda`).
inline CLI::Option* add_backend_option(CLI::App& cmd, std::string& backend,
                                       const std::string& help = backend::backend_choices()) {
  return cmd.add_option("--backend,--device", backend, help)->capture_default_str();
}

// Called once at start-up with the root app; adds a subcommand and its callback.
using VerbSetup = std::function<void(CLI::App& root)>;

struct VerbEntry {
  std::string name;
  VerbSetup setup;
};
std::vector<VerbEntry>& verbs();

struct RegisterVerb {
  RegisterVerb(std::string name, VerbSetup setup) { verbs().push_back({std::move(name), std::move(setup)}); }
};

}  // namespace loom::cli
