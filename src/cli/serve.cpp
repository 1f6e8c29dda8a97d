// `loom serve -m model.gguf|model.loom`: the OpenAI-compatible server (src/serve) on one engine.
// SIGTERM or SIGINT drains: new requests get 503, running ones may finish until
// --drain-timeout, then the process exits.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <pthread.h>
#include <thread>

#include "backend/registry.h"
#include "cli/verb.h"
#include "common/error.h"
#include "cli/files.h"
#include "cli/generation_flags.h"
#include "runtime/model_bundle.h"
#include "runtime/spec/source.h"
#include "serve/server.h"

namespace loom::cli {
namespace {

struct ServeArgs {
  std::string model, gguf, backend = "cpu", kv_type = "f16", alias;
  int threads = 0;
  int32_t n_ctx = 0, parallel = 4;
  double drain_s = 10;
  std::string spec, chat_template_file;
  int32_t draft_max = runtime::spec::Speculation::kDefaultDraftMax;
  serve::ServerOptions opts;
};

void serve_main(ServeArgs& a) {
  // Signals go to one thread that drains; every other thread (HTTP workers, the engine loop)
  // starts with them blocked.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a crash

  auto bundle = runtime::ModelBundle::load(a.model, a.gguf, a.n_ctx);
  if (!a.chat_template_file.empty()) bundle.set_chat_template(read_file(a.chat_template_file));
  runtime::RunOptions ro;
  ro.backend = a.backend;
  ro.threads = a.threads;
  ro.n_ctx = a.n_ctx;
  ro.kv_elem = backend::parse_kv_elem(a.kv_type);
  ro.max_seqs = a.parallel;
  auto engine = bundle.open_engine(ro);
  a.opts.speculation = {runtime::spec::open_draft_source(a.spec, bundle, ro), a.draft_max};
  a.opts.model_name = a.alias.empty() ? std::filesystem::path(a.model).stem().string() : a.alias;
  serve::Server server(bundle, *engine, a.opts);
  std::atomic<bool> listening_ended{false};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (listening_ended) return;  // woken by the main thread below: nothing to drain
    std::fprintf(stderr, "loom serve: signal %d, draining (at most %.0f s)\n", sig, a.drain_s);
    server.drain(a.drain_s);
    server.stop();
  });
  const bool ok = server.listen();
  listening_ended = true;
  pthread_kill(signals.native_handle(), SIGTERM);  // wakes the signal thread if it still waits
  signals.join();
  if (!ok) loom::fail("cannot listen on {}:{}", a.opts.host, a.opts.port);
  std::fprintf(stderr, "loom serve: stopped\n");
}

const RegisterVerb reg("serve", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("serve", "OpenAI-compatible HTTP server (chat, completions, streaming, metrics)");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("-m,--model", a->model, "model .gguf, or .loom program")->required();
  cmd->add_option("--gguf", a->gguf, "weights for a .loom program");
  add_backend_option(*cmd, a->backend);
  cmd->add_option("-t,--threads", a->threads, "threads (0: the program's schedule, else all cores)");
  cmd->add_option("-c,--ctx-size", a->n_ctx, "context length per sequence (0: min(4096, the program's bound))");
  cmd->add_option("-P,--parallel,--np", a->parallel, "sequences decoded together at most")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-type", a->kv_type, "KV cache storage: f16, f32 or q8_0")->capture_default_str();
  cmd->add_option("--host", a->opts.host, "address to bind")->capture_default_str();
  cmd->add_option("--port", a->opts.port, "port (0: any free one)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->opts.api_key, "require Authorization: Bearer KEY on /v1/*, /tokenize, /detokenize");
  cmd->add_option("--alias", a->alias, "model name clients use (default: the file's stem)");
  cmd->add_option("--queue", a->opts.max_queue, "requests in flight before 429")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-body", a->opts.max_body_bytes, "largest request body in bytes (413 above)")->capture_default_str();
  cmd->add_option("--timeout", a->opts.request_timeout_s, "seconds a request may run")->capture_default_str();
  cmd->add_option("--io-timeout", a->opts.io_timeout_s, "seconds a connection may stall reading or writing")
      ->capture_default_str();
  add_spec_flags(*cmd, a->spec, a->draft_max);
  cmd->add_option("--chat-template-file", a->chat_template_file,
                  "Jinja chat template to use instead of the model's (its tool format is detected from it)");
  cmd->add_option("--drain-timeout", a->drain_s, "seconds running requests get after SIGTERM")->capture_default_str();
  cmd->callback([a] { serve_main(*a); });
});

}  // namespace
}  // namespace loom::cli
