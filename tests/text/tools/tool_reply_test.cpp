// The reply side of tool calling: text → content + calls per format, and the streaming
// contract — whatever pieces the text arrives in, push() + finish() give the same message,
// and a call comes out as soon as its text is complete.
#include <gtest/gtest.h>

#include "text/tools/tool_reply.h"

namespace loom::text::tools {
namespace {

using ojson = nlohmann::ordered_json;

ToolRequest two_tools(ChoiceMode choice = ChoiceMode::automatic, bool parallel = true) {
  ToolRequest tr;
  tr.functions.push_back({"get_weather", "", ojson::parse(R"({"type": "object"})")});
  tr.functions.push_back({"add", "", ojson::parse(R"({"type": "object"})")});
  tr.choice = choice;
  tr.parallel = parallel;
  return tr;
}

struct Reply {
  std::string content;
  std::vector<Call> calls;
};

// Feeds `text` in pieces of `piece` bytes; content is what push() showed plus finish()'s rest.
Reply run(Format f, const ToolRequest& tr, const std::string& text, size_t piece) {
  ReplyParser p(f, tr);
  Reply r;
  auto add = [&r](ReplyDelta d) {
    r.content += d.content;
    r.calls.insert(r.calls.end(), d.calls.begin(), d.calls.end());
  };
  for (size_t at = 0; at < text.size(); at += piece) add(p.push(text.substr(at, piece)));
  add(p.finish());
  return r;
}

// The same reply whatever the piece size; returns it.
Reply parsed(Format f, const ToolRequest& tr, const std::string& text) {
  const Reply whole = run(f, tr, text, text.size() + 1);
  for (size_t piece : {1, 2, 3, 5, 7}) {
    const Reply r = run(f, tr, text, piece);
    EXPECT_EQ(r.content, whole.content) << "piece " << piece;
    EXPECT_EQ(r.calls.size(), whole.calls.size()) << "piece " << piece;
    for (size_t i = 0; i < r.calls.size() && i < whole.calls.size(); ++i) {
      EXPECT_EQ(r.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(r.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  return whole;
}

TEST(ToolReply, HermesCallsAfterSomeText) {
  const Reply r = parsed(Format::hermes, two_tools(),
                         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                         "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me check.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
}

TEST(ToolReply, TextThatOnlyLooksLikeAMarkerIsContent) {
  const Reply r = parsed(Format::hermes, two_tools(), "a <tool_ca b <tool_call>{not json}</tool_call>");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "a <tool_ca b <tool_call>{not json}</tool_call>");
  EXPECT_EQ(parsed(Format::hermes, two_tools(), "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>").calls.size(), 0u);
}

TEST(ToolReply, EachCallComesOutWhenItsTextCloses) {
  ReplyParser hermes(Format::hermes, two_tools());
  EXPECT_TRUE(hermes.push("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}").calls.empty());
  EXPECT_EQ(hermes.push("\n</tool_call>\n<tool_call>").calls.size(), 1u);
  ReplyParser generic(Format::generic, two_tools(ChoiceMode::required));
  EXPECT_TRUE(generic.push(R"({"tool_calls": [{"name": "add", "arguments": {"a": "}"})").calls.empty());
  EXPECT_EQ(generic.push(R"(}, {"name": "add")").calls.size(), 1u);  // the brace inside a string did not count
  EXPECT_EQ(generic.push(R"(, "arguments": {}}]})").calls.size(), 1u);
  EXPECT_TRUE(generic.finish().calls.empty());
}

TEST(ToolReply, ParallelFalseKeepsTheFirstCall) {
  const std::string two = "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(parsed(Format::hermes, two_tools(ChoiceMode::automatic, false), two).calls.size(), 1u);
  EXPECT_EQ(parsed(Format::hermes, two_tools(), two).calls.size(), 2u);
}

TEST(ToolReply, LlamaJsonWithOrWithoutPythonTag) {
  Reply r = parsed(Format::llama3, two_tools(), "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":1})");
  r = parsed(Format::llama3, two_tools(), "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  r = parsed(Format::llama3, two_tools(), "It is sunny. {\"name\": \"add\"}");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "It is sunny. {\"name\": \"add\"}");
}

TEST(ToolReply, MistralArrayWithNineCharacterIds) {
  const Reply r = parsed(Format::mistral, two_tools(),
                         "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"get_weather\", \"arguments\": {}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id.size(), 9u);
  EXPECT_EQ(r.content, "");
}

TEST(ToolReply, GenericResponseOrCalls) {
  Reply r = parsed(Format::generic, two_tools(), R"({"response": "Hi \"there\"\n"})");
  EXPECT_EQ(r.content, "Hi \"there\"\n");
  EXPECT_TRUE(r.calls.empty());
  r = parsed(Format::generic, two_tools(), R"({"tool_calls": [{"name": "add", "arguments": {"b": 2, "a": 1}}]})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"b":2,"a":1})");  // the model's key order is kept
  EXPECT_EQ(r.content, "");
}

TEST(ToolReply, WithoutActiveToolsEverythingIsContent) {
  const Reply r = parsed(Format::hermes, two_tools(ChoiceMode::none), "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>");
}

}  // namespace
}  // namespace loom::text::tools
