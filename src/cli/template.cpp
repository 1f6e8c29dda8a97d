// `loom template -m model.gguf --messages conv.json [--tools tools.json]
//  [--add-generation-prompt] [--template FILE] [--var k=json]`: renders a conversation
// through the model's chat template and prints the prompt exactly (no trailing newline).
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
#include "text/chat_template.h"

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
  std::string model, messages, tools, template_file, bos, eos, now;
  std::vector<std::string> vars;
  bool add_generation_prompt = false;
};

void run(const TemplateArgs& a) {
  loom::text::ChatRequest req;
  ojson conv = read_json(a.messages);
  // Either a bare messages array or {"messages": [...], "tools": [...], ...}.
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

  std::string source, bos = a.bos, eos = a.eos;
  if (!a.model.empty()) {
    gguf::File f = gguf::File::open(a.model);
    source = loom::text::chat_template_source(f);
    if (bos.empty()) bos = loom::text::token_text(f, "tokenizer.ggml.bos_token_id");
    if (eos.empty()) eos = loom::text::token_text(f, "tokenizer.ggml.eos_token_id");
  }
  if (!a.template_file.empty()) source = loom::cli::read_file(a.template_file);
  if (source.empty() && a.model.empty()) loom::fail("loom template needs -m MODEL or --template FILE");

  loom::text::ChatTemplate tpl(source, bos, eos, clock);
  std::string out = tpl.render(req);
  std::fwrite(out.data(), 1, out.size(), stdout);
}

loom::cli::RegisterVerb reg("template", [](CLI::App& root) {
  auto* cmd = root.add_subcommand("template", "Render a conversation through a chat template");
  auto a = std::make_shared<TemplateArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model whose chat template (and BOS/EOS) to use");
  cmd->add_option("--messages", a->messages, "conversation JSON: a messages array or {messages, tools, ...}")->required();
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
