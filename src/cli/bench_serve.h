// `loom bench serve --url URL`: the serving load generator, a sub-mode of `loom bench`
// (bench_serve.cpp). bench.cpp calls this to attach it to its own subcommand.
#pragma once
#include <CLI/CLI.hpp>

namespace loom::cli {

// Adds the `serve` subcommand under `bench` (the parent's callback must do nothing when it ran).
CLI::App* add_bench_serve(CLI::App& bench);

}  // namespace loom::cli
