// The event-stream parser and the reply reader on hostile and partial input: every split of a
// stream gives the same events, CR/LF/CRLF line ends (a CRLF cut between reads included), comments,
// BOM, multi-line data, an over-long line; and the reader's verdicts on broken replies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/sse.h"
#include "bench/stream_client.h"

namespace {

std::vector<std::string> parse_in_pieces(const std::string& stream, const std::vector<size_t>& cuts) {
  std::vector<std::string> events;
  bench::SseParser p([&](const std::string& d) {
    events.push_back(d);
    return true;
  });
  size_t at = 0;
  for (size_t cut : cuts) {
    EXPECT_TRUE(p.feed(std::string_view(stream).substr(at, cut - at)));
    at = cut;
  }
  EXPECT_TRUE(p.feed(std::string_view(stream).substr(at)));
  return events;
}

const std::string kStream =
    "\xEF\xBB\xBF"
    ": keep-alive\r\n\r\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\nid: 7\r\ndata:{\"b\":2}\r\n\r\n"
    "data: line one\ndata: line two\n\n"
    "retry: 100\n\n"
    "data\n\n"
    "data: x\r\rdata: [DONE]\n\n";
const std::vector<std::string> kEvents = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "", "x", "[DONE]"};

TEST(SseParser, WholeStream) { EXPECT_EQ(parse_in_pieces(kStream, {}), kEvents); }

TEST(SseParser, EverySplitIntoTwoAndThreePiecesGivesTheSameEvents) {
  for (size_t i = 0; i <= kStream.size(); ++i) {
    ASSERT_EQ(parse_in_pieces(kStream, {i}), kEvents) << "cut at " << i;
    for (size_t j = i; j <= kStream.size(); j += 3) ASSERT_EQ(parse_in_pieces(kStream, {i, j}), kEvents) << i << "," << j;
  }
}

TEST(SseParser, ByteAtATime) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < kStream.size(); ++i) cuts.push_back(i);
  EXPECT_EQ(parse_in_pieces(kStream, cuts), kEvents);
}

TEST(SseParser, UnterminatedEventIsNotDispatchedAndFinishSaysSo) {
  std::vector<std::string> events;
  bench::SseParser p([&](const std::string& d) {
    events.push_back(d);
    return true;
  });
  EXPECT_TRUE(p.feed("data: {\"a\":1}\n\ndata: {\"half"));
  EXPECT_EQ(events, std::vector<std::string>{"{\"a\":1}"});
  EXPECT_FALSE(p.finish());
  EXPECT_TRUE(p.feed("\"}\n"));
  EXPECT_FALSE(p.finish());  // the data line ended, the event did not
  EXPECT_TRUE(p.feed("\n"));
  EXPECT_TRUE(p.finish());
  EXPECT_EQ(events.size(), 2u);
}

TEST(SseParser, OverlongLineIsAnErrorNotUnboundedGrowth) {
  bench::SseParser p([](const std::string&) { return true; }, 64);
  EXPECT_TRUE(p.feed("data: short\n\n"));
  EXPECT_FALSE(p.feed(std::string(100, 'x')));
  EXPECT_NE(p.error().find("longer than 64"), std::string::npos);
  EXPECT_FALSE(p.feed("\n\n"));  // stays failed
  bench::SseParser q([](const std::string&) { return true; }, 64);
  std::string many;  // many short data lines of one event add up too
  for (int i = 0; i < 20; ++i) many += "data: 0123456789\n";
  EXPECT_FALSE(q.feed(many));
}

TEST(SseParser, HandlerCanStop) {
  int n = 0;
  bench::SseParser p([&](const std::string&) { return ++n < 2; });
  EXPECT_FALSE(p.feed("data: 1\n\ndata: 2\n\ndata: 3\n\n"));
  EXPECT_EQ(n, 2);
}

// A chat reply read from bytes that arrive at given times.
struct Fed {
  bench::RequestTimeline t;
};

Fed read_reply(const std::vector<std::pair<double, std::string>>& pieces, bool chat = true) {
  Fed f;
  bench::ReplyReader r(f.t, chat);
  double last = 0;
  for (const auto& [at, bytes] : pieces) {
    last = at;
    if (!r.bytes(bytes, at)) break;
  }
  r.end(last);
  return f;
}

std::string chunk(const std::string& content) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"}}]}\n\n";
}

