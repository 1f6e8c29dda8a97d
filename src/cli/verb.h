// Each `loom` verb lives in its own cli/<verb>.cpp and registers itself here, so adding a
// verb never edits a central switch.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace loom::cli {

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
