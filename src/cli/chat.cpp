// `loom chat -m model.gguf`: an interactive terminal chat, one engine request per turn. Each
// turn re-renders the whole conversation with the model's chat template; the engine's prefix
// cache holds the previous turns' full KV blocks, so a turn evaluates only what is new (and
// the tail of the last block). /reset forgets the conversation, /exit or Ctrl-D quits.
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>

#include "cli/generation_flags.h"
#include "cli/verb.h"
#include "common/error.h"

namespace loom::cli {

namespace {

struct ChatArgs {
  GenerationFlags gen;
  std::string system;
  int32_t n_predict = -1;
  bool verbose = false;
};

void chat(ChatArgs& a) {
  const auto bundle = runtime::ModelBundle::load(a.gen.model, a.gen.gguf, a.gen.n_ctx);
  bundle.chat_template();  // a model without one fails here, before the first prompt
  auto engine = bundle.open_engine(a.gen.run_options());
  const runtime::SamplerParams sampling = a.gen.sampler_params();
  const runtime::spec::Speculation speculation = a.gen.speculation(bundle);
  std::vector<text::ChatMessage> history;
  auto start = [&] {
    history.clear();
    if (!a.system.empty()) history.push_back({"system", a.system});
  };
  start();
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "loom chat: %s, context %d tokens. /reset clears the conversation, /exit or Ctrl-D quits.\n",
               bundle.model().origin.c_str(), engine->options().n_ctx);
  std::string line;
  uint64_t turn = 0;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;  // Ctrl-D
    if (!tty) std::printf("%s\n", line.c_str());  // echo piped input so a transcript reads whole
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      start();
      std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    runtime::Request req;
    req.prompt = bundle.encode_chat(history);
    req.sampling = sampling;
    req.sampling.seed = sampling.seed + turn++;  // one seed per turn, all from the one printed
    req.max_tokens = a.n_predict;
    req.cache_prefix = true;  // the next turn starts from this one's blocks
    req.speculation = speculation;
    req.constraint = a.gen.constraint(bundle.tokenizer());  // each reply on its own
    const auto sub = engine->submit(std::move(req));
    if (!sub.ok()) {  // e.g. the conversation outgrew the context: keep the chat alive
      history.pop_back();
      std::fprintf(stderr, "\nloom: %s — /reset to start over\n", sub.refused.c_str());
      continue;
    }
    std::string reply;
    runtime::Event end;
    for (bool done = false; !done;)
      for (auto& ev : engine->step()) {
        if (ev.id != sub.id) continue;
        reply += ev.text;
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
        if (ev.finish != runtime::Finish::none) {
          end = std::move(ev);
          done = true;
        }
      }
    std::printf("\n");
    if (end.finish == runtime::Finish::error) {
      history.pop_back();
      std::fprintf(stderr, "loom: %s — /reset to start over\n", end.error.c_str());
      continue;
    }
    history.push_back({"assistant", reply});
    const bool eog = end.finish == runtime::Finish::eog || end.finish == runtime::Finish::stop;
    if (a.verbose || !eog)
      std::fprintf(stderr, "[%s; %d prompt tokens re-used from the cache%s]\n", end.stats.speed_line().c_str(),
                   end.stats.reused_tokens, eog ? "" : "; stopped by the token limit");
    if (a.verbose && end.stats.verify_steps > 0) std::fprintf(stderr, "[%s]\n", speculation_line(end.stats).c_str());
  }
  std::printf("\n");
}

const RegisterVerb reg("chat", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("chat", "Interactive chat in the terminal with the model's chat template");
  auto a = std::make_shared<ChatArgs>();
  a->gen.add_to(*cmd);
  cmd->add_option("--system", a->system, "system prompt");
  cmd->add_option("-n,--n-predict", a->n_predict, "tokens per reply at most (-1: until end of turn or full context)");
  cmd->add_flag("-v,--verbose", a->verbose, "print speed and cache re-use after every reply");
  cmd->callback([a] { chat(*a); });
});

}  // namespace
}  // namespace loom::cli
