#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include <fmt/format.h>

#include "common/error.h"
#include "serve/stop_matcher.h"
#include "serve/ui/chat_page.h"

namespace loom::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Generated text is whole UTF-8, but a detokenized id list need not be: invalid bytes become
// U+FFFD rather than an exception.
std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump_json(e.body()), "application/json");
}

std::string finish_reason(runtime::Finish f) { return f == runtime::Finish::length ? "length" : "stop"; }

std::string make_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}-{:x}{:06x}", prefix, uint64_t(std::time(nullptr)), ++counter);
}

}  // namespace

// One HTTP generation request: its n engine requests and what they produced. Destroyed when the
// response ends, however it ends; sequences still running then (client gone, timeout) are
// cancelled, so their KV goes back at the next step.
struct Server::Job {
  Server& srv;
  bool chat = false, stream = false, include_usage = false;
  std::string id, model;
  int64_t created = 0;
  Clock::time_point start = Clock::now(), deadline;
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<StopMatcher> stops;
  std::vector<Choice> choices;
  std::vector<bool> done, started;
  std::vector<int64_t> generated;
  std::string echo;
  int64_t prompt_tokens = 0, reused = 0;
  double ttft = -1;
  std::string error;

  explicit Job(Server& s) : srv(s) {}
  ~Job() {
    for (size_t i = 0; i < streams.size(); ++i)
      if (!done[i]) {
        srv.loop_->cancel(streams[i]->id);
        srv.metrics_.cancelled();
      }
  }
  bool finished() const { return std::all_of(done.begin(), done.end(), [](bool d) { return d; }); }
  Usage usage() const {
    int64_t g = 0;
    for (auto n : generated) g += n;
    return {prompt_tokens, g, reused};
  }

  // Moves every stream on by the events already waiting, after waiting up to `wait` for the
  // first one; calls emit(i, text, finish_reason or nullptr) for what may be sent. Only the first
  // wait may block: a stream that keeps producing must not keep the caller from its writes (a
  // failed write is how a client that left is noticed).
  template <typename Emit>
  void pump(std::chrono::milliseconds wait, Emit&& emit) {
    runtime::Event ev;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (done[i]) continue;
      while (streams[i]->next(ev, wait)) {
        wait = std::chrono::milliseconds(0);
        if (ev.token >= 0) {
          ++generated[i];
          if (ttft < 0) ttft = seconds_since(start);
        }
        std::string text = stops[i].push(ev.text);
        const bool by_stop = stops[i].stopped();
        if (ev.finish == runtime::Finish::error) error = ev.error;
        if (by_stop || ev.finish != runtime::Finish::none) {
          if (!by_stop) text += stops[i].flush();
          else srv.loop_->cancel(streams[i]->id);  // a stop sequence: the engine need not go on
          if (ev.stats.prompt_tokens && i == 0) reused = ev.stats.reused_tokens;
          choices[i].text += text;
          choices[i].finish_reason = by_stop ? "stop" : finish_reason(ev.finish);
          done[i] = true;
          emit(i, text, &choices[i].finish_reason);
          break;
        }
        choices[i].text += text;
        if (!text.empty()) emit(i, text, nullptr);
      }
      wait = std::chrono::milliseconds(0);
    }
    if ((Clock::now() > deadline || srv.expired_) && !finished()) {
      error = srv.expired_ ? "the server shut down before the request finished"
                           : "the request took longer than the server's timeout";
      for (size_t i = 0; i < streams.size(); ++i)
        if (!done[i]) {
          srv.loop_->cancel(streams[i]->id);
          done[i] = true;
          srv.metrics_.cancelled();
        }
    }
  }

  void record() const {
    const double e2e = seconds_since(start);
    int64_t g = 0;
    for (auto n : generated) g += n;
    srv.metrics_.tokens(prompt_tokens, g, reused);
    srv.metrics_.latency(ttft < 0 ? e2e : ttft, g > 1 ? (e2e - ttft) / double(g - 1) : -1, e2e);
  }
};

Server::Server(const runtime::ModelBundle& bundle, runtime::Engine& engine, ServerOptions opts)
    : bundle_(bundle), engine_(engine), opts_(std::move(opts)), http_(std::make_unique<httplib::Server>()) {
  loop_ = std::make_unique<EngineLoop>(engine_, metrics_);
  install_routes();
}

Server::~Server() {
  stop();
  http_.reset();  // joins the HTTP workers (their jobs cancel what still runs) before the loop
  loop_.reset();
}

bool Server::authorized(const std::string& header) const {
  const std::string want = "Bearer " + opts_.api_key;
  // Constant time in the key's content: every byte is compared whatever differs first.
  unsigned char diff = header.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= (i < header.size() ? header[i] : 0) ^ want[i];
  return diff == 0;
}

