#include "bench/load_run.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

namespace bench {
namespace {

// Sends `requests` closed-loop from `clients` threads; slot i of the result is set when
// request i was sent.
std::vector<std::optional<RequestTimeline>> closed_loop(const LoadPlan& p, const std::vector<RequestSpec>& requests,
                                                        int clients, const char* phase,
                                                        LoadClock::time_point deadline) {
  std::vector<std::optional<RequestTimeline>> out(requests.size());
  std::atomic<size_t> next{0}, finished{0};
  std::mutex progress_mu;
  const auto t0 = LoadClock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < std::max(1, clients); ++c)
    threads.emplace_back([&] {
      for (;;) {
        const size_t i = next++;
        if (i >= requests.size() || LoadClock::now() >= deadline) return;
        out[i] = send_streaming(p.target, requests[i], t0, deadline);
        const size_t f = ++finished;
        if (p.progress) {
          std::lock_guard<std::mutex> lock(progress_mu);
          p.progress(phase, f, requests.size());
        }
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// Sends request i at t0 + times[i] on its own thread, whatever is still running.
std::vector<std::optional<RequestTimeline>> open_loop(const LoadPlan& p, const std::vector<double>& times,
                                                      LoadClock::time_point deadline) {
  std::vector<std::optional<RequestTimeline>> out(p.requests.size());
  std::atomic<size_t> finished{0};
  std::mutex progress_mu;
  const auto t0 = LoadClock::now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < p.requests.size(); ++i) {
    const auto at = t0 + std::chrono::duration_cast<LoadClock::duration>(std::chrono::duration<double>(times[i]));
    if (at >= deadline) break;
    std::this_thread::sleep_until(at);
    threads.emplace_back([&, i] {
      out[i] = send_streaming(p.target, p.requests[i], t0, deadline);
      const size_t f = ++finished;
      if (p.progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        p.progress("measured", f, p.requests.size());
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

LoadResult run_load(const LoadPlan& plan) {
  const auto deadline =
      LoadClock::now() + std::chrono::duration_cast<LoadClock::duration>(std::chrono::duration<double>(plan.deadline_s));
  LoadResult r;
  if (!plan.warmup.empty()) {
    for (const auto& t : closed_loop(plan, plan.warmup, plan.warmup_concurrency, "warm-up", deadline)) {
      if (!t) continue;
      ++r.warmup_sent;
      if (!t->ok && r.warmup_failed++ == 0) r.warmup_error = t->error;
    }
  }
  std::vector<std::optional<RequestTimeline>> measured;
  if (plan.arrivals.kind == Arrivals::Kind::closed_loop)
    measured = closed_loop(plan, plan.requests, plan.arrivals.concurrency, "measured", deadline);
  else
    measured = open_loop(plan, poisson_send_times(plan.requests.size(), plan.arrivals.rate, plan.arrivals.seed), deadline);
  for (auto& t : measured) {
    if (t) r.timelines.push_back(std::move(*t));
    else ++r.not_sent;
  }
  return r;
}

}  // namespace bench
