#include "bench/stream_client.h"

#include <httplib.h>

#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace bench {
namespace {

using nlohmann::json;

double since(LoadClock::time_point t0) { return std::chrono::duration<double>(LoadClock::now() - t0).count(); }

std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "cannot connect (connection refused or host unreachable)";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Read: return "the connection broke while reading the reply";
    case httplib::Error::Write: return "the connection broke while sending the request";
    case httplib::Error::Canceled: return "cancelled";
    default: return "HTTP client error: " + httplib::to_string(e);
  }
}

// An OpenAI error body's message, else the body itself (shortened).
std::string error_message(const std::string& body) {
  try {
    const json j = json::parse(body);
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
      if (e.is_string()) return e.get<std::string>();
    }
  } catch (const std::exception&) {
  }
  return body.size() > 200 ? body.substr(0, 200) + "…" : body;
}

std::unique_ptr<httplib::Client> make_client(const ServerTarget& t, double read_timeout_s) {
  auto c = std::make_unique<httplib::Client>(t.base);
  const auto us = [](double s) { return std::chrono::microseconds(int64_t(std::max(s, 0.001) * 1e6)); };
  c->set_connection_timeout(us(t.connect_timeout_s));
  c->set_read_timeout(us(read_timeout_s));
  c->set_write_timeout(us(t.connect_timeout_s));
  c->set_keep_alive(false);
  if (!t.api_key.empty()) c->set_bearer_token_auth(t.api_key);
  return c;
}

}  // namespace

ReplyReader::ReplyReader(RequestTimeline& t, bool chat)
    : t_(t), chat_(chat), sse_([this](const std::string& d) { return event(d); }) {}

bool ReplyReader::bytes(std::string_view data, double now) {
  now_ = now;
  t_.last_byte = now;
  if (!t_.error.empty()) return false;
  if (!sse_.feed(data)) {
    if (t_.error.empty()) t_.error = sse_.error();
    return false;
  }
  return true;
}

bool ReplyReader::event(const std::string& data) {
  if (t_.done) {
    t_.error = "an event after data: [DONE]";
    return false;
  }
  if (data == "[DONE]") {
    t_.done = true;
    return true;
  }
  json j;
  try {
    j = json::parse(data);
  } catch (const std::exception&) {
    t_.error = "a stream event is not JSON: " + data.substr(0, 80);
    return false;
  }
  if (!j.is_object()) {
    t_.error = "a stream event is not a JSON object";
    return false;
  }
  if (j.contains("error")) {  // a server that fails mid-stream says so in an event
    t_.error = "the server reported an error mid-stream: " + error_message(data);
    return false;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      t_.usage_completion_tokens = u["completion_tokens"].get<int64_t>();
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      t_.usage_prompt_tokens = u["prompt_tokens"].get<int64_t>();
  }
  if (!j.contains("choices") || !j["choices"].is_array()) return true;
  bool content = false;
  for (const auto& c : j["choices"]) {
    if (!c.is_object()) continue;
    const json* text = nullptr;
    if (chat_) {
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content")) text = &c["delta"]["content"];
    } else if (c.contains("text")) {
      text = &c["text"];
    }
    if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) content = true;
  }
  if (content) {
    if (t_.first_content < 0) t_.first_content = now_;
    t_.content_times.push_back(now_);
  }
  return true;
}

void ReplyReader::end(double now) {
  if (t_.last_byte < 0) t_.last_byte = now;
  if (!t_.error.empty()) return;
  if (!t_.done)
    t_.error = sse_.finish() ? "the stream ended without data: [DONE]" : "the stream ended in the middle of an event";
  else if (t_.first_content < 0)
    t_.error = "the reply carried no generated text";
  t_.ok = t_.error.empty();
}

ServerTarget ServerTarget::parse_url(const std::string& url) {
  static const std::regex re(R"(^(https?)://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(:([0-9]{1,5}))?(/[^?#]*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    loom::fail("--url '{}': expected http://HOST[:PORT][/PATH], e.g. http://127.0.0.1:8080", url);
  ServerTarget t;
  if (m[4].matched && std::stoi(m[4].str()) > 65535) loom::fail("--url '{}': port {} is out of range", url, m[4].str());
  t.base = m[1].str() + "://" + m[2].str() + (m[3].matched ? m[3].str() : "");
  std::string path = m[5].matched ? m[5].str() : "";
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) path.resize(path.size() - 3);
  t.path_prefix = path;
  return t;
}

std::string request_body(const ServerTarget& target, const RequestSpec& r) {
  json b = {{"model", target.model},
            {"max_tokens", r.max_tokens},
            {"ignore_eos", true},
            {"temperature", 0},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  if (target.chat) b["messages"] = r.messages;
  else b["prompt"] = r.prompt;
  return b.dump();
}

RequestTimeline send_streaming(const ServerTarget& target, const RequestSpec& r, LoadClock::time_point t0,
                               LoadClock::time_point deadline) {
  RequestTimeline t;
  const double left = std::chrono::duration<double>(deadline - LoadClock::now()).count();
  auto cli = make_client(target, left);
  ReplyReader reader(t, target.chat);
  std::string error_body;
  bool cut = false;
  httplib::Request req;
  req.method = "POST";
  req.path = target.endpoint();
  req.body = request_body(target, r);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.response_handler = [&](const httplib::Response& res) {
    t.http_status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double now = since(t0);
    if (LoadClock::now() > deadline) {
      cut = true;
      return false;
    }
    if (t.http_status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min(n, 4096 - error_body.size()));
      return true;
    }
    return reader.bytes(std::string_view(data, n), now);
  };
  t.sent = since(t0);
  auto res = cli->send(req);
  const double now = since(t0);
  if (!res && LoadClock::now() >= deadline && !t.done) cut = true;  // a read that timed out at the deadline
  if (cut) {
    t.error = "cut off at the run's deadline";
    t.last_byte = now;
  } else if (t.http_status != 0 && t.http_status != 200) {
    t.error = fmt::format("HTTP {}: {}", t.http_status, error_message(error_body));
    t.last_byte = now;
  } else if (!res && res.error() != httplib::Error::Canceled && !t.done) {
    t.error = describe(res.error());
    t.last_byte = now;
  } else {
    reader.end(now);
  }
  return t;
}

std::string first_model(const ServerTarget& target) {
  auto cli = make_client(target, 30);
  auto res = cli->Get(target.path_prefix + "/v1/models");
  if (!res) loom::fail("{}: {}", target.base, describe(res.error()));
  if (res->status != 200)
    loom::fail("{}{}/v1/models answered HTTP {}: {}", target.base, target.path_prefix, res->status, error_message(res->body));
  try {
    const json j = json::parse(res->body);
    if (j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].contains("id") &&
        j["data"][0]["id"].is_string())
      return j["data"][0]["id"].get<std::string>();
  } catch (const std::exception&) {
  }
  loom::fail("{}{}/v1/models did not list a model (is this an OpenAI-compatible server?)", target.base, target.path_prefix);
}

}  // namespace bench
