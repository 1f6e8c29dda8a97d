// A low-latency persistent pool for the fast CPU backend. A decode step of a 30-layer model
// is a few hundred short parallel sections, so a condvar wake-up (~5-10 µs) per section would
// cost milliseconds per token: workers spin on an atomic generation counter for a while after
// each section and only then sleep (C++20 atomic wait, a futex on Linux). The calling thread
// is thread 0 and always takes part.
//
// Joining a section is optional: a worker joins only while the section is open, and the
// caller closes it once it has run out of work itself. On a machine shared with other
// processes a descheduled worker therefore never stalls a step; the caller takes its share
// instead of waiting a scheduler time slice for it.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::backend::cpu::fast {

class SpinPool {
 public:
  // threads <= 0: hardware concurrency.
  explicit SpinPool(int threads);
  ~SpinPool();
  SpinPool(const SpinPool&) = delete;
  SpinPool& operator=(const SpinPool&) = delete;

  int size() const { return n_threads_; }

  // How long a worker keeps spinning after a section before it sleeps. Long enough to bridge
  // the single-threaded gaps of a decode step (sampling, small ops on the caller), short
  // enough that an idle session stops burning a core quickly. Whoever times two engines one
  // after the other waits this out between them (bench/paired.cpp).
  static constexpr std::chrono::microseconds kSpinFor{2000};

  // fn(i, thread) once for every i in [0, n), handed out one index at a time from a shared
  // counter, so a thread slowed by another process on its core takes fewer indices. The first
  // exception thrown is rethrown here after every thread that joined has left.
  template <typename F>
  void for_each(int64_t n, F&& fn) {
    if (n <= 0) return;
    if (n == 1 || n_threads_ == 1) {
      for (int64_t i = 0; i < n; ++i) fn(i, 0);
      return;
    }
    next_.store(0, std::memory_order_relaxed);
    run([&](int t) {
      for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i, t);
    });
  }

 private:
  // fn(thread) on the caller and on every worker that joins before the caller closes.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased([](void* obj, int t) { (*static_cast<Fn*>(obj))(t); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }
  using Call = void (*)(void*, int);
  void run_erased(Call call, void* obj);
  void worker(int index);
  void run_task(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  alignas(64) std::atomic<uint64_t> generation_{0};
  // (section id << 32) | closed bit | workers inside the section
  alignas(64) std::atomic<uint64_t> section_{0};
  alignas(64) std::atomic<int64_t> next_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  Call call_ = nullptr;
  void* obj_ = nullptr;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace loom::backend::cpu::fast
