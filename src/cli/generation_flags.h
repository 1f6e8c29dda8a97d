// Flags `loom run` and `loom chat` share: the model, the context, threads and the sampler.
// Defaults are llama.cpp's (temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties, last 64).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "runtime/engine.h"
#include "runtime/model_bundle.h"
#include "runtime/sampler.h"
#include "runtime/spec/drafter.h"
#include "text/constrain/constraint.h"

namespace loom::cli {

struct GenerationFlags {
  std::string model, gguf;
  std::string backend = "cpu";
  int threads = 0;
  int32_t n_ctx = 0;
  std::string kv_type = "f16";
  runtime::SamplerParams sampling;
  int64_t seed = -1;  // -1: from the clock (printed so a run can be repeated)
  std::string spec;        // speculative decoding: lookup, draft:PATH, layers:K (runtime/spec/source.h)
  int32_t draft_max = runtime::spec::Speculation::kDefaultDraftMax;
  // Structured output: at most one of these.
  std::string grammar_file, json_schema_file, regex;
  bool json_object = false;

  void add_to(CLI::App& cmd);
  // A fresh constraint for one request (the grammar compiled once, on first use), or null when
  // no constraint flag was given. Throws loom::Error naming what the grammar or schema lacks.
  std::shared_ptr<text::constrain::Constraint> constraint(const text::Tokenizer& tok);
  runtime::RunOptions run_options() const;
  runtime::SamplerParams sampler_params();  // resolves the seed
  // The drafter --spec names, opened for `bundle` (no source: no speculation).
  runtime::spec::Speculation speculation(const runtime::ModelBundle& bundle) const;

 private:
  std::optional<text::constrain::CompiledGrammar> compiled_;
};

// Adds --spec and --draft-max to a verb (run, chat, bench, serve share their meaning).
void add_spec_flags(CLI::App& cmd, std::string& spec, int32_t& draft_max);
// "speculation: 212 drafted, 150 accepted (70.8%), 2.9 tokens per verifying step", or "".
std::string speculation_line(const runtime::RequestStats& s);

// Drives the engine until request `id` ends, writing each text piece to stdout as it comes;
// returns the final event (its finish reason and statistics).
runtime::Event stream_request(runtime::Engine& engine, runtime::RequestId id);

}  // namespace loom::cli
