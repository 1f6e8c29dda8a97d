// `loom template -m model.gguf --messages conv.json [--tools tools.json]
//  [--add-generation-prompt] [--template FILE] [--var k=json]`: renders a conversation
// through the model's chat template and prints the prompt exactly (no trailing newline).
// `--openai BODY.json` instead renders a /v1/chat/completions body the way `loom serve` does
// (its checks, its tool format for the template, the generic format's system section);
// `--show-request` prints what the template is given then (format, messages, tools, and the
// reply grammar), as JSON.
// LOOM_TEMPLATE_NOW=YYYY-MM-DD[THH:MM:SS] (or --now) pins strftime_now().
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/files.h"
#include "cli/verb.h"
#include "common/error.h"
#include "gguf/file.h"
#include "serve/protocol.h"
#include "text/chat_template.h"
#include "text/tools/tool_prompt.h"

namespace {

using ojson = nlohmann::ordered_json;

ojson read_json(const std::string& path) {
  try {
    return ojson::parse(loom::cli::read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    loom::fail("{}: invalid JSON: {}", path, e.what());
  }
}

struct TemplateArgs {
  std::string model, messages, tools, template_file, bos, eos, now, openai;
  std::vector<std::string> vars;
  bool add_generation_prompt = false, show_request = false;
};

// A chat completions body as the server reads it; an error names the field, as its 400 would.
loom::text::ChatRequest openai_request(const std::string& path, const std::string& source, bool show) {
  namespace tt = loom::text::tools;
  loom::serve::ChatRequest r;
  try {
    r = loom::serve::parse_chat(loom::cli::read_file(path), loom::serve::Limits{});
  } catch (const loom::serve::ApiError& e) {
    loom::fail("{}: {}", path, e.what());
  }
  const tt::Format f = tt::detect_format(source);
  loom::text::ChatRequest req = tt::tool_conversation(f, r.messages, r.tools);
  if (show) {
    const ojson out = {{"format", tt::format_name(f)},
                       {"messages", req.messages},
                       {"tools", req.tools},
                       {"grammar", tt::reply_grammar(f, r.tools)}};
    const std::string s = out.dump(2) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::exit(0);
  }
  return req;
}

// --messages: either a bare messages array or {"messages": [...], "tools": [...], ...}.
loom::text::ChatRequest conversation(const TemplateArgs& a) {
  loom::text::ChatRequest req;
  ojson conv = read_json(a.messages);
  if (conv.is_object()) {
    if (!conv.contains("messages")) loom::fail("{}: object without \"messages\"", a.messages);
    for (auto& [k, v] : conv.items()) {
      if (k == "messages") req.messages = v;
      else if (k == "tools") req.tools = v;
      else if (k == "add_generation_prompt") req.add_generation_prompt = v.get<bool>();
      else req.extra[k] = v;
    }
  } else {
    req.messages = conv;
  }
  if (!a.tools.empty()) req.tools = read_json(a.tools);
  return req;
}

void run(const TemplateArgs& a) {
  if (a.messages.empty() == a.openai.empty()) loom::fail("loom template needs one of --messages and --openai");
  std::string source, bos = a.bos, eos = a.eos;
  if (!a.model.empty()) {
    gguf::File f = gguf::File::open(a.model);
    source = loom::text::chat_template_source(f);
    if (bos.empty()) bos = loom::text::token_text(f, "tokenizer.ggml.bos_token_id");
    if (eos.empty()) eos = loom::text::token_text(f, "tokenizer.ggml.eos_token_id");
  }
  if (!a.template_file.empty()) source = loom::cli::read_file(a.template_file);
  if (source.empty() && a.model.empty()) loom::fail("loom template needs -m MODEL or --template FILE");

  loom::text::ChatRequest req = a.openai.empty() ? conversation(a) : openai_request(a.openai, source, a.show_request);
  if (a.add_generation_prompt) req.add_generation_prompt = true;
  for (const std::string& kv : a.vars) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) loom::fail("--var wants NAME=JSON, got '{}'", kv);
    try {
      req.extra[kv.substr(0, eq)] = ojson::parse(kv.substr(eq + 1));
    } catch (const nlohmann::json::parse_error& e) {
      loom::fail("--var {}: invalid JSON: {}", kv, e.what());
    }
  }

  std::string now = a.now;
  if (now.empty())
    if (const char* env = std::getenv("LOOM_TEMPLATE_NOW")) now = env;
  loom::text::jinja::Clock clock = now.empty() ? loom::text::jinja::Clock(loom::text::jinja::local_now)
                                               : loom::text::fixed_clock(now);
  loom::text::ChatTemplate tpl(source, bos, eos, clock);
  std::string out = tpl.render(req);
  std::fwrite(out.data(), 1, out.size(), stdout);
}

loom::cli::RegisterVerb reg("template", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("template", "Render a conversation through a chat template");
  auto a = std::make_shared<TemplateArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model whose chat template (and BOS/EOS) to use");
  cmd->add_option("--messages", a->messages, "conversation JSON: a messages array or {messages, tools, ...}");
  cmd->add_option("--openai", a->openai, "a /v1/chat/completions body: render it as `loom serve` does "
                                         "(with the generation prompt)");
  cmd->add_flag("--show-request", a->show_request, "with --openai: print the format, messages, tools and reply "
                                                  "grammar the server derives, as JSON");
  cmd->add_option("--tools", a->tools, "tool definitions JSON (overrides the conversation's)");
  cmd->add_flag("--add-generation-prompt", a->add_generation_prompt, "end with the assistant turn opener");
  cmd->add_option("--template", a->template_file, "Jinja template file instead of the model's");
  cmd->add_option("--bos", a->bos, "BOS token string (default: the model's)");
  cmd->add_option("--eos", a->eos, "EOS token string (default: the model's)");
  cmd->add_option("--var", a->vars, "extra template variable NAME=JSON (repeatable)");
  cmd->add_option("--now", a->now, "pin strftime_now() to YYYY-MM-DD[THH:MM:SS]");
  cmd->callback([a] { run(*a); });
});

}  // namespace
