#include "serve/protocol.h"

#include <gtest/gtest.h>

namespace loom::serve {
namespace {

int status_of(const std::string& body, bool chat = true) {
  try {
    chat ? (void)parse_chat(body, Limits{}) : (void)parse_completion(body, Limits{});
  } catch (const ApiError& e) {
    return e.status;
  }
  return 200;
}

std::string param_of(const std::string& body) {
  try {
    parse_chat(body, Limits{});
  } catch (const ApiError& e) {
    return e.param;
  }
  return "";
}

const std::string kMsgs = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(Protocol, ParsesAChatRequestWithItsSamplingFields) {
  const auto r = parse_chat(R"({"model": "m", )" + kMsgs +
                                R"(, "temperature": 0, "top_p": 0.5, "max_tokens": 7, "stop": "x", "seed": 3, "n": 2,
                                "stream": true, "stream_options": {"include_usage": true}})",
                            Limits{});
  EXPECT_EQ(r.gen.model, "m");
  EXPECT_EQ(r.gen.sampling.temperature, 0.f);
  EXPECT_EQ(r.gen.sampling.top_p, 0.5f);
  EXPECT_EQ(r.gen.max_tokens, 7);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.gen.sampling.seed, 3u);
  EXPECT_EQ(r.gen.n, 2);
  EXPECT_TRUE(r.gen.stream && r.gen.include_usage);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");
}

TEST(Protocol, TextPartsAreJoinedAndDeveloperIsSystem) {
  const auto r = parse_chat(R"({"model": "m", "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},
                                {"type": "text", "text": "b"}]}]})",
                            Limits{});
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "ab");
}

TEST(Protocol, EveryBadFieldIsA400NamingIt) {
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "temperature": "hot"})"), "temperature");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "temperature": 9})"), "temperature");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "n": 1.5})"), "n");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "stop": [1]})"), "stop");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "stop": [""]})"), "stop");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "stream_options": {"include_usage": true}})"), "stream_options");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": []})"), "messages");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": [{"content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param_of(R"({"model": 3, )" + kMsgs + "}"), "model");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "logprobs": 1})"), "logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "logprobs": true, "top_logprobs": 21})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "logprobs": true, "top_logprobs": -1})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "tools": [{"type": "function"}]})"), "tools[0].function");
  EXPECT_EQ(status_of(R"({"model": "m", )" + kMsgs + R"(, "temperature": 1e999})"), 400);
}

const std::string kTool =
    R"({"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}})";

TEST(Protocol, ToolsToolChoiceAndParallelCalls) {
  using text::tools::ChoiceMode;
  auto r = parse_chat(R"({"model": "m", )" + kMsgs + R"(, "tools": [)" + kTool + "]}", Limits{});
  ASSERT_EQ(r.tools.functions.size(), 1u);
  EXPECT_EQ(r.tools.functions[0].name, "add");
  EXPECT_EQ(r.tools.choice, ChoiceMode::automatic);
  EXPECT_TRUE(r.tools.parallel && r.tools.active());
  r = parse_chat(R"({"model": "m", )" + kMsgs + R"(, "tools": [)" + kTool +
                     R"(], "tool_choice": {"type": "function", "function": {"name": "add"}}, "parallel_tool_calls": false})",
                 Limits{});
  EXPECT_EQ(r.tools.choice, ChoiceMode::named);
  EXPECT_EQ(r.tools.named, "add");
  EXPECT_FALSE(r.tools.parallel);
  r = parse_chat(R"({"model": "m", )" + kMsgs + R"(, "tools": [)" + kTool + R"(], "tool_choice": "none"})", Limits{});
  EXPECT_FALSE(r.tools.active());
}

TEST(Protocol, EveryBadToolFieldIsA400NamingIt) {
  const std::string head = R"({"model": "m", )" + kMsgs + ", ";
  EXPECT_EQ(param_of(head + R"("tools": [{"type": "retrieval"}]})"), "tools[0].type");
  EXPECT_EQ(param_of(head + R"("tools": [)" + kTool + R"(], "tool_choice": {"type": "function", "function": {"name": "mul"}}})"),
            "tool_choice");
  EXPECT_EQ(param_of(head + R"("tools": [)" + kTool + R"(], "tool_choice": "always"})"), "tool_choice");
  EXPECT_EQ(param_of(head + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "(a"}}}]})"),
            "tools[0].function.parameters");
  EXPECT_EQ(param_of(head + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "uniqueItems": true}}}]})"),
            "tools[0].function.parameters");
  EXPECT_EQ(param_of(head + R"("tools": [{"type": "function", "function": {"name": "a b"}}]})"), "tools[0].function.name");
  EXPECT_EQ(param_of(head + R"("tools": [)" + kTool + "," + kTool + "]}"), "tools[1].function.name");
  EXPECT_EQ(param_of(head + R"("tools": [)" + kTool + R"(], "parallel_tool_calls": 1})"), "parallel_tool_calls");
  EXPECT_EQ(param_of(head + R"("tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(param_of(head + R"("tools": [)" + kTool + R"(], "logprobs": true})"), "logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": [{"role": "tool", "content": "4"}]})"), "messages[0].tool_call_id");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}]}]})"),
            "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": [{"role": "user", "tool_calls": []}]})"), "messages[0].tool_calls");
  EXPECT_EQ(status_of(R"({"model": "m", "prompt": "x", "tools": [])" + kTool + "]}", false), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "prompt": "x", "parallel_tool_calls": false})", false), 400);
}

TEST(Protocol, ToolTurnsAreKept) {
  const auto r = parse_chat(R"({"model": "m", "messages": [{"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "add", "arguments": "{\"a\": 2}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "4"}]})",
                            Limits{});
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_TRUE(r.messages[1]["content"].is_null());
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], "{\"a\": 2}");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
}

