// The chat request's tool-calling fields and its messages, checked into the shapes
// text/tools takes: every wrong field is a 400 naming it (tools[i]…, tool_choice,
// messages[i].tool_calls[j]…). Read from the body in its written key order, since a tool's
// parameters schema generates its properties in that order.
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "serve/protocol.h"
#include "text/constrain/constraint.h"

namespace loom::serve {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxTools = 128;

[[noreturn]] void bad(const std::string& param, const std::string& what) {
  throw ApiError(400, fmt::format("'{}': {}", param, what), "invalid_request_error", param);
}

const ojson* field(const ojson& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(uint8_t(c)) && c != '_' && c != '-') return false;
  return true;
}

text::tools::Function function_of(const ojson& t, size_t i, std::set<std::string>& seen) {
  const std::string at = fmt::format("tools[{}]", i);
  if (!t.is_object()) bad(at, "must be an object");
  const ojson* type = field(t, "type");
  if (!type || !type->is_string()) bad(at + ".type", "is required (\"function\")");
  if (*type != "function") bad(at + ".type", fmt::format("only type \"function\" is supported, got {}", type->dump()));
  const ojson* fn = field(t, "function");
  if (!fn || !fn->is_object()) bad(at + ".function", "is required and must be an object");
  text::tools::Function f;
  const ojson* name = field(*fn, "name");
  if (!name || !name->is_string() || !valid_name(name->get<std::string>()))
    bad(at + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
  f.name = name->get<std::string>();
  if (!seen.insert(f.name).second) bad(at + ".function.name", fmt::format("'{}' is defined twice", f.name));
  if (const ojson* d = field(*fn, "description")) {
    if (!d->is_string()) bad(at + ".function.description", "must be a string");
    f.description = d->get<std::string>();
  }
  if (const ojson* st = field(*fn, "strict"); st && !st->is_boolean()) bad(at + ".function.strict", "must be true or false");
  if (const ojson* p = field(*fn, "parameters")) {
    if (!p->is_object()) bad(at + ".function.parameters", "must be a JSON Schema object");
    try {  // compiled alone first, so an error names this tool
      text::constrain::compile(text::constrain::SourceKind::json_schema, p->dump());
    } catch (const loom::Error& e) {
      bad(at + ".function.parameters", e.what());
    }
    f.parameters = *p;
  }
  return f;
}

}  // namespace

