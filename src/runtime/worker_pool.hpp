#pragma once
// A fixed pool of host worker threads (the `host` lane) running submitted jobs in FIFO order.
// Workers run at low OS priority (nice 19) so that the compute lane keeps the cores when it
// needs them, and with one OpenMP/BLAS thread each (a worker's LAPACK call must not fan out over
// the cores the compute lane is using).
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace asteria {

class WorkerPool {
 public:
  using Job = std::function<void(int worker)>;
  explicit WorkerPool(int threads, bool low_priority = true);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  void submit(Job job);
  // Jobs queued or running.
  int pending() const;
  // Blocks until every submitted job has finished.
  void drain();

 private:
  void loop(int worker, bool low_priority);
  std::vector<std::thread> threads_;
  std::deque<Job> queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  int running_ = 0;
  bool stop_ = false;
};

}  // namespace asteria
