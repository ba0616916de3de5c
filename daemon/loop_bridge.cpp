// ninfer::daemon - loop bridge: a mutex-guarded closure queue drained by a uv_async_t callback.
#include "daemon/loop_bridge.h"

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
    for (auto& fn : batch) fn();
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
