// `loom chat -m model.gguf`: an interactive terminal chat. Each turn re-renders the whole
// conversation with the model's chat template; the generator re-uses the KV cache for the
// tokens the new rendering shares with what the cache holds, so a turn only evaluates what is
// new. /reset forgets the conversation, /exit or Ctrl-D quits.
#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>

#include "cli/generation_flags.h"
#include "cli/verb.h"
#include "common/error.h"
#include "runtime/generator.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace loom::cli {

namespace {

struct ChatArgs {
  GenerationFlags gen;
  std::string system;
  int32_t n_predict = -1;
  bool verbose = false;
};

// Templates that write BOS themselves (gemma's `{{ bos_token }}`) must not get a second one.
bool starts_with_bos(const std::string& text, const text::Tokenizer& tok) {
  const auto& v = tok.vocab();
  if (!v.valid(v.bos)) return false;
  const std::string& b = tok.token_to_piece(v.bos, true);
  return !b.empty() && text.rfind(b, 0) == 0;
}

void chat(ChatArgs& a) {
  auto model = runtime::load_model(a.gen.model, a.gen.gguf);
  const auto tok = text::Tokenizer::from_gguf(*model.file);
  const auto tmpl = text::chat_template_for(*model.file);
  auto session = runtime::open_session(model, a.gen.run_options());
  runtime::Sampler sampler(a.gen.sampler_params());
  runtime::Generator gen(*session, sampler, tok);
  std::vector<text::ChatMessage> history;
  auto start = [&] {
    history.clear();
    if (!a.system.empty()) history.push_back({"system", a.system});
  };
  start();
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "loom chat: %s, context %d tokens. /reset clears the conversation, /exit or Ctrl-D quits.\n",
               model.origin.c_str(), session->n_ctx());
  std::string line;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;  // Ctrl-D
    if (!tty) std::printf("%s\n", line.c_str());  // echo piped input so a transcript reads whole
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      start();
      gen.reset();
      std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    const std::string prompt = tmpl.render(history, /*add_generation_prompt=*/true);
    const auto ids = tok.encode(prompt, /*add_special=*/!starts_with_bos(prompt, tok), /*parse_special=*/true);
    std::string reply;
    runtime::GenerationStats st;
    try {
      st = gen.generate(ids, a.n_predict, [&](const std::string& s) {
        reply += s;
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      });
    } catch (const loom::Error& e) {  // e.g. the context is full: keep the chat alive
      history.pop_back();
      std::fprintf(stderr, "\nloom: %s — /reset to start over\n", e.what());
      continue;
    }
    std::printf("\n");
    history.push_back({"assistant", reply});
    if (a.verbose || !st.stopped_by_eog)
      std::fprintf(stderr, "[%s; %d prompt tokens re-used from the cache%s]\n", st.speed_line().c_str(),
                   st.reused_tokens, st.stopped_by_eog ? "" : "; stopped by the token limit");
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
