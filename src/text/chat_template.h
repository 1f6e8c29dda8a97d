// Chat templates: a model's Jinja template rendered the way Hugging Face's
// apply_chat_template renders it (same variables, same globals), so the prompt Loom feeds a
// model is byte-for-byte the prompt the model was trained on.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/template.h"

namespace gguf {
class File;
}

namespace loom::text {

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // role/content/tool_calls/…
  nlohmann::ordered_json tools;  // null: the template sees tools=None, as in HF
  bool add_generation_prompt = false;
  // Further template variables (enable_thinking, date_string, documents, …).
  std::map<std::string, nlohmann::ordered_json> extra;
};

// A plain text turn, for callers that need no tools or content parts.
struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // `clock` feeds strftime_now(); tests pin it.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token,
               jinja::Clock clock = jinja::local_now);

  std::string render(const ChatRequest& req) const;
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string bos_, eos_;
  jinja::Template tpl_;
  std::map<std::string, jinja::Value> globals_;
};

// Templates for models whose GGUF carries none, keyed by general.architecture.
std::optional<std::string> builtin_chat_template(std::string_view architecture);

// The file's tokenizer.chat_template, else the built-in for its architecture; throws
// loom::Error naming the file and architecture when neither exists.
std::string chat_template_source(const gguf::File& f);

// The text of the token whose id is at `id_key` (tokenizer.ggml.bos_token_id, …), or ""
// when the file has no such id or vocabulary.
std::string token_text(const gguf::File& f, const char* id_key);

// chat_template_source compiled, with the BOS/EOS token strings from the file's vocabulary.
ChatTemplate chat_template_for(const gguf::File& f, jinja::Clock clock = jinja::local_now);

// A fixed clock from "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS" (LOOM_TEMPLATE_NOW in tests).
jinja::Clock fixed_clock(const std::string& iso);

}  // namespace loom::text