void Server::install_routes() {
  auto& s = *http_;
  const int64_t workers = opts_.max_queue + 16;
  s.new_task_queue = [workers] { return new httplib::ThreadPool(size_t(workers)); };
  s.set_payload_max_length(opts_.max_body_bytes);
  s.set_read_timeout(opts_.io_timeout_s, 0);
  s.set_write_timeout(opts_.io_timeout_s, 0);
  s.set_keep_alive_timeout(std::min(opts_.io_timeout_s, 5));

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (guarded && !opts_.api_key.empty() && !authorized(req.get_header_value("Authorization"))) {
      send_error(res, ApiError(401, "missing or wrong API key (Authorization: Bearer KEY)", "authentication_error"));
      metrics_.request(req.path, 401);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404 ? fmt::format("no route {} {}", req.method, req.path)
                             : res.status == 413 ? "request body too large"
                                                 : fmt::format("HTTP {}", res.status);
    res.set_content(dump_json(ApiError(res.status, what).body()), "application/json");
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, what, "server_error"));
  });

  // The chat page: open even with --api-key (its /v1 calls carry the key typed into it). The
  // CSP keeps it to its own inline code and this origin's API.
  s.Get(R"(/|/index\.html)", [this](const httplib::Request& req, httplib::Response& res) {
    const auto page = chat_page_html();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    metrics_.request(req.path, 200);
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) return send_error(res, ApiError(503, "shutting down", "server_error"));
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json m = {{"object", "list"},
                    {"data", {{{"id", opts_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "loom"}}}}};
    res.set_content(dump_json(m), "application/json");
    metrics_.request("/v1/models", 200);
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json o = parse_body(req.body);
      if (!o.contains("content") || !o["content"].is_string()) throw ApiError(400, "'content': must be a string", "invalid_request_error", "content");
      const bool add_special = o.value("add_special", false);
      res.set_content(dump_json(json{{"tokens", bundle_.encode(o["content"].get<std::string>(), add_special, true)}}),
                      "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
    metrics_.request("/tokenize", res.status);
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const json o = parse_body(req.body);
      if (!o.contains("tokens") || !o["tokens"].is_array()) throw ApiError(400, "'tokens': must be an array of token ids", "invalid_request_error", "tokens");
      const auto& tok = bundle_.tokenizer();
      std::string text;
      for (const auto& t : o["tokens"]) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= int64_t(tok.vocab().size()))
          throw ApiError(400, "'tokens': every id must be an integer in the vocabulary", "invalid_request_error", "tokens");
        text += tok.token_to_piece(int32_t(t.get<int64_t>()), false);
      }
      res.set_content(dump_json(json{{"content", text}}), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    }
    metrics_.request("/detokenize", res.status);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req.body, true, &res);
    metrics_.request("/v1/chat/completions", res.status);
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req.body, false, &res);
    metrics_.request("/v1/completions", res.status);
  });
}