TEST(ReplyReader, TimesContentChunksAndTakesUsage) {
  const std::string role = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
  const std::string usage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n";
  // The role chunk is not content; the second piece carries two chunks and half of a third.
  const auto c2 = chunk(" b"), c3 = chunk(" c");
  auto f = read_reply({{0.10, role},
                       {0.25, chunk("a")},
                       {0.40, c2 + c3.substr(0, 9)},
                       {0.55, c3.substr(9) + ": keep-alive\n\n"},
                       {0.60, usage + "data: [DONE]\n\n"}});
  EXPECT_TRUE(f.t.ok) << f.t.error;
  EXPECT_EQ(f.t.content_times, (std::vector<double>{0.25, 0.40, 0.55}));
  EXPECT_DOUBLE_EQ(f.t.first_content, 0.25);
  EXPECT_DOUBLE_EQ(f.t.last_byte, 0.60);
  EXPECT_EQ(f.t.usage_completion_tokens, 3);
  EXPECT_EQ(f.t.usage_prompt_tokens, 12);
}

TEST(ReplyReader, CompletionsContentIsChoiceText) {
  auto f = read_reply({{0.1, "data: {\"choices\":[{\"text\":\"hi\",\"index\":0}]}\n\n"},
                       {0.2, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n"}},
                      false);
  EXPECT_TRUE(f.t.ok);
  EXPECT_EQ(f.t.content_times, std::vector<double>{0.1});
  EXPECT_EQ(f.t.usage_completion_tokens, -1);  // no usage sent: the caller counts chunks
}

TEST(ReplyReader, BrokenRepliesFailWithTheirReason) {
  auto no_done = read_reply({{0.1, chunk("a")}});
  EXPECT_FALSE(no_done.t.ok);
  EXPECT_NE(no_done.t.error.find("without data: [DONE]"), std::string::npos);

  auto half = read_reply({{0.1, chunk("a") + "data: {\"cho"}});
  EXPECT_FALSE(half.t.ok);
  EXPECT_NE(half.t.error.find("middle of an event"), std::string::npos);

  auto mid_error = read_reply({{0.1, chunk("a")},
                               {0.2, "data: {\"error\":{\"message\":\"the server shut down\",\"type\":\"server_error\"}}\n\n"},
                               {0.3, "data: [DONE]\n\n"}});
  EXPECT_FALSE(mid_error.t.ok);
  EXPECT_NE(mid_error.t.error.find("the server shut down"), std::string::npos);

  auto not_json = read_reply({{0.1, "data: {oops\n\ndata: [DONE]\n\n"}});
  EXPECT_FALSE(not_json.t.ok);
  EXPECT_NE(not_json.t.error.find("not JSON"), std::string::npos);

  auto empty = read_reply({{0.1, "data: [DONE]\n\n"}});
  EXPECT_FALSE(empty.t.ok);
  EXPECT_NE(empty.t.error.find("no generated text"), std::string::npos);

  auto after_done = read_reply({{0.1, chunk("a") + "data: [DONE]\n\n" + chunk("b")}});
  EXPECT_FALSE(after_done.t.ok);

  // Wrong types where content and usage go are not content and not usage, and not a crash.
  auto odd = read_reply({{0.1, "data: {\"choices\":[{\"delta\":{\"content\":5}},7,null],\"usage\":{\"completion_tokens\":\"x\"}}\n\n"
                               "data: [1,2]\n\n"}});
  EXPECT_FALSE(odd.t.ok);
  EXPECT_EQ(odd.t.usage_completion_tokens, -1);
  EXPECT_TRUE(odd.t.content_times.empty());
}

TEST(ServerTarget, ParsesUrls) {
  auto t = bench::ServerTarget::parse_url("http://127.0.0.1:8080");
  EXPECT_EQ(t.base, "http://127.0.0.1:8080");
  EXPECT_EQ(t.endpoint(), "/v1/chat/completions");
  t = bench::ServerTarget::parse_url("http://localhost:9000/proxy/v1/");
  EXPECT_EQ(t.base, "http://localhost:9000");
  t.chat = false;
  EXPECT_EQ(t.endpoint(), "/proxy/v1/completions");
  for (const char* bad : {"127.0.0.1:8080", "ftp://x", "http://", "http://host:99999", "http://a b", "http://h:80?q=1"})
    EXPECT_ANY_THROW(bench::ServerTarget::parse_url(bad)) << bad;
}

}  // namespace
