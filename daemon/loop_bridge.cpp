// ninfer::daemon - loop bridge: a mutex-guarded closure queue drained by a uv_async_t callback.
#include "daemon/loop_bridge.h"

#include "core/util/thread_clock.h"

namespace ninfer::daemon {

LoopBridge::LoopBridge(uv_loop_t* loop) {
    uv_async_init(loop, &async_, on_async);
    async_.data = this;
}

LoopBridge::~LoopBridge() { close(); }

void LoopBridge::post(std::function<void()> fn) {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        queue_.push_back(std::move(fn));
    }
    uv_async_send(&async_);
}

void LoopBridge::on_async(uv_async_t* handle) {
    auto* self = static_cast<LoopBridge*>(handle->data);
    std::vector<std::function<void()>> batch;
    {
        std::lock_guard lock(self->mutex_);
        batch.swap(self->queue_);
    }
    if (batch.empty()) return;
    const size_t n = batch.size();
    const uint64_t cpu0 = core::thread_cpu_us();
    if (self->batch_begin_) self->batch_begin_();
    struct EndBatch { // the end hook runs even if a closure throws: corked output is never stranded
        LoopBridge* bridge;
        ~EndBatch() {
            if (bridge->batch_end_) bridge->batch_end_();
        }
    };
    {
        EndBatch end{self};
        for (auto& fn : batch) fn();
        batch.clear(); // the closures' captures go now, inside the measured time
    }
    ++self->figures_.n_batches;
    self->figures_.n_closures += n;
    self->figures_.cpu_us += core::thread_cpu_us() - cpu0;
}

void LoopBridge::close() {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        queue_.clear();
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

} // namespace ninfer::daemon
