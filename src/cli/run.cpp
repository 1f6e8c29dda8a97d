// `loom run -m model.gguf|model.loom -p "prompt" -n N`: one prompt, streamed completion on
// stdout, speed line on stderr — one request on a runtime::Engine. --chat wraps the prompt as
// one user turn of the model's chat template; --raw (the default) feeds it as is.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/files.h"
#include "cli/generation_flags.h"
#include "backend/registry.h"
#include "cli/verb.h"
#include "common/error.h"
#include "runtime/spec/source.h"

namespace loom::cli {

void GenerationFlags::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "model .gguf, or .loom program")->required();
  cmd.add_option("--gguf", gguf, "weights for a .loom program (default: found next to it, checked by sha256)");
  add_backend_option(cmd, backend);
  cmd.add_option("-t,--threads", threads, "threads (0: the program's schedule, else all cores)");
  cmd.add_option("-c,--ctx-size", n_ctx, "context length (0: min(4096, the program's bound))");
  cmd.add_option("--kv-type", kv_type, "KV cache storage: f16, f32 or q8_0 (llama.cpp's -ctk/-ctv)")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  auto& s = sampling;
  cmd.add_option("--temp", s.temperature, "temperature (<= 0: greedy)")->capture_default_str();
  cmd.add_option("--top-k", s.top_k, "top-k (0: off)")->capture_default_str();
  cmd.add_option("--top-p", s.top_p, "top-p (1: off)")->capture_default_str();
  cmd.add_option("--min-p", s.min_p, "min-p (0: off)")->capture_default_str();
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  cmd.add_option("--repeat-last-n", s.penalty_last_n, "tokens the penalties look back over")->capture_default_str();
  cmd.add_option("--presence-penalty", s.presence_penalty, "presence penalty")->capture_default_str();
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd.add_option("--seed", seed, "sampling seed (-1: from the clock)");
  add_spec_flags(cmd, spec, draft_max);
  auto* g = cmd.add_option("--grammar", grammar_file, "constrain the output to a GBNF grammar (llama.cpp's syntax) in FILE");
  auto* j = cmd.add_option("--json-schema", json_schema_file, "constrain the output to JSON valid against the JSON Schema in FILE");
  auto* r = cmd.add_option("--regex", regex, "constrain the output to match a regular expression");
  auto* o = cmd.add_flag("--json-object", json_object, "constrain the output to any JSON object");
  g->excludes(j)->excludes(r)->excludes(o);
  j->excludes(r)->excludes(o);
  r->excludes(o);
}

