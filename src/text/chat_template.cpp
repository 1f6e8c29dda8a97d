#include "text/chat_template.h"

#include <fmt/format.h>

#include "common/error.h"
#include "gguf/file.h"
#include "text/jinja/json.h"

namespace loom::text {
namespace {

// google/gemma-3-*-it, tokenizer_config.json "chat_template". Gemma 3 GGUFs converted
// without it (gemma-3-270m-it among them) need it from here; tests compare it with
// tests/data/templates/gemma3.jinja.
constexpr const char* kGemma3Template = R"TPL({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}
)TPL";

struct Builtin {
  const char* architecture;
  const char* source;
};
constexpr Builtin kBuiltins[] = {
    {"gemma3", kGemma3Template},
};

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos, std::string eos, jinja::Clock clock)
    : source_(std::move(source)), bos_(std::move(bos)), eos_(std::move(eos)), tpl_(source_),
      globals_(jinja::standard_globals(std::move(clock))) {}

std::string ChatTemplate::render(const ChatRequest& req) const {
  if (!req.messages.is_array()) loom::fail("chat template: messages must be a JSON array");
  std::map<std::string, jinja::Value> ctx;
  // HF passes tools and documents explicitly (None when absent) plus the special tokens.
  ctx["messages"] = jinja::from_json(req.messages);
  ctx["tools"] = jinja::from_json(req.tools);
  ctx["documents"] = jinja::Value::none();
  ctx["add_generation_prompt"] = jinja::Value::boolean(req.add_generation_prompt);
  ctx["bos_token"] = jinja::Value::string(bos_);
  ctx["eos_token"] = jinja::Value::string(eos_);
  for (auto& [k, v] : req.extra) ctx[k] = jinja::from_json(v);
  return tpl_.render(ctx, globals_);
}

std::string token_text(const gguf::File& f, const char* id_key) {
  const gguf::Value* id = f.find(id_key);
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (!id || !tokens) return "";
  const auto& items = tokens->as_array().items;
  int64_t k = id->as_int();
  if (k < 0 || size_t(k) >= items.size())
    loom::fail("{}: {} = {} is outside the vocabulary ({} tokens)", f.path(), id_key, k, items.size());
  return items[size_t(k)].as_string();
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  ChatRequest req;
  for (const ChatMessage& m : messages) req.messages.push_back({{"role", m.role}, {"content", m.content}});
  req.add_generation_prompt = add_generation_prompt;
  return render(req);
}

std::optional<std::string> builtin_chat_template(std::string_view architecture) {
  for (const Builtin& b : kBuiltins)
    if (architecture == b.architecture) return std::string(b.source);
  return std::nullopt;
}

std::string chat_template_source(const gguf::File& f) {
  std::string src = f.get_string("tokenizer.chat_template");
  if (!src.empty()) return src;
  std::string arch = f.architecture();
  if (auto b = builtin_chat_template(arch)) return *b;
  loom::fail("{}: no tokenizer.chat_template and no built-in chat template for architecture '{}'", f.path(), arch);
}

ChatTemplate chat_template_for(const gguf::File& f, jinja::Clock clock) {
  return ChatTemplate(chat_template_source(f), token_text(f, "tokenizer.ggml.bos_token_id"),
                      token_text(f, "tokenizer.ggml.eos_token_id"), std::move(clock));
}

jinja::Clock fixed_clock(const std::string& iso) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  int n = std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
  if (n != 3 && n != 6) loom::fail("bad fixed time '{}': want YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", iso);
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  std::time_t t = timegm(&tm);  // normalises and fills in the weekday and day of the year
  std::tm out{};
  gmtime_r(&t, &out);
  return [out] { return out; };
}

}  // namespace loom::text
