#include "backend/cpu/fast/spin_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOOM_CPU_RELAX() _mm_pause()
#else
#define LOOM_CPU_RELAX() std::this_thread::yield()
#endif

namespace loom::backend::cpu::fast {

namespace {
constexpr uint64_t kClosed = 1u << 31, kCountMask = kClosed - 1;
}  // namespace

SpinPool::SpinPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

SpinPool::~SpinPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void SpinPool::run_task(int index) {
  try {
    call_(obj_, index);
  } catch (...) {
    std::lock_guard lk(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void SpinPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      auto start = std::chrono::steady_clock::now();
      for (int spins = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++spins) {
        LOOM_CPU_RELAX();
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpinFor) {
          // Announce the sleep before re-checking, so the caller either sees a sleeper and
          // notifies, or this thread sees the new generation (both are seq_cst).
          sleepers_.fetch_add(1);
          generation_.wait(seen);
          sleepers_.fetch_sub(1);
          start = std::chrono::steady_clock::now();
        }
      }
    }
    seen = g;
    if (stop_.load()) return;
    // Join the section only while it is open; a late worker skips it.
    uint64_t st = section_.load(std::memory_order_acquire);
    while ((st >> 32) == (g & 0xffffffffu) && !(st & kClosed)) {
      if (section_.compare_exchange_weak(st, st + 1, std::memory_order_acq_rel)) {
        run_task(index);
        section_.fetch_sub(1, std::memory_order_acq_rel);
        break;
      }
    }
  }
}

void SpinPool::run_erased(Call call, void* obj) {
  if (n_threads_ == 1) {
    call(obj, 0);
    return;
  }
  call_ = call;
  obj_ = obj;
  error_ = nullptr;
  const uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
  section_.store((g & 0xffffffffu) << 32, std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: publishes call_/obj_ and orders against sleepers_
  if (sleepers_.load() > 0) generation_.notify_all();
  run_task(0);
  section_.fetch_or(kClosed, std::memory_order_acq_rel);
  for (int spins = 0; section_.load(std::memory_order_acquire) & kCountMask; ++spins) {
    LOOM_CPU_RELAX();
    // A worker preempted by another process: give it our core rather than spin against it.
    if (spins > 20000) std::this_thread::yield();
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace loom::backend::cpu::fast
