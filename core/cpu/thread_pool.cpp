// ninfer::core - fixed thread pool with a fork-join parallel_for.
#include "core/cpu/thread_pool.h"

#include <algorithm>
#include <utility>

namespace ninfer::core {

ThreadPool::ThreadPool(unsigned n) {
    n_threads_ = n ? n : std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < n_threads_; ++i)
        workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_)
        t.join();
}

void ThreadPool::run_share(unsigned index) {
    const size_t per = (job_items_ + n_threads_ - 1) / n_threads_;
    const size_t begin = std::min(job_items_, size_t(index) * per);
    const size_t end = std::min(job_items_, begin + per);
    if (begin >= end)
        return;
    try {
        (*job_)(begin, end);
    } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_)
            error_ = std::current_exception();
    }
}

void ThreadPool::worker(unsigned index) {
    unsigned seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_)
                return;
            seen = generation_;
        }
        run_share(index);
        {
            std::lock_guard lock(mutex_);
            if (--pending_ == 0)
                done_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(size_t n_items, const std::function<void(size_t, size_t)>& fn) {
    if (n_items == 0)
        return;
    if (n_threads_ == 1 || n_items == 1) {
        fn(0, n_items);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        job_items_ = n_items;
        error_ = nullptr;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    wake_.notify_all();
    run_share(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (error_)
        std::rethrow_exception(std::exchange(error_, nullptr));
}

} // namespace ninfer::core
