// ninfer::core - the media decode workers: a fixed pool of threads running decode jobs.
//
// Contract:
// - MediaPool(n) starts n threads (n >= 1). submit(job) queues job and returns its future; jobs
//   run in submission order as threads free up, so at most n decodes run at once whatever the
//   number of requests (ninferd --media-decode-threads). A job's exception reaches its future.
// - The destructor finishes the queued jobs, then joins the threads.
// Thread safety: submit may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace ninfer::core {

class MediaPool {
  public:
    explicit MediaPool(int n_threads);
    ~MediaPool();
    MediaPool(const MediaPool&) = delete;
    MediaPool& operator=(const MediaPool&) = delete;

    template <class F> auto submit(F job) -> std::future<decltype(job())> {
        auto task = std::make_shared<std::packaged_task<decltype(job())()>>(std::move(job));
        auto future = task->get_future();
        {
            std::lock_guard lock(mutex_);
            queue_.emplace_back([task] { (*task)(); });
        }
        ready_.notify_one();
        return future;
    }
    int n_threads() const { return int(threads_.size()); }

  private:
    void run();
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> queue_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

} // namespace ninfer::core
