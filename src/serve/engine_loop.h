// The thread that drives a runtime::Engine for the server: HTTP handler threads submit requests
// and read their events from a RequestStream; the loop steps the engine whenever there is work,
// hands each step's events to their streams and refreshes the engine gauges in the metrics.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/engine.h"
#include "serve/metrics.h"

namespace loom::serve {

// Events of one request, in order, from the engine thread to one HTTP handler thread.
class RequestStream {
 public:
  // Waits up to `timeout` for the next event; false when none came.
  bool next(runtime::Event& ev, std::chrono::milliseconds timeout);
  void push(runtime::Event ev);
  runtime::RequestId id = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<runtime::Event> events_;
};

class EngineLoop {
 public:
  EngineLoop(runtime::Engine& engine, Metrics& metrics);
  ~EngineLoop();  // stops the thread; requests still running are left to the engine's destructor

  // Any thread. nullptr and `refused` set when the engine can never run the request.
  std::shared_ptr<RequestStream> submit(runtime::Request r, std::string& refused);
  void cancel(runtime::RequestId id);
  // Requests submitted and not yet finished.
  int64_t in_flight() const { return in_flight_.load(); }

 private:
  void run();
  runtime::Engine& engine_;
  Metrics& metrics_;
  std::mutex mu_;
  std::map<runtime::RequestId, std::shared_ptr<RequestStream>> streams_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::serve
