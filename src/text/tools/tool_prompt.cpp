#include "text/tools/tool_prompt.h"

#include <map>

#include <fmt/format.h>

#include "common/error.h"
#include "text/constrain/json_schema.h"

namespace loom::text::tools {

using ojson = nlohmann::ordered_json;

namespace {

ojson parse_arguments(const ojson& args) {
  if (!args.is_string()) return args;
  try {
    return ojson::parse(args.get<std::string>());
  } catch (const nlohmann::json::exception&) {
    loom::fail("tool call arguments are not a JSON object: {}", args.get<std::string>());
  }
}

std::string text_of(const ojson& m) {
  auto it = m.find("content");
  return it == m.end() || !it->is_string() ? std::string() : it->get<std::string>();
}

// A function's parameters with every "$ref": "#…" re-rooted under "#/$defs/<key>", so they
// still resolve once the schema sits inside the reply's schema. Values (const, enum, default,
// examples) are data, not schemas: left alone.
ojson reroot(const ojson& s, const std::string& base) {
  if (s.is_array()) {
    ojson out = ojson::array();
    for (const auto& x : s) out.push_back(reroot(x, base));
    return out;
  }
  if (!s.is_object()) return s;
  ojson out = ojson::object();
  for (const auto& [k, v] : s.items()) {
    if (k == "$ref" && v.is_string() && v.get<std::string>().rfind('#', 0) == 0)
      out[k] = base + v.get<std::string>().substr(1);
    else if (k == "const" || k == "enum" || k == "default" || k == "examples")
      out[k] = v;
    else
      out[k] = reroot(v, base);
  }
  return out;
}

ojson parameters_of(const Function& f) {
  return f.parameters.is_null() ? ojson{{"type", "object"}, {"properties", ojson::object()}} : f.parameters;
}

// {"$defs": {loom-fn-i: parameters}, "anyOf": [{name: const, <args_key>: $ref}, ...]}: one call.
ojson call_schema(const ToolRequest& tr, const char* args_key) {
  ojson defs = ojson::object(), alts = ojson::array();
  int i = 0;
  for (const Function* f : tr.callable()) {
    const std::string key = fmt::format("loom-fn-{}", i++);
    defs[key] = reroot(parameters_of(*f), "#/$defs/" + key);
    alts.push_back({{"type", "object"},
                    {"properties", {{"name", {{"const", f->name}}}, {args_key, {{"$ref", "#/$defs/" + key}}}}},
                    {"required", ojson::array({"name", args_key})},
                    {"additionalProperties", false}});
  }
  if (alts.empty()) loom::fail("tool_choice names a function that is not among the tools");
  return {{"$defs", defs}, {"anyOf", alts}};
}

// The GBNF of one call as rule `tool-call` (json_schema_to_gbnf's root renamed; its own rules
// never refer to `root`).
std::string call_rules(const ToolRequest& tr, const char* args_key) {
  const std::string g = constrain::json_schema_to_gbnf(call_schema(tr, args_key));
  if (g.rfind("root ::= ", 0) != 0) loom::fail("internal: unexpected grammar head");
  return "tool-call" + g.substr(4);
}

}  // namespace

std::string generic_instructions(const ToolRequest& tr) {
  std::string s = "You can call these tools (JSON Schema parameters):\n";
  for (const Function* f : tr.callable()) {
    ojson d = {{"name", f->name}};
    if (!f->description.empty()) d["description"] = f->description;
    d["parameters"] = parameters_of(*f);
    s += d.dump() + "\n";
  }
  const std::string calls = tr.parallel
                                ? R"({"tool_calls": [{"name": "<tool name>", "arguments": {<its arguments>}}, ...]})"
                                : R"({"tool_calls": [{"name": "<tool name>", "arguments": {<its arguments>}}]})";
  if (tr.choice == ChoiceMode::automatic)
    s += "Reply with one JSON object: " + calls + " to call tools, or {\"response\": \"<your reply>\"} to answer directly.";
  else if (tr.choice == ChoiceMode::named)
    s += fmt::format("Reply with one JSON object that calls the tool \"{}\": {}", tr.named, calls);
  else
    s += "Reply with one JSON object that calls tools: " + calls;
  if (tr.parallel) s += "\nTo call several tools at once, list every call in \"tool_calls\".";
  return s;
}

ojson generic_reply_schema(const ToolRequest& tr) {
  ojson call = call_schema(tr, "arguments");
  ojson defs = call["$defs"];
  ojson calls = {{"type", "array"}, {"items", {{"anyOf", call["anyOf"]}}}, {"minItems", 1}};
  if (!tr.parallel) calls["maxItems"] = 1;
  ojson with_calls = {{"type", "object"},
                      {"properties", {{"tool_calls", calls}}},
                      {"required", ojson::array({"tool_calls"})},
                      {"additionalProperties", false}};
  if (tr.choice != ChoiceMode::automatic) {
    with_calls["$defs"] = defs;
    return with_calls;
  }
  ojson response = {{"type", "object"},
                    {"properties", {{"response", {{"type", "string"}}}}},
                    {"required", ojson::array({"response"})},
                    {"additionalProperties", false}};
  return {{"$defs", defs}, {"anyOf", ojson::array({with_calls, response})}};
}

std::string reply_grammar(Format f, const ToolRequest& tr) {
  if (!tr.active()) return "";
  if (f == Format::generic) return constrain::json_schema_to_gbnf(generic_reply_schema(tr));
  if (tr.choice == ChoiceMode::automatic) return "";  // free text; calls are parsed out of it
  switch (f) {
    case Format::hermes:
      return std::string(R"(root ::= "<tool_call>\n" tool-call "\n</tool_call>")") +
             (tr.parallel ? R"( ("\n<tool_call>\n" tool-call "\n</tool_call>")*)" : "") + "\n" +
             call_rules(tr, "arguments");
    case Format::mistral:
      return std::string(R"(root ::= "[TOOL_CALLS][" tool-call)") + (tr.parallel ? R"( ("," space tool-call)*)" : "") +
             " \"]\"\n" + call_rules(tr, "arguments");
    case Format::llama3:  // one call per reply: the format has no list
      return "root ::= tool-call\n" + call_rules(tr, "parameters");
    case Format::generic: break;
  }
  return "";
}

ChatRequest tool_conversation(Format f, const ojson& messages, const ToolRequest& tr) {
  ChatRequest req;
  req.add_generation_prompt = true;
  if (f != Format::generic) {
    for (ojson m : messages) {
      if (auto it = m.find("tool_calls"); it != m.end())
        for (auto& c : *it) c["function"]["arguments"] = parse_arguments(c["function"]["arguments"]);
      req.messages.push_back(std::move(m));
    }
    if (tr.active()) req.tools = tr.tools;
    return req;
  }
  // Generic: only roles and text, which every template renders.
  std::map<std::string, std::string> names;  // call id → function name, for the results
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    const std::string role = m.value("role", "");
    if (role == "assistant" && m.contains("tool_calls")) {
      ojson calls = ojson::array();
      for (const auto& c : m["tool_calls"]) {
        names[c.value("id", "")] = c["function"].value("name", "");
        calls.push_back({{"name", c["function"]["name"]}, {"arguments", parse_arguments(c["function"]["arguments"])}});
      }
      std::string content = text_of(m);
      req.messages.push_back({{"role", "assistant"}, {"content", (content.empty() ? "" : content + "\n") +
                                                                    ojson{{"tool_calls", calls}}.dump()}});
    } else if (role == "tool") {
      std::string lines;
      for (; i < messages.size() && messages[i].value("role", "") == "tool"; ++i) {
        const ojson& t = messages[i];
        const std::string id = t.value("tool_call_id", "");
        ojson r = {{"tool_call_id", id}};
        if (t.contains("name") && t["name"].is_string()) r["name"] = t["name"];
        else if (names.count(id)) r["name"] = names[id];
        r["content"] = text_of(t);
        lines += (lines.empty() ? "" : "\n") + ojson{{"tool_response", r}}.dump();
      }
      --i;
      req.messages.push_back({{"role", "user"}, {"content", lines}});
    } else {
      req.messages.push_back({{"role", role}, {"content", text_of(m)}});
    }
  }
  if (tr.active()) {
    const std::string section = generic_instructions(tr);
    if (!req.messages.empty() && req.messages[0]["role"] == "system")
      req.messages[0]["content"] = req.messages[0]["content"].get<std::string>() + "\n\n" + section;
    else
      req.messages.insert(req.messages.begin(), ojson{{"role", "system"}, {"content", section}});
  }
  return req;
}

}  // namespace loom::text::tools
