// The load generator's client: one streamed OpenAI request (`/v1/chat/completions` or
// `/v1/completions`, `stream: true`, `stream_options.include_usage`) over cpp-httplib, timed
// as the client sees it. It speaks only the OpenAI API, so it measures any compatible server.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/request_set.h"
#include "bench/sse.h"

namespace bench {

using LoadClock = std::chrono::steady_clock;

// One request as the client saw it; times in seconds on the run's clock.
struct RequestTimeline {
  bool ok = false;
  std::string error;                 // why it failed (empty when ok)
  int http_status = 0;
  double sent = 0;                   // the request is sent
  double first_content = -1;         // the first chunk carrying generated text
  double last_byte = -1;             // the reply's last byte
  std::vector<double> content_times; // every chunk that carried generated text
  int64_t usage_completion_tokens = -1, usage_prompt_tokens = -1;  // -1: the server sent no usage
  bool done = false;                 // data: [DONE] arrived
};

// Reads one reply's body into its timeline: the SSE events, their JSON, content, usage and
// errors. No network here, so the tests can feed it any split of any bytes.
class ReplyReader {
 public:
  ReplyReader(RequestTimeline& t, bool chat);
  // The next body bytes, arrived at `now`. False once the reply is known to have failed.
  bool bytes(std::string_view data, double now);
  // The body ended (connection closed or response complete): decides ok / error.
  void end(double now);

 private:
  bool event(const std::string& data);

  RequestTimeline& t_;
  bool chat_;
  double now_ = 0;
  SseParser sse_;
};

struct ServerTarget {
  std::string base;        // scheme://host:port, what httplib::Client takes
  std::string path_prefix; // anything after it ("" or e.g. "/proxy"), before /v1/...
  std::string api_key;     // sent as Authorization: Bearer when set
  std::string model;       // the request's "model"
  bool chat = true;        // /v1/chat/completions, else /v1/completions
  double connect_timeout_s = 10;
  static ServerTarget parse_url(const std::string& url);  // http(s)://host[:port][/prefix][/v1]; loom::Error
  std::string endpoint() const { return path_prefix + (chat ? "/v1/chat/completions" : "/v1/completions"); }
};

// The JSON body sent for a request: temperature 0, max_tokens with ignore_eos (both Loom and
// llama-server honour it), streamed with usage.
std::string request_body(const ServerTarget& target, const RequestSpec& r);

// Sends one request and reads the streamed reply. `t0` is the run's clock origin; the reply is
// cut (an error: "cut off at the run's deadline") when `deadline` passes.
RequestTimeline send_streaming(const ServerTarget& target, const RequestSpec& r, LoadClock::time_point t0,
                               LoadClock::time_point deadline);

// GET /v1/models: the first model's id. A loom::Error saying why when the server cannot be
// reached or does not answer like an OpenAI server (the check before a run).
std::string first_model(const ServerTarget& target);

}  // namespace bench
