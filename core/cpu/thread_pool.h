// ninfer::core - a small fixed thread pool for the CPU backend's data-parallel loops.
//
// Contract:
// - ThreadPool(n) starts n-1 workers; the calling thread is the n-th. n = 0 means
//   hardware_concurrency (at least 1).
// - parallel_for(n_items, fn) splits [0, n_items) into at most size() contiguous ranges and calls
//   fn(begin, end) once per non-empty range, returning when all are done. The split depends only
//   on n_items and size(), so results are deterministic for a given pool size. The first exception
//   thrown by fn is rethrown on the caller.
// - Not re-entrant: fn must not call parallel_for on the same pool. One caller thread at a time.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ninfer::core {

class ThreadPool {
  public:
    explicit ThreadPool(unsigned n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return n_threads_; }
    void parallel_for(size_t n_items, const std::function<void(size_t, size_t)>& fn);

  private:
    void worker(unsigned index);
    void run_share(unsigned index);

    unsigned n_threads_ = 1;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(size_t, size_t)>* job_ = nullptr;
    size_t job_items_ = 0;
    unsigned generation_ = 0;
    unsigned pending_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
};

} // namespace ninfer::core
