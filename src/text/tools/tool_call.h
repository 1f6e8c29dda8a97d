// Tool calling's shared vocabulary: the functions a request offers, how the model may use them
// (tool_choice, parallel calls), the calls parsed out of its text, and the wire format a chat
// template teaches its model. Formats: a template that renders `tools` in one of the known
// families (Hermes/Qwen `<tool_call>`, Llama 3.x JSON, Mistral `[TOOL_CALLS]`) gets its tools
// through the template and its own output shape; any other template gets Loom's generic format
// (tool_prompt.h), as llama.cpp's server does for templates without tools.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::text::tools {

struct Function {
  std::string name, description;
  nlohmann::ordered_json parameters;  // a JSON Schema for the arguments object, in its written key order
};

enum class ChoiceMode { none, automatic, required, named };

struct ToolRequest {
  std::vector<Function> functions;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // the request's `tools`, as written (for templates)
  ChoiceMode choice = ChoiceMode::automatic;
  std::string named;      // ChoiceMode::named: the function that must be called
  bool parallel = true;   // parallel_tool_calls: more than one call per reply allowed
  // The functions a call may name: all, or only the named one.
  std::vector<const Function*> callable() const;
  bool active() const { return !functions.empty() && choice != ChoiceMode::none; }
};

struct Call {
  std::string id;         // call_… (Mistral's templates want 9 alphanumerics: mistral_call_id)
  std::string name;
  std::string arguments;  // a JSON object as text
};

enum class Format { generic, hermes, llama3, mistral };

// The family a template's source belongs to (by the markers its tool rendering writes).
Format detect_format(const std::string& template_source);
const char* format_name(Format f);

// A fresh, process-unique call id: "call_" + 24 alphanumerics; Mistral's templates check for
// exactly 9 alphanumerics, so that format gets those.
std::string new_call_id(Format f);

}  // namespace loom::text::tools
