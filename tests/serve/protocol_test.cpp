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
  EXPECT_EQ(r.messages[0].content, "hi");
}

TEST(Protocol, TextPartsAreJoinedAndDeveloperIsSystem) {
  const auto r = parse_chat(R"({"model": "m", "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},
                                {"type": "text", "text": "b"}]}]})",
                            Limits{});
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "ab");
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
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "logprobs": true})"), "logprobs");
  EXPECT_EQ(param_of(R"({"model": "m", )" + kMsgs + R"(, "tools": [{"type": "function"}]})"), "tools");
  EXPECT_EQ(status_of(R"({"model": "m", )" + kMsgs + R"(, "temperature": 1e999})"), 400);
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
