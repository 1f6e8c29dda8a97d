// The prompt side of tool calling: format detection on the stored templates, the reply
// grammars (a call that fits a function's parameters matches; a wrong name, a bad argument, a
// second call without parallel calls does not), and the generic format's conversation.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "../constrain/match_util.h"
#include "text/tools/tool_prompt.h"

namespace loom::text::tools {
namespace {

using constrain::testing::gbnf;
using constrain::testing::matches;
using ojson = nlohmann::ordered_json;

std::string template_source(const std::string& name) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/tests/data/templates/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

ToolRequest weather_and_add(ChoiceMode choice = ChoiceMode::required, bool parallel = true) {
  ToolRequest tr;
  tr.functions.push_back({"get_weather", "Weather in a city",
                          ojson::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                            "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false})")});
  // A parameters schema with its own $defs: its references must still resolve inside the reply's schema.
  tr.functions.push_back({"add", "",
                          ojson::parse(R"({"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
                            "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}},
                            "required": ["a", "b"], "additionalProperties": false})")});
  tr.choice = choice;
  tr.parallel = parallel;
  return tr;
}

TEST(ToolFormat, DetectedFromTheStoredTemplates) {
  EXPECT_EQ(detect_format(template_source("qwen2.5-7b-instruct.jinja")), Format::hermes);
  EXPECT_EQ(detect_format(template_source("hermes-3-llama-3.1-8b-tool-use.jinja")), Format::hermes);
  EXPECT_EQ(detect_format(template_source("qwq-32b.jinja")), Format::hermes);
  EXPECT_EQ(detect_format(template_source("llama-3.3-70b-instruct.jinja")), Format::llama3);
  EXPECT_EQ(detect_format(template_source("llama-3.2-instruct.jinja")), Format::llama3);
  EXPECT_EQ(detect_format(template_source("mistral-nemo-instruct-2407.jinja")), Format::mistral);
  EXPECT_EQ(detect_format(template_source("smollm2-135m-instruct.jinja")), Format::generic);
  EXPECT_EQ(detect_format(template_source("gemma3.jinja")), Format::generic);
  EXPECT_EQ(detect_format(template_source("functionary-medium-v3.1.jinja")), Format::generic);  // <function=…>: not Llama JSON
}

TEST(ToolGrammar, HermesCallsFitTheirFunctions) {
  const auto g = gbnf(reply_grammar(Format::hermes, weather_and_add()));
  EXPECT_TRUE(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_TRUE(matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 40}}\n</tool_call>\n"
                         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": \"celsius\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));       // no such tool
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>"));    // b is required
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 200, \"b\": 1}}\n</tool_call>"));  // > 99
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"X\", \"unit\": \"K\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g, "Sure! <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}\n</tool_call>"));
}

TEST(ToolGrammar, NamedAndSingleCallsAreEnforced) {
  auto tr = weather_and_add(ChoiceMode::named, false);
  tr.named = "add";
  const auto g = gbnf(reply_grammar(Format::hermes, tr));
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
  EXPECT_TRUE(matches(g, add));
  EXPECT_FALSE(matches(g, add + "\n" + add));  // parallel_tool_calls false: one call
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
}

TEST(ToolGrammar, LlamaAndMistralShapes) {
  const auto l = gbnf(reply_grammar(Format::llama3, weather_and_add()));
  EXPECT_TRUE(matches(l, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
  EXPECT_FALSE(matches(l, "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"));
  const auto m = gbnf(reply_grammar(Format::mistral, weather_and_add()));
  EXPECT_TRUE(matches(m, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, "
                         "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}]"));
  EXPECT_FALSE(matches(m, "[TOOL_CALLS][]"));
}

TEST(ToolGrammar, AutoIsFreeForNativeFormatsAndAChoiceForTheGenericOne) {
  EXPECT_EQ(reply_grammar(Format::hermes, weather_and_add(ChoiceMode::automatic)), "");
  EXPECT_EQ(reply_grammar(Format::generic, weather_and_add(ChoiceMode::none)), "");
  const auto g = gbnf(reply_grammar(Format::generic, weather_and_add(ChoiceMode::automatic)));
  EXPECT_TRUE(matches(g, R"({"response": "Hello there."})"));
  EXPECT_TRUE(matches(g, R"({"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]})"));
  EXPECT_FALSE(matches(g, R"({"tool_calls": []})"));
  EXPECT_FALSE(matches(g, R"({"tool_calls": [{"name": "add", "arguments": {"a": "3", "b": 4}}]})"));
  const auto req = gbnf(reply_grammar(Format::generic, weather_and_add(ChoiceMode::required, false)));
  EXPECT_FALSE(matches(req, R"({"response": "Hello there."})"));
  EXPECT_FALSE(matches(req, R"({"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]})"));
}

TEST(ToolConversation, GenericRendersCallsAndResultsAsText) {
  const ojson messages = ojson::parse(R"([
    {"role": "user", "content": "Weather in Oslo and 2+2?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "4"}])");
  const ChatRequest r = tool_conversation(Format::generic, messages, weather_and_add(ChoiceMode::automatic));
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_NE(r.messages[0]["content"].get<std::string>().find("\"get_weather\""), std::string::npos);
  EXPECT_EQ(r.messages[2]["content"], R"({"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}},{"name":"add","arguments":{"a":2,"b":2}}]})");
  EXPECT_EQ(r.messages[3]["role"], "user");  // both results in one turn, each named after its call
  EXPECT_EQ(r.messages[3]["content"], "{\"tool_response\":{\"tool_call_id\":\"call_1\",\"name\":\"get_weather\",\"content\":\"-3 C\"}}\n"
                                      "{\"tool_response\":{\"tool_call_id\":\"call_2\",\"name\":\"add\",\"content\":\"4\"}}");
  EXPECT_TRUE(r.tools.is_null());
  const ChatRequest n = tool_conversation(Format::hermes, messages, weather_and_add(ChoiceMode::automatic));
  EXPECT_EQ(n.messages[1]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"city": "Oslo"})"));
}

}  // namespace
}  // namespace loom::text::tools
