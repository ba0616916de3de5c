// ninfer::core - the I/O thread: runs file jobs (slot saves and restores) in FIFO order so a
// multi-GiB write never stalls the engine thread or the loop thread.
//
// Contract: post(job) is thread-safe; jobs run one at a time on the worker thread and must not
// throw (they report their own errors). The destructor runs the jobs already posted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ninfer::core {

class IoWorker {
  public:
    IoWorker();
    ~IoWorker();
    IoWorker(const IoWorker&) = delete;
    IoWorker& operator=(const IoWorker&) = delete;
    void post(std::function<void()> job);

  private:
    void run();
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::thread thread_;
};

} // namespace ninfer::core
