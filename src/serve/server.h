// `loom serve`: an OpenAI-compatible HTTP server on one runtime::Engine (continuous batching,
// paged KV with prefix sharing) — /v1/chat/completions, /v1/completions (streamed as SSE or
// not), /v1/models, /tokenize, /detokenize, /health, /metrics.
//
// Safety: bodies over max_body_bytes get 413; more requests in flight than max_queue get 429
// with Retry-After; a request past request_timeout is cancelled; slow or idle connections are
// closed by the read/write timeouts; with an API key, /v1/*, /tokenize and /detokenize need
// `Authorization: Bearer KEY` (compared in constant time; 401 otherwise). A client that goes
// away has its sequences cancelled (their KV freed) at the next step. drain() (SIGTERM) makes
// new requests 503, lets running ones finish until the deadline, cancels the rest (their
// streams end with a final error chunk) and stops.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "runtime/model_bundle.h"
#include "serve/engine_loop.h"
#include "serve/metrics.h"
#include "serve/protocol.h"

namespace httplib {
class Server;
}

namespace loom::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;           // what /v1/models lists and requests must name
  std::string api_key;              // empty: no authentication
  int64_t max_queue = 64;           // requests in flight (running + waiting) before 429
  size_t max_body_bytes = 8 << 20;
  double request_timeout_s = 600;
  int io_timeout_s = 30;            // read/write/keep-alive timeouts of a connection
  Limits limits;
  // Speculative decoding for requests that do not say (their 'speculation' field picks "none",
  // "lookup" or "draft": this source); no source: off unless a request asks for lookup.
  runtime::spec::Speculation speculation;
};

class Server {
 public:
  Server(const runtime::ModelBundle& bundle, runtime::Engine& engine, ServerOptions opts);
  ~Server();
  // Binds and serves until stop(); returns false when the address cannot be bound.
  bool listen();
  int port() const;  // the bound port (opts.port 0 picks one)
  void drain(double deadline_s);
  void stop();

 private:
  struct Job;
  void install_routes();
  void generate(const std::string& body, bool chat, void* res);
  bool authorized(const std::string& header) const;

  runtime::spec::Speculation speculation_for(const Generation& gen) const;

  const runtime::ModelBundle& bundle_;
  runtime::Engine& engine_;
  ServerOptions opts_;
  Metrics metrics_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> expired_{false};  // the drain deadline passed: running jobs end now
  std::atomic<int> bound_port_{0};
  int listen_socket_ = -1;  // the listening socket, to widen its accept backlog (listen())
};

}  // namespace loom::serve