text::tools::ToolRequest parse_tools(const ojson& o) {
  using text::tools::ChoiceMode;
  text::tools::ToolRequest tr;
  if (const ojson* tools = field(o, "tools")) {
    if (!tools->is_array()) bad("tools", "must be an array of tools");
    if (tools->size() > kMaxTools) bad("tools", fmt::format("at most {} tools", kMaxTools));
    std::set<std::string> seen;
    for (size_t i = 0; i < tools->size(); ++i) tr.functions.push_back(function_of((*tools)[i], i, seen));
    tr.tools = *tools;
  }
  if (const ojson* c = field(o, "tool_choice")) {
    if (c->is_string()) {
      const std::string s = *c;
      if (s == "none") tr.choice = ChoiceMode::none;
      else if (s == "auto") tr.choice = ChoiceMode::automatic;
      else if (s == "required") tr.choice = ChoiceMode::required;
      else bad("tool_choice", fmt::format("must be \"none\", \"auto\", \"required\" or a function, got \"{}\"", s));
    } else if (c->is_object()) {
      const ojson* fn = field(*c, "function");
      if (c->value("type", "") != "function" || !fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
        bad("tool_choice", "an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      tr.choice = ChoiceMode::named;
      tr.named = (*fn)["name"];
      bool known = false;
      for (const auto& f : tr.functions) known |= f.name == tr.named;
      if (!known) bad("tool_choice", fmt::format("names the function '{}', which is not among the tools", tr.named));
    } else {
      bad("tool_choice", "must be a string or an object");
    }
    if (tr.functions.empty() && (tr.choice == ChoiceMode::required))
      bad("tool_choice", "\"required\" needs 'tools'");
  }
  if (const ojson* p = field(o, "parallel_tool_calls")) {
    if (!p->is_boolean()) bad("parallel_tool_calls", "must be true or false");
    tr.parallel = p->get<bool>();
  }
  return tr;
}

namespace {

std::string content_text(const ojson& m, const std::string& param) {
  const ojson* c = field(m, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) bad(param, "must be a string or an array of text parts");
  std::string text;
  for (const auto& part : *c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad(param, "only parts of type 'text' are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

ojson tool_calls_of(const ojson& calls, const std::string& at) {
  if (!calls.is_array()) bad(at, "must be an array");
  ojson out = ojson::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string cj = fmt::format("{}[{}]", at, j);
    const ojson& c = calls[j];
    if (!c.is_object()) bad(cj, "must be an object");
    const ojson* id = field(c, "id");
    if (!id || !id->is_string()) bad(cj + ".id", "is required and must be a string");
    if (const ojson* t = field(c, "type"); t && *t != "function") bad(cj + ".type", "must be \"function\"");
    const ojson* fn = field(c, "function");
    if (!fn || !fn->is_object()) bad(cj + ".function", "is required and must be an object");
    const ojson* name = field(*fn, "name");
    if (!name || !name->is_string()) bad(cj + ".function.name", "is required and must be a string");
    const ojson* args = field(*fn, "arguments");
    ojson parsed;
    if (args && args->is_string()) {
      try {
        parsed = ojson::parse(args->get<std::string>());
      } catch (const nlohmann::json::exception&) {
        bad(cj + ".function.arguments", "is not valid JSON");
      }
    } else if (args) {
      parsed = *args;
    }
    if (!parsed.is_object()) bad(cj + ".function.arguments", "must be a JSON object (or its text)");
    out.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", args->is_string() ? *args : ojson(parsed.dump())}}}});
  }
  return out;
}

}  // namespace

ojson parse_messages(const ojson& o, const Limits& lim) {
  const ojson* msgs = field(o, "messages");
  if (!msgs) bad("messages", "is required");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "must be a non-empty array");
  if (msgs->size() > lim.max_messages) bad("messages", fmt::format("at most {} messages", lim.max_messages));
  ojson out = ojson::array();
  size_t bytes = 0;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(at, "must be an object");
    const ojson* role = field(m, "role");
    if (!role || !role->is_string()) bad(at + ".role", "must be a string");
    std::string rs = *role;
    if (rs != "system" && rs != "developer" && rs != "user" && rs != "assistant" && rs != "tool")
      bad(at + ".role", fmt::format("unknown role '{}'", rs));
    if (rs == "developer") rs = "system";
    const std::string text = content_text(m, at + ".content");
    bytes += text.size();
    ojson msg = {{"role", rs}, {"content", text}};
    if (const ojson* tc = field(m, "tool_calls")) {
      if (rs != "assistant") bad(at + ".tool_calls", "only assistant messages carry tool calls");
      if (!field(m, "content")) msg["content"] = nullptr;  // as sent: templates test for it
      msg["tool_calls"] = tool_calls_of(*tc, at + ".tool_calls");
      bytes += msg["tool_calls"].dump().size();
    }
    if (rs == "tool") {
      const ojson* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) bad(at + ".tool_call_id", "is required in a tool message and must be a string");
      msg["tool_call_id"] = *id;
    }
    if (const ojson* name = field(m, "name")) {
      if (!name->is_string()) bad(at + ".name", "must be a string");
      msg["name"] = *name;
    }
    out.push_back(std::move(msg));
  }
  if (bytes > lim.max_prompt_bytes) bad("messages", fmt::format("more than {} bytes of text", lim.max_prompt_bytes));
  return out;
}

}  // namespace loom::serve
