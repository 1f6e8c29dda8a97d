#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace loom::backend::cpu {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
  const int64_t chunk = (n_ + n_threads_ - 1) / n_threads_;
  const int64_t b = std::min(n_, chunk * index), e = std::min(n_, b + chunk);
  if (b >= e) return;
  try {
    (*fn_)(b, e, index);
  } catch (...) {
    std::lock_guard lk(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_share(index);
    std::lock_guard lk(mu_);
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard lk(mu_);
    n_ = n;
    fn_ = &fn;
    error_ = nullptr;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_share(0);
  std::unique_lock lk(mu_);
  done_.wait(lk, [&] { return pending_ == 0; });
  if (error_) std::rethrow_exception(error_);
}

}  // namespace loom::backend::cpu