TEST(Protocol, LogprobsFieldsOfBothEndpoints) {
  auto chat = parse_chat(R"({"model": "m", )" + kMsgs + R"(, "logprobs": true, "top_logprobs": 20})", Limits{});
  EXPECT_TRUE(chat.gen.logprobs);
  EXPECT_EQ(chat.gen.top_logprobs, 20);
  chat = parse_chat(R"({"model": "m", )" + kMsgs + R"(, "logprobs": false})", Limits{});
  EXPECT_FALSE(chat.gen.logprobs);
  auto legacy = parse_completion(R"({"model": "m", "prompt": "a", "logprobs": 0})", Limits{});
  EXPECT_TRUE(legacy.gen.logprobs);
  EXPECT_EQ(legacy.gen.top_logprobs, 0);
  legacy = parse_completion(R"({"model": "m", "prompt": "a", "logprobs": 5})", Limits{});
  EXPECT_EQ(legacy.gen.top_logprobs, 5);
  EXPECT_FALSE(parse_completion(R"({"model": "m", "prompt": "a"})", Limits{}).gen.logprobs);
  auto param = [](const std::string& body) {
    try {
      parse_completion(body, Limits{});
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string();
  };
  EXPECT_EQ(param(R"({"model": "m", "prompt": "a", "logprobs": 6})"), "logprobs");
  EXPECT_EQ(param(R"({"model": "m", "prompt": "a", "logprobs": true})"), "logprobs");
  EXPECT_EQ(param(R"({"model": "m", "prompt": "a", "logprobs": 2, "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param(R"({"model": "m", "prompt": "a", "logprobs": 2, "echo": true})"), "echo");
}

TEST(Protocol, LogprobsJsonShapes) {
  // "\xe2\x82" is an incomplete character: U+FFFD in the token string, its raw bytes in 'bytes'.
  const std::vector<TokenReport> toks = {{"Hi", -0.5f, {{"Hi", -0.5f}, {"\xe2\x82", -1.5f}}, 0},
                                         {"\xe2\x82", -2.f, {}, 2}};
  const auto chat = chat_logprobs(toks);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "Hi");
  EXPECT_EQ(chat["content"][0]["bytes"], nlohmann::json({72, 105}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["bytes"], nlohmann::json({0xe2, 0x82}));
  EXPECT_EQ(chat["content"][1]["logprob"], -2.0);
  EXPECT_TRUE(chat["content"][1]["top_logprobs"].empty());
  const auto legacy = completion_logprobs(toks, 10);
  EXPECT_EQ(legacy["tokens"], nlohmann::json({"Hi", "\xEF\xBF\xBD"}));
  EXPECT_EQ(legacy["token_logprobs"], nlohmann::json({-0.5, -2.0}));
  EXPECT_EQ(legacy["text_offset"], nlohmann::json({10, 12}));
  EXPECT_EQ(legacy["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(legacy["top_logprobs"][1], nlohmann::json({{"\xEF\xBF\xBD", -2.0}}));  // the sampled token, always
}

TEST(Protocol, MalformedBodiesAre400s) {
  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of("[]"), 400);
  EXPECT_EQ(status_of(std::string(100000, '[')), 400);
  EXPECT_EQ(status_of("{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}"), 400);
  EXPECT_EQ(status_of(R"({"model": "m"})", false), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "prompt": ["a", "b"]})", false), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "prompt": "a"})", false), 200);
}

TEST(Protocol, LimitsOnMessagesAndStops) {
  Limits lim;
  lim.max_messages = 2;
  std::string body = R"({"model": "m", "messages": [)";
  for (int i = 0; i < 3; ++i) body += std::string(i ? "," : "") + R"({"role": "user", "content": "x"})";
  body += "]}";
  EXPECT_THROW(parse_chat(body, lim), ApiError);
}

}  // namespace
}  // namespace loom::serve

namespace loom::serve {
namespace {

TEST(Protocol, ResponseFormatCompilesItsGrammarOr400sNamingTheFeature) {
  const std::string head = R"({"model": "m", )" + kMsgs + R"(, "response_format": )";
  EXPECT_EQ(parse_chat(head + R"({"type": "text"}})", Limits{}).gen.grammar, nullptr);
  EXPECT_NE(parse_chat(head + R"({"type": "json_object"}})", Limits{}).gen.grammar, nullptr);
  const auto r = parse_completion(R"({"model": "m", "prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "n", "strict": true, "schema": {"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "string"}}, "required": ["b", "a"]}}}})", Limits{});
  ASSERT_NE(r.gen.grammar, nullptr);
  // The properties keep the order the body wrote them in (b before a), not a sorted one.
  text::constrain::Matcher in_order(r.gen.grammar->grammar), sorted(r.gen.grammar->grammar);
  EXPECT_TRUE(in_order.advance(R"({"b": 1, "a": "x"})") && in_order.accepting());
  EXPECT_FALSE(sorted.advance(R"({"a": "x", "b": 1})"));
  try {
    parse_chat(head + R"({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "string", "format": "hostname"}}}})",
               Limits{});
    ADD_FAILURE() << "an unsupported format was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "response_format");
    EXPECT_NE(std::string(e.what()).find("hostname"), std::string::npos) << e.what();
  }
  EXPECT_EQ(param_of(head + R"({"type": "json_schema"}})"), "response_format.json_schema");
  EXPECT_EQ(param_of(head + R"({"type": "yaml"}})"), "response_format");
}

}  // namespace
}  // namespace loom::serve
