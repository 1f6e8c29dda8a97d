// A small persistent pool: parallel_for splits [0, n) into one contiguous range per thread
// and runs them, the calling thread included. Workers sleep between calls, so a decode step
// with hundreds of matmuls does not pay thread creation each time.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::backend::cpu {

class ThreadPool {
 public:
  // threads <= 0: hardware concurrency.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, thread) over a split of [0, n); returns when all ranges are done. An
  // exception thrown by fn is rethrown here (the first one).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);
  void run_share(int index);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace loom::backend::cpu
