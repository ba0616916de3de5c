// ninfer::daemon - hands work from other threads (engine, loader) to the libuv loop thread.
//
// Contract: post(fn) may be called from any thread; fn runs on the loop thread, in post order,
// soon after (one uv_async_t; wake-ups coalesce). close() must run on the loop thread; posts after
// it are dropped. Closures are destroyed on the loop thread too.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include <uv.h>

namespace ninfer::daemon {

class LoopBridge {
  public:
    explicit LoopBridge(uv_loop_t* loop);
    ~LoopBridge();
    void post(std::function<void()> fn);
    void close();

  private:
    static void on_async(uv_async_t* handle);
    uv_async_t async_{};
    std::mutex mutex_;
    std::vector<std::function<void()>> queue_;
    bool closed_ = false;
};

} // namespace ninfer::daemon
