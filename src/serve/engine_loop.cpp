#include "serve/engine_loop.h"

#include <cstdio>

namespace loom::serve {

bool RequestStream::next(runtime::Event& ev, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
  ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestStream::push(runtime::Event ev) {
  {
    std::lock_guard lk(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_one();
}

EngineLoop::EngineLoop(runtime::Engine& engine, Metrics& metrics)
    : engine_(engine), metrics_(metrics), thread_([this] { run(); }) {}

EngineLoop::~EngineLoop() {
  stop_ = true;
  thread_.join();
}

std::shared_ptr<RequestStream> EngineLoop::submit(runtime::Request r, std::string& refused) {
  auto stream = std::make_shared<RequestStream>();
  // Under the lock that routing takes: no event of this id can be routed before it is known.
  std::lock_guard lk(mu_);
  const runtime::Submitted s = engine_.submit(std::move(r));
  if (!s.ok()) {
    refused = s.refused;
    return nullptr;
  }
  stream->id = s.id;
  streams_[s.id] = stream;
  ++in_flight_;
  return stream;
}

void EngineLoop::cancel(runtime::RequestId id) { engine_.cancel(id); }

void EngineLoop::run() {
  const int64_t total = engine_.options().n_blocks;
  while (!stop_) {
    if (engine_.idle()) {
      engine_.wait_for_work(std::chrono::milliseconds(50));
      continue;
    }
    std::vector<runtime::Event> events;
    try {
      events = engine_.step();
    } catch (const std::exception& e) {
      // A failed step ends every request it touched; the server keeps serving the next ones.
      std::fprintf(stderr, "loom serve: engine step failed: %s\n", e.what());
      std::lock_guard lk(mu_);
      for (auto& [id, st] : streams_) {
        runtime::Event ev;
        ev.id = id;
        ev.finish = runtime::Finish::error;
        ev.error = e.what();
        st->push(std::move(ev));
        engine_.cancel(id);
        --in_flight_;
      }
      streams_.clear();
      continue;
    }
    {
      std::lock_guard lk(mu_);
      for (auto& ev : events) {
        auto it = streams_.find(ev.id);
        if (it == streams_.end()) continue;
        const bool done = ev.finish != runtime::Finish::none;
        auto st = it->second;
        if (done) {
          streams_.erase(it);
          --in_flight_;
          metrics_.speculation(ev.stats.drafted, ev.stats.draft_accepted, ev.stats.verify_steps);
        }
        st->push(std::move(ev));
      }
    }
    metrics_.engine({engine_.n_waiting(), engine_.n_running(), engine_.blocks_in_use(), engine_.blocks_cached(), total});
  }
}

}  // namespace loom::serve