void add_spec_flags(CLI::App& cmd, std::string& spec, int32_t& draft_max) {
  cmd.add_option("--spec", spec,
                 "speculative decoding: lookup (n-grams of the prompt and text so far), draft:PATH (a draft "
                 "model of the same vocabulary), layers:K (the model's first K layers), none");
  cmd.add_option("--draft-max", draft_max, "most draft tokens verified per step (adapted to the acceptance rate)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

runtime::spec::Speculation GenerationFlags::speculation(const runtime::ModelBundle& bundle) const {
  return {runtime::spec::open_draft_source(spec, bundle, run_options()), draft_max};
}

std::string speculation_line(const runtime::RequestStats& s) {
  if (s.verify_steps == 0) return {};
  return fmt::format("speculation: {} drafted, {} accepted ({:.1f}%), {:.2f} tokens per verifying step", s.drafted,
                     s.draft_accepted, 100.0 * s.draft_accepted / std::max(1, s.drafted),
                     1.0 + double(s.draft_accepted) / s.verify_steps);
}

std::shared_ptr<text::constrain::Constraint> GenerationFlags::constraint(const text::Tokenizer& tok) {
  namespace tc = text::constrain;
  if (!compiled_) {
    try {
      if (!grammar_file.empty()) compiled_ = tc::compile(tc::SourceKind::gbnf, read_file(grammar_file));
      else if (!json_schema_file.empty()) compiled_ = tc::compile(tc::SourceKind::json_schema, read_file(json_schema_file));
      else if (!regex.empty()) compiled_ = tc::compile(tc::SourceKind::regex, regex);
      else if (json_object) compiled_ = tc::compile(tc::SourceKind::json_object, "");
      else return nullptr;
    } catch (const loom::Error& e) {
      const std::string& src = !grammar_file.empty() ? grammar_file : !json_schema_file.empty() ? json_schema_file : "--regex";
      loom::fail("{}: {}", json_object ? "--json-object" : src, e.what());
    }
  }
  return std::make_shared<tc::Constraint>(compiled_->grammar, tc::TokenTrie::of(tok));
}

runtime::RunOptions GenerationFlags::run_options() const {
  runtime::RunOptions ro;
  ro.backend = backend;
  ro.threads = threads;
  ro.n_ctx = n_ctx;
  ro.kv_elem = backend::parse_kv_elem(kv_type);
  return ro;
}

runtime::SamplerParams GenerationFlags::sampler_params() {
  if (seed < 0) {
    seed = int64_t(std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff);
    std::fprintf(stderr, "seed: %lld\n", (long long)seed);
  }
  runtime::SamplerParams p = sampling;
  p.seed = uint64_t(seed);
  return p;
}

runtime::Event stream_request(runtime::Engine& engine, runtime::RequestId id) {
  for (;;) {
    for (auto& ev : engine.step()) {
      if (ev.id != id) continue;
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
      std::fflush(stdout);
      if (ev.finish != runtime::Finish::none) return ev;
    }
    if (engine.idle()) loom::fail("engine went idle before request {} ended", id);  // a bookkeeping bug
  }
}

namespace {

struct RunArgs {
  GenerationFlags gen;
  std::string prompt, prompt_file, system;
  int32_t n_predict = 128;
  bool no_bos = false, chat = false, raw = false, special = false;
};

void run_once(RunArgs& a) {
  if (a.chat && a.raw) loom::fail("--chat and --raw exclude each other");
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) loom::fail("cannot open {}", a.prompt_file);
    std::stringstream ss;
    ss << in.rdbuf();
    a.prompt = ss.str();
  }
  const auto bundle = runtime::ModelBundle::load(a.gen.model, a.gen.gguf, a.gen.n_ctx);
  std::vector<int32_t> ids;
  if (a.chat) {
    std::vector<text::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    ids = bundle.encode_chat(msgs, /*add_bos=*/!a.no_bos);
  } else {
    ids = bundle.encode(a.prompt, /*add_bos=*/!a.no_bos, /*parse_special=*/a.special);
  }
  if (ids.empty()) loom::fail("the prompt tokenizes to nothing (give -p, or drop --no-bos)");
  auto engine = bundle.open_engine(a.gen.run_options());
  runtime::Request req;
  req.prompt = std::move(ids);
  req.sampling = a.gen.sampler_params();
  req.max_tokens = a.n_predict;
  req.cache_prefix = false;  // one request: nothing to share with
  req.speculation = a.gen.speculation(bundle);
  req.constraint = a.gen.constraint(bundle.tokenizer());
  const auto sub = engine->submit(std::move(req));
  if (!sub.ok()) loom::fail("{}", sub.refused);
  if (!a.chat) {
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);  // echo, as llama-cli does
    std::fflush(stdout);
  }
  const auto end = stream_request(*engine, sub.id);
  std::printf("\n");
  std::fflush(stdout);
  if (end.finish == runtime::Finish::error) loom::fail("{}", end.error);
  std::fprintf(stderr, "%s\n", end.stats.speed_line().c_str());
  if (const auto line = speculation_line(end.stats); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

const RegisterVerb reg("run", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("run", "Generate a completion for one prompt, streamed to stdout");
  auto a = std::make_shared<RunArgs>();
  a->gen.add_to(*cmd);
  cmd->add_option("-p,--prompt", a->prompt, "prompt text");
  cmd->add_option("-f,--file", a->prompt_file, "read the prompt from a file");
  cmd->add_option("-n,--n-predict", a->n_predict, "tokens to generate at most (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_flag("--no-bos", a->no_bos, "do not add the vocabulary's BOS token");
  cmd->add_flag("--chat", a->chat, "wrap the prompt in the model's chat template as a user turn");
  cmd->add_flag("--raw", a->raw, "feed the prompt as is (the default)");
  cmd->add_flag("--special", a->special, "raw mode: parse special-token text such as <|im_start|>");
  cmd->add_option("--system", a->system, "system prompt (with --chat)");
  cmd->callback([a] { run_once(*a); });
});

}  // namespace
}  // namespace loom::cli
