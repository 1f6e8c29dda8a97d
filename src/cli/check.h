// Extension point of `loom check`: another module's CLI file (e.g. the porter's binding check
// against a GGUF file) registers a hook that adds flags and runs after the program verifies,
// so check.cpp never needs to know about it.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "ir/module.h"

namespace loom::cli {

struct CheckHook {
  std::function<void(CLI::App& check)> add_flags;
  // Runs on a verified module; throws loom::Error to fail the check, prints its own findings.
  std::function<void(const ir::Module& m, const std::string& program_path)> run;
};
std::vector<CheckHook>& check_hooks();

struct RegisterCheckHook {
  explicit RegisterCheckHook(CheckHook h) { check_hooks().push_back(std::move(h)); }
};

}  // namespace loom::cli