void Server::generate(const std::string& body, bool chat, void* res_ptr) {
  auto& res = *static_cast<httplib::Response*>(res_ptr);
  auto job = std::make_shared<Job>(*this);
  try {
    if (draining_) throw ApiError(503, "the server is shutting down", "server_error");
    Generation gen;
    std::vector<int32_t> prompt;
    if (chat) {
      auto r = parse_chat(body, opts_.limits);
      gen = r.gen;
      try {
        prompt = bundle_.encode_chat(r.messages);
      } catch (const loom::Error& e) {
        throw ApiError(400, fmt::format("the chat template could not render these messages: {}", e.what()),
                       "invalid_request_error", "messages");
      }
    } else {
      auto r = parse_completion(body, opts_.limits);
      gen = r.gen;
      prompt = bundle_.encode(r.prompt, true, true);
      if (r.echo) job->echo = r.prompt;
    }
    if (gen.model != opts_.model_name)
      throw ApiError(404, fmt::format("model '{}' does not exist (this server serves '{}')", gen.model, opts_.model_name),
                     "invalid_request_error", "model", "model_not_found");
    if (prompt.empty()) throw ApiError(400, "the prompt is empty", "invalid_request_error", chat ? "messages" : "prompt");
    if (loop_->in_flight() + gen.n > opts_.max_queue) {
      res.set_header("Retry-After", "1");
      throw ApiError(429, fmt::format("the server is at its limit of {} requests in flight", opts_.max_queue),
                     "rate_limit_error");
    }
    job->chat = chat;
    job->stream = gen.stream;
    job->include_usage = gen.include_usage;
    job->id = make_id(chat ? "chatcmpl" : "cmpl");
    job->model = opts_.model_name;
    job->created = int64_t(std::time(nullptr));
    job->deadline = job->start + std::chrono::milliseconds(int64_t(opts_.request_timeout_s * 1000));
    job->prompt_tokens = int64_t(prompt.size());
    for (int i = 0; i < gen.n; ++i) {
      runtime::Request r;
      r.prompt = prompt;
      r.sampling = gen.sampling;
      r.sampling.seed = gen.sampling.seed + uint64_t(i);
      r.max_tokens = gen.max_tokens;
      r.ignore_eog = gen.ignore_eos;
      std::string refused;
      auto st = loop_->submit(std::move(r), refused);
      if (!st) throw ApiError(400, refused, "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
      job->streams.push_back(st);
      job->stops.emplace_back(gen.stop);
      job->choices.push_back({job->echo, ""});
      job->done.push_back(false);
      job->started.push_back(false);
      job->generated.push_back(0);
    }
  } catch (const ApiError& e) {
    return send_error(res, e);
  }

  if (!job->stream) {
    // Chunked, so a client that leaves is noticed: a space (valid before JSON) goes out every
    // second while the reply is not ready, and a failed write ends the job.
    res.set_chunked_content_provider("application/json", [job](size_t, httplib::DataSink& sink) {
      auto last = Clock::now();
      while (!job->finished()) {
        job->pump(std::chrono::milliseconds(50), [](size_t, const std::string&, const std::string*) {});
        if (seconds_since(last) > 1) {
          if (!sink.write(" ", 1)) return false;
          last = Clock::now();
        }
      }
      job->record();
      json out = job->error.empty()
                     ? (job->chat ? chat_response(job->id, job->model, job->created, job->choices, job->usage())
                                  : completion_response(job->id, job->model, job->created, job->choices, job->usage()))
                     : ApiError(500, job->error, "server_error").body();
      const std::string s = dump_json(out);
      sink.write(s.data(), s.size());
      sink.done();
      return true;
    });
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [job](size_t, httplib::DataSink& sink) {
    auto send = [&](const json& j) {
      const std::string s = "data: " + dump_json(j) + "\n\n";
      return sink.write(s.data(), s.size());
    };
    bool ok = true;
    const std::string role = "assistant";
    if (job->chat)
      for (size_t i = 0; i < job->streams.size() && ok; ++i)
        ok = send(chat_chunk(job->id, job->model, job->created, int(i), &role, "", nullptr));
    if (!job->chat && !job->echo.empty())
      for (size_t i = 0; i < job->streams.size() && ok; ++i)
        ok = send(completion_chunk(job->id, job->model, job->created, int(i), job->echo, nullptr));
    auto last = Clock::now();
    while (ok && !job->finished()) {
      job->pump(std::chrono::milliseconds(50), [&](size_t i, const std::string& text, const std::string* fin) {
        if (!ok) return;
        if (!text.empty())
          ok = send(job->chat ? chat_chunk(job->id, job->model, job->created, int(i), nullptr, text, nullptr)
                              : completion_chunk(job->id, job->model, job->created, int(i), text, nullptr));
        if (ok && fin)
          ok = send(job->chat ? chat_chunk(job->id, job->model, job->created, int(i), nullptr, "", fin)
                              : completion_chunk(job->id, job->model, job->created, int(i), "", fin));
        last = Clock::now();
      });
      if (ok && seconds_since(last) > 1) {  // an SSE comment: notices a client that left
        ok = sink.write(": keep-alive\n\n", 14);
        last = Clock::now();
      }
    }
    if (!ok) return false;  // the client is gone: ~Job cancels what still runs
    job->record();
    if (!job->error.empty()) send(ApiError(500, job->error, "server_error").body());
    if (job->include_usage)
      send(usage_chunk(job->id, job->chat ? "chat.completion.chunk" : "text_completion", job->model, job->created,
                       job->usage()));
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    return true;
  });
}

bool Server::listen() {
  if (opts_.port == 0) {
    const int p = http_->bind_to_any_port(opts_.host);
    if (p <= 0) return false;
    bound_port_ = p;
  } else {
    if (!http_->bind_to_port(opts_.host, opts_.port)) return false;
    bound_port_ = opts_.port;
  }
  std::fprintf(stderr, "loom serve: listening on http://%s:%d (model \"%s\")\n", opts_.host.c_str(), bound_port_.load(),
               opts_.model_name.c_str());
  return http_->listen_after_bind();
}

int Server::port() const { return bound_port_; }

void Server::drain(double deadline_s) {
  draining_ = true;
  const auto end = Clock::now() + std::chrono::milliseconds(int64_t(deadline_s * 1000));
  while (loop_->in_flight() > 0 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (loop_->in_flight() > 0) {
    // Past the deadline: every job ends on its next pump, its stream with an error chunk and
    // [DONE]; give the handlers a moment to write them.
    std::fprintf(stderr, "loom serve: %lld requests still running at the drain deadline; cancelling them\n",
                 (long long)loop_->in_flight());
    expired_ = true;
    const auto grace = Clock::now() + std::chrono::seconds(2);
    while (loop_->in_flight() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Server::stop() {
  if (http_ && http_->is_running()) http_->stop();
}

}  // namespace loom::serve
