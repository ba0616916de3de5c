// ninfer::core - the media decode worker threads.
#include "core/media/media_pool.h"

#include <algorithm>

namespace ninfer::core {

MediaPool::MediaPool(int n_threads) {
    for (int i = 0; i < std::max(1, n_threads); ++i) threads_.emplace_back([this] { run(); });
}

MediaPool::~MediaPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void MediaPool::run() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        job(); // a packaged_task: its exception goes to the future
    }
}

} // namespace ninfer::core
