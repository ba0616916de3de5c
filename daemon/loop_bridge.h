// ninfer::daemon - hands work from other threads (engine, loader) to the libuv loop thread.
//
// Contract: post(fn) may be called from any thread; fn runs on the loop thread, in post order,
// soon after (one uv_async_t; wake-ups coalesce). close() must run on the loop thread; posts after
// it are dropped. Closures are destroyed on the loop thread too.
// - A wake-up runs every closure queued so far as one batch between the batch hooks (set on the
//   loop thread): the server corks its connections before and writes their output after.
// - figures() (loop thread) counts batches, closures and the loop thread's CPU time inside them
//   (core::thread_cpu_us, microseconds): the loop's share of the engine's per-token work.
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
    void set_batch_hooks(std::function<void()> begin, std::function<void()> end) {
        batch_begin_ = std::move(begin);
        batch_end_ = std::move(end);
    }

    struct Figures {
        uint64_t n_batches = 0;  // wake-ups that ran closures
        uint64_t n_closures = 0; // closures run
        uint64_t cpu_us = 0;     // loop thread CPU time inside them and the batch-end hook
    };
    const Figures& figures() const { return figures_; }

  private:
    static void on_async(uv_async_t* handle);
    uv_async_t async_{};
    std::mutex mutex_;
    std::vector<std::function<void()>> queue_;
    bool closed_ = false;
    std::function<void()> batch_begin_, batch_end_;
    Figures figures_;
};

} // namespace ninfer::daemon
